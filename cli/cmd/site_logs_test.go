package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// fakeSiteLogEndpoint stands in for the global controller's GET .../sites/{site}/log, over
// HTTP (ServeHTTP) or as the client (SiteLog): it answers the scripted answers in turn (the last
// one again when they run out) and remembers each request's path and query.
type fakeSiteLogEndpoint struct {
	mu      sync.Mutex
	answers []restv1.SiteLog
	asked   []string
}

func (f *fakeSiteLogEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer t0ken" {
		http.Error(w, `{"message":"no token"}`, http.StatusUnauthorized)
		return
	}
	_ = json.NewEncoder(w).Encode(f.answer(r.URL.Path + "?" + r.URL.RawQuery))
}

func (f *fakeSiteLogEndpoint) SiteLog(_ context.Context, ns, site string, q url.Values) (restv1.SiteLog, error) {
	return f.answer("/api/v1/namespaces/" + ns + "/sites/" + site + "/log?" + q.Encode()), nil
}

func (f *fakeSiteLogEndpoint) answer(asked string) restv1.SiteLog {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, asked)
	a := f.answers[0]
	if len(f.answers) > 1 {
		f.answers = f.answers[1:]
	}
	return a
}

func (f *fakeSiteLogEndpoint) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

const (
	line1 = `{"ts":"2026-11-24T18:00:01.000000001Z","level":"info","logger":"bpa","msg":"patched host","host":"cp-0"}`
	line2 = `{"ts":1764007202.5,"level":"error","msg":"health check failed","error":"connection refused"}`
	line3 = `{"ts":"2026-11-24T18:00:05Z","level":"info","msg":"recovered"}`
)

func ownKubeconfig(t *testing.T) string {
	t.Helper()
	own := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(own, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: g, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t0ken}}]\ncontexts: [{name: c, context: {cluster: g, user: u, namespace: fleet-a}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return own
}

func TestSiteLogs(t *testing.T) {
	f := &fakeSiteLogEndpoint{answers: []restv1.SiteLog{{Component: "bpa", Instance: "bpa@h1", Lines: []string{line1, "not json"}}}}
	api := httptest.NewServer(f)
	defer api.Close()
	own := ownKubeconfig(t)

	out, err := runAs(t, own, "--api-server", api.URL, "site", "logs", "site-a", "--component", "bpa", "--tail", "50", "--since", "10m")
	if err != nil {
		t.Fatalf("edgefleet site logs: %v: %s", err, out)
	}
	want := "2026-11-24T18:00:01.000000Z INFO bpa patched host host=cp-0\nnot json\n"
	if out != want {
		t.Errorf("output %q; want %q", out, want)
	}
	if got := f.requests(); len(got) != 1 || got[0] != "/api/v1/namespaces/fleet-a/sites/site-a/log?component=bpa&sinceSeconds=600&tailLines=50" {
		t.Errorf("asked %q", got)
	}

	out, err = runAs(t, own, "--api-server", api.URL, "site", "logs", "site-a", "-o", "json")
	if err != nil {
		t.Fatalf("edgefleet site logs -o json: %v: %s", err, out)
	}
	var got restv1.SiteLog
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Instance != "bpa@h1" || len(got.Lines) != 2 || got.Lines[0] != line1 {
		t.Errorf("-o json: %v %q", err, out)
	}

	for _, bad := range [][]string{{"--component", "kubelet"}, {"--tail", "0"}, {"--tail", "2001"}, {"--since", "-1s"}, {"-o", "yaml"}} {
		before := len(f.requests())
		out, err := runAs(t, own, append([]string{"--api-server", api.URL, "site", "logs", "site-a"}, bad...)...)
		if err == nil || !strings.Contains(err.Error()+out, strings.TrimLeft(bad[0], "-")) {
			t.Errorf("%v: %v %q; want an error naming the flag", bad, err, out)
		}
		if len(f.requests()) != before {
			t.Errorf("%v: asked the server", bad)
		}
	}
}

// TestSiteLogsFollow: a follower asks after the newest line printed (its "ts", to the
// nanosecond, also when logged as float seconds) and prints only what is new.
func TestSiteLogsFollow(t *testing.T) {
	f := &fakeSiteLogEndpoint{answers: []restv1.SiteLog{
		{Component: "bpa", Instance: "bpa@h1", Lines: []string{line1, line2}},
		{Component: "bpa", Instance: "bpa@h1", Lines: []string{line3}},
		{Component: "bpa", Instance: "bpa@h1"},
	}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- siteLogs(ctx, f, "fleet-a", "site-a", url.Values{"component": {"bpa"}, "tailLines": {"200"}}, true, false, out, errOut)
	}()
	testutil.WaitFor(t, 30*time.Second, "the followed line", func() (bool, string) {
		return strings.Contains(out.String(), "recovered"), fmt.Sprintf("%q %q", out.String(), errOut.String())
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("follow ended with %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `ERROR health check failed error="connection refused"`) || !strings.HasSuffix(lines[2], "INFO recovered") {
		t.Errorf("printed %q; want each line once", lines)
	}
	asked := f.requests()
	if len(asked) < 2 || !strings.Contains(asked[1], "sinceTime=2025-11-24T18%3A00%3A02.5Z") {
		t.Errorf("asked %q; the follow request must ask after line 2's time", asked)
	}
}
