// Command tiny is the only binary of the node stack tests' image (TestNodeStackRunsAPod,
// TestNodeStackPodNetwork), built static at test time. Without arguments it waits for SIGTERM or
// SIGINT, as a pod's pause (sandbox) container does; with -http ADDR it also answers HTTP
// requests with its hostname. With -get URL it is a client instead: it makes -count requests,
// each on a new connection, prints one line per request (the answer, or "error: ..."), and
// exits.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("http", "", "serve HTTP on this address")
	get := flag.String("get", "", "request this URL instead of serving")
	count := flag.Int("count", 1, "with -get: how many requests")
	flag.Parse()
	if *get != "" {
		fetch(*get, *count)
		return
	}
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

// fetch requests url count times. No keep-alive: behind a Service, each connection may reach
// another backend.
func fetch(url string, count int) {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range count {
		resp, err := c.Get(url)
		if err != nil {
			fmt.Printf("error: %v\n", err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			fmt.Printf("error: %v\n", err)
			continue
		}
		fmt.Println(strings.TrimSpace(string(body)))
	}
}
