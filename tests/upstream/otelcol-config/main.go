// Command otelcol-config resolves a collector configuration as the OpenTelemetry collector
// (contrib 0.139.0, confmap v1.45.0) does before it starts, and prints what the basic-auth
// extension named on the command line would log in with.
//
// It runs the collector's own resolver with its env and file providers (`${env:...}`,
// `${file:...}`, each value read through confmap.NewRetrievedFromYAML) and decodes the
// extension's `client_auth` into the struct basicauthextension v0.139.0 declares
// (config.go:26-30: Username string, Password configopaque.String), with the collector's own
// decoding hooks (confmap.Conf.Unmarshal). The extension itself is not linked: it only
// base64-encodes what this prints, and linking it would pull in gRPC.
//
// Usage: otelcol-config CONFIG EXTENSION. Prints {"username": ..., "password": ...} as JSON;
// exit 1 when the configuration does not resolve or decode.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
)

type clientAuthSettings struct {
	Username string              `mapstructure:"username"`
	Password configopaque.String `mapstructure:"password"`
}

type basicAuth struct {
	ClientAuth *clientAuthSettings `mapstructure:"client_auth,omitempty"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: otelcol-config CONFIG EXTENSION")
		os.Exit(2)
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + os.Args[1]},
		ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	if err != nil {
		fail(err)
	}
	conf, err := resolver.Resolve(context.Background())
	if err != nil {
		fail(err)
	}
	sub, err := conf.Sub("extensions::" + os.Args[2])
	if err != nil {
		fail(err)
	}
	var cfg basicAuth
	if err := sub.Unmarshal(&cfg); err != nil {
		fail(err)
	}
	if cfg.ClientAuth == nil {
		fail(fmt.Errorf("extension %s has no client_auth", os.Args[2]))
	}
	out, _ := json.Marshal(map[string]string{"username": cfg.ClientAuth.Username,
		"password": string(cfg.ClientAuth.Password)})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
