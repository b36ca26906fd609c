// Command dockerfile-lint runs BuildKit's own Dockerfile checks (what `docker build --check`
// runs: dockerfile2llb.DockerfileLint at the pinned BuildKit version) on Dockerfiles, offline.
//
// Base images are not pulled: their configuration is taken as empty, so only checks that do not
// depend on a base image's ENV see the whole truth. Exit 0 when clean, 1 with findings (one
// line each: file:line: rule: message), 2 when a file cannot be read or parsed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/opencontainers/go-digest"
)

// offline answers every base-image lookup with an empty image configuration.
type offline struct{}

func (offline) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	config := []byte(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[]}}`)
	return ref, digest.FromBytes(config), config, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dockerfile-lint DOCKERFILE...")
		os.Exit(2)
	}
	findings := 0
	background := context.Background()
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		buildContext := llb.Local("context")
		definition, err := buildContext.Marshal(background)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		source := llb.NewSourceMap(&buildContext, path, "Dockerfile", data)
		source.Definition = definition // as dockerui does for the build context (frontend/dockerui/config.go:410)
		opt := dockerfile2llb.ConvertOpt{SourceMap: source, MetaResolver: offline{}}
		results, err := dockerfile2llb.DockerfileLint(background, data, opt)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		if results.Error != nil {
			line := 0
			if len(results.Error.Location.Ranges) > 0 {
				line = int(results.Error.Location.Ranges[0].Start.Line)
			}
			fmt.Fprintf(os.Stderr, "%s:%d: %s\n", path, line, results.Error.Message)
			os.Exit(2)
		}
		for _, warning := range results.Warnings {
			line := 0
			if warning.Location != nil && len(warning.Location.Ranges) > 0 {
				line = int(warning.Location.Ranges[0].Start.Line)
			}
			fmt.Printf("%s:%d: %s: %s (%s)\n", path, line, warning.RuleName, warning.Detail, warning.URL)
			findings++
		}
	}
	if findings > 0 {
		os.Exit(1)
	}
}
