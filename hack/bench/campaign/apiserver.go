package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/edgefleet/edgefleet/test/controlplane"
)

// format lists the counts per site, largest first, as "VERB resource 1.23".
func format(b controlplane.RequestCounts, sites int) string {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if b[x] != b[y] {
			if b[x] > b[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %-45s %8.0f  %6.2f/site\n", k, b[k], b[k]/float64(sites))
	}
	return sb.String()
}

// profile fetches a CPU profile of d from a Go /debug/pprof endpoint (base is the server's URL,
// httpClient authenticates to it) into file.
func profile(ctx context.Context, httpClient *http.Client, base string, d time.Duration, file string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(base, "/"), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
}

// startProfiles starts CPU profiles of the controller and the control planes (when prof.dir is
// set) and returns a function that waits for them.
func startProfiles(ctx context.Context, prof profiling, planes []*controlplane.ControlPlane, n int) func() error {
	if prof.dir == "" {
		return func() error { return nil }
	}
	errs := make(chan error, len(planes)+1)
	file := func(who string) string { return filepath.Join(prof.dir, fmt.Sprintf("%s-%d.pprof", who, n)) }
	go func() { errs <- profile(ctx, http.DefaultClient, prof.controller, prof.d, file("controller")) }()
	for _, cp := range planes {
		go func() {
			httpClient, err := rest.HTTPClientFor(cp.Config)
			if err != nil {
				errs <- err
				return
			}
			errs <- profile(ctx, httpClient, cp.Config.Host, prof.d, file("apiserver-"+cp.Name))
		}()
	}
	return func() error {
		logf("%d sites: waiting for the CPU profiles (%s) to end", n, prof.d)
		var all []error
		for range len(planes) + 1 {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

// freePort asks the kernel for a free TCP port on loopback.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
