// Argo CD v3.6.1's application controller and repo server, and a Redis for their cache, in one
// binary for the fleet twin. It dispatches on ARGOCD_BINARY_NAME (or argv[0]) as Argo CD's own
// cmd/main.go does, but links only the two commands the twin runs (1,754 packages, not 2,325).
// "argocd-redis ADDR" serves miniredis, the in-memory Redis Argo CD's own tests use, on ADDR.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/alicebob/miniredis/v2"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func redis(addr string) error {
	server := miniredis.NewMiniRedis()
	if err := server.StartAddr(addr); err != nil {
		return err
	}
	fmt.Printf("redis listening on %s\n", server.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Close()
	return nil
}

func main() {
	name := filepath.Base(os.Args[0])
	if val := os.Getenv("ARGOCD_BINARY_NAME"); val != "" {
		name = val
	}
	var command *cobra.Command
	switch name {
	case common.CommandApplicationController:
		command = appcontroller.NewCommand()
	case common.CommandRepoServer:
		command = reposerver.NewCommand()
	case "argocd-redis":
		if len(os.Args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: ARGOCD_BINARY_NAME=argocd-redis argocd HOST:PORT")
			os.Exit(2)
		}
		if err := redis(os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "set ARGOCD_BINARY_NAME to %s, %s or argocd-redis\n",
			common.CommandApplicationController, common.CommandRepoServer)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
