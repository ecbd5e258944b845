// Command tiny is the only binary of the node stack test's image (TestNodeStackRunsAPod), built
// static at test time. Without arguments it waits for SIGTERM or SIGINT, as a pod's pause
// (sandbox) container does; with -http ADDR it also answers HTTP requests with its hostname.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("http", "", "serve HTTP on this address")
	flag.Parse()
	if *addr != "" {
		host, err := os.Hostname()
		if err != nil {
			log.Fatalf("tiny: hostname: %v", err)
		}
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", host)
		})
		go func() { log.Fatal(http.ListenAndServe(*addr, nil)) }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
