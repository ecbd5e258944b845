package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// fakeSiteLogs stands in for sitelogapi.Server: it lets admin and viewer read, answers two
// lines (one hostile, one not JSON) and remembers what it was asked.
type fakeSiteLogs struct {
	mu    sync.Mutex
	asked []string
}

func (f *fakeSiteLogs) Logs(_ context.Context, u kubeauth.User, site types.NamespacedName, q sitelogapi.Query) (restv1.SiteLog, error) {
	f.mu.Lock()
	since := ""
	if q.SinceTime != nil {
		since = " since " + q.SinceTime.Format("15:04:05.000000000")
	}
	f.asked = append(f.asked, u.Name+" "+site.String()+" "+q.Component+since)
	f.mu.Unlock()
	if u.Name != "admin" && u.Name != "viewer" {
		return restv1.SiteLog{}, &problem.Problem{Status: http.StatusForbidden, Message: "user " + u.Name + " may not read the logs of site " + site.String()}
	}
	return restv1.SiteLog{Component: q.Component, Instance: "lc@test", Lines: []string{
		`{"ts":"2026-11-24T18:00:01.000000001Z","level":"info","logger":"site","msg":"<script>alert(1)</script>","site":"store-1"}`,
		`not json at all`,
	}}, nil
}

func TestLogsOnTheSitePage(t *testing.T) {
	b := newBed(t, Limits{})
	const url = "/ui/sites/fleet/store-1/log"
	if a := b.do(t, "GET", "/ui/sites/fleet/store-1", "admin-token", "", nil); a.status != http.StatusOK || !strings.Contains(a.body, `data-log-url="`+url+`"`) || !strings.Contains(a.body, "logs.js") {
		t.Errorf("admin's site page: %d, no Logs panel", a.status)
	}
	// team may see the site, not read its logs.
	if a := b.do(t, "GET", "/ui/sites/fleet/store-1", "team-token", "", nil); a.status != http.StatusOK || strings.Contains(a.body, "data-log-url") {
		t.Errorf("team's site page: %d, Logs panel shown", a.status)
	}
	a := b.do(t, "GET", url+"?component=bpa&sinceTime=2026-11-24T18:00:00.5Z", "viewer-token", "", nil)
	if a.status != http.StatusOK || a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("viewer's logs: %d %s", a.status, a.body)
	}
	var got siteLogAnswer
	if err := json.Unmarshal([]byte(a.body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Lines) != 2 || got.Lines[0].Text != `2026-11-24T18:00:01.000000Z INFO site <script>alert(1)</script> site=store-1` || got.Lines[0].Level != "info" ||
		got.Lines[1].Text != "not json at all" || got.Newest != "2026-11-24T18:00:01.000000001Z" {
		t.Errorf("answer %+v", got)
	}
	// JSON escapes the markup; the script sets it as text only.
	if strings.Contains(a.body, "<script>") {
		t.Errorf("answer carries markup unescaped: %s", a.body)
	}
	if a := b.do(t, "GET", url, "team-token", "", nil); a.status != http.StatusForbidden || !strings.Contains(a.body, "may not read the logs") {
		t.Errorf("team's logs: %d %s; want 403 with the reason", a.status, a.body)
	}
	if a := b.do(t, "GET", url+"?tailLines=5000", "admin-token", "", nil); a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"tailLines"`) {
		t.Errorf("bad tailLines: %d %s", a.status, a.body)
	}
	// The script reads every answer as JSON: no session is a 401 saying so, not the login page.
	if a := b.do(t, "GET", url, "", "", nil); a.status != http.StatusUnauthorized || !jsonError(a, "Sign in") {
		t.Errorf("no session: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	if got := strings.Join(b.logs.asked, ", "); got != "viewer fleet/store-1 bpa since 18:00:00.500000000, team fleet/store-1 local-controller" {
		t.Errorf("asked %s", got)
	}
}
