package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// RequestCounts are an API server's apiserver_request_total counters, summed by
// "VERB resource[/subresource]" (e.g. "LIST secrets", "PUT applicationclusters/status").
type RequestCounts map[string]float64

// Requests reads the control plane's request counters from its /metrics.
func (cp *ControlPlane) Requests(ctx context.Context) (RequestCounts, error) {
	httpClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cp.Config.Host, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cp.Config.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", cp.Config.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", cp.Config.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s/metrics: %s: %s", cp.Config.Host, resp.Status, body)
	}
	const metric = "apiserver_request_total{"
	out := RequestCounts{}
	for _, line := range strings.Split(string(body), "\n") {
		labelsEnd := strings.LastIndex(line, "}")
		if !strings.HasPrefix(line, metric) || labelsEnd < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[labelsEnd+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s/metrics: line %q: %w", cp.Config.Host, line, err)
		}
		labels := parseLabels(line[len(metric):labelsEnd])
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out, nil
}

// parseLabels parses a Prometheus label set (without braces); the values of the labels read
// here hold no escaped quotes.
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

// Sub returns the counts of c that grew since before, without the unchanged ones.
func (c RequestCounts) Sub(before RequestCounts) RequestCounts {
	out := RequestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Total sums the counts.
func (c RequestCounts) Total() float64 {
	t := 0.0
	for _, v := range c {
		t += v
	}
	return t
}
