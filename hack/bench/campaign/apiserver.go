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
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// requestCounts are an API server's apiserver_request_total, summed by "VERB resource[/subresource]".
type requestCounts map[string]float64

// scrapeRequests reads an API server's request counters through cfg (an admin config).
func scrapeRequests(ctx context.Context, cfg *rest.Config) (requestCounts, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", cfg.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", cfg.Host, err)
	}
	out := requestCounts{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labelsEnd := strings.LastIndex(line, "}")
		if labelsEnd < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[labelsEnd+1:]), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):labelsEnd])
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out, nil
}

// parseLabels parses a Prometheus label set (without braces); values hold no escaped quotes
// in the labels the harness reads.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		value, rest, _ := strings.Cut(rest, `"`)
		out[strings.TrimPrefix(name, ",")] = value
		s = strings.TrimPrefix(rest, ",")
	}
	return out
}

// sub returns the counts of b that are not in a, without zero entries.
func (b requestCounts) sub(a requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range b {
		if d := v - a[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total sums the counts.
func (b requestCounts) total() float64 {
	t := 0.0
	for _, v := range b {
		t += v
	}
	return t
}

// format lists the counts per site, largest first, as "VERB resource 1.23".
func (b requestCounts) format(sites int) string {
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
func startProfiles(ctx context.Context, prof profiling, planes []*testenv.ControlPlane, n int) func() error {
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
