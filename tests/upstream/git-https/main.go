// A git server and a Helm chart repository over HTTPS on loopback, for the fleet twin: what a
// platform team's git host and chart mirror are to Argo CD and Flux (Argo CD refuses plain HTTP
// for git). Git is git's own smart HTTP protocol, `git http-backend` run as CGI by Go's net/http/cgi;
// /charts/ serves a folder holding `helm package` archives and the `helm repo index` of them.
//
//	git-https -listen 127.0.0.1:0 -repos DIR -charts DIR -cert server.crt -key server.key
//
// Prints "listening on https://HOST:PORT" once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	repos := flag.String("repos", "", "folder of bare repositories, served at /git/<name>.git")
	charts := flag.String("charts", "", "folder served at /charts/ (a Helm repository)")
	cert := flag.String("cert", "", "TLS certificate (PEM)")
	key := flag.String("key", "", "TLS private key (PEM)")
	flag.Parse()
	if *repos == "" || *cert == "" || *key == "" {
		fmt.Fprintln(os.Stderr, "usage: git-https -repos DIR -cert FILE -key FILE [-charts DIR] [-listen ADDR]")
		os.Exit(2)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		log.Fatalf("git is not on PATH: %v", err)
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + *repos, "GIT_HTTP_EXPORT_ALL=1"},
	}
	mux := http.NewServeMux()
	mux.Handle("/git/", http.StripPrefix("/git", backend))
	if *charts != "" {
		mux.Handle("/charts/", http.StripPrefix("/charts/", http.FileServer(http.Dir(*charts))))
	}
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s", r.Method, r.URL.RequestURI())
		if strings.Contains(r.URL.Path, "..") {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on https://%s\n", listener.Addr())
	os.Stdout.Sync()
	log.Fatal(http.ServeTLS(listener, logged, *cert, *key))
}
