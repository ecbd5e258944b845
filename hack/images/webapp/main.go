// Command webapp is the test application of the application clusters (hack/images/webapp,
// hack/charts/webapp). It serves HTTP on -http (:8080): GET / answers "hello from POD on
// NODE", its pod's and node's names from $POD_NAME and $NODE_NAME (the downward API);
// GET /healthz answers "ok" while it serves, for probes.
//
// On SIGTERM or SIGINT it drains: for -drain (5 s) it goes on serving while /healthz fails
// (the endpoints and every node's kube-proxy rules forget the pod meanwhile), then it stops
// accepting connections and finishes the requests in flight (http.Server.Shutdown) and exits
// 0. A pod evicted or replaced by a rollout so loses no request.
//
// With -get URL it is a client instead: it makes -count requests, each on a new connection
// (behind a Service, each may reach another backend), prints one line per request (the
// answer, or "error: ..."), and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("http", ":8080", "serve HTTP on this address")
	drain := flag.Duration("drain", 5*time.Second, "on SIGTERM, serve this long (failing /healthz) before shutting down")
	get := flag.String("get", "", "request this URL instead of serving")
	count := flag.Int("count", 1, "with -get: how many requests")
	flag.Parse()
	if *get != "" {
		fetch(*get, *count)
		return
	}
	pod, node := os.Getenv("POD_NAME"), os.Getenv("NODE_NAME")
	if pod == "" || node == "" {
		log.Fatal("webapp: $POD_NAME and $NODE_NAME must be set (the downward API: metadata.name, spec.nodeName)")
	}
	if err := serve(*addr, *drain, pod, node); err != nil {
		log.Fatalf("webapp: %v", err)
	}
}

// serve answers on addr until SIGTERM or SIGINT, then drains and shuts down.
func serve(addr string, drain time.Duration, pod, node string) error {
	var draining atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s on %s\n", pod, node)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	failed := make(chan error, 1)
	go func() { failed <- srv.ListenAndServe() }()
	log.Printf("webapp: %s on %s serving on %s", pod, node, addr)
	select {
	case err := <-failed:
		return err
	case <-ctx.Done():
	}
	draining.Store(true)
	log.Printf("webapp: terminating: serving %s more, then finishing the requests in flight", drain)
	time.Sleep(drain)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-failed; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Print("webapp: shut down")
	return nil
}

// fetch requests url count times, each on a new connection. A request may take up to 10 s: a
// name is looked up over UDP, and a query the network lost is asked again only after the
// resolver's 5 s timeout (seen once in 40 on a loaded machine with a 3 s limit).
func fetch(url string, count int) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range count {
		resp, err := c.Get(url)
		if err != nil {
			fmt.Printf("error: %v\n", err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			fmt.Printf("error: %v\n", err)
		case resp.StatusCode != http.StatusOK:
			fmt.Printf("error: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		default:
			fmt.Println(strings.TrimSpace(string(body)))
		}
	}
}
