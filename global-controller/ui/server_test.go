package ui

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// fakeAuth knows tokens by value; admin may do anything, viewer get and list anywhere,
// team get and list in namespace fleet only, nobody nothing.
type fakeAuth struct {
	mu     sync.Mutex
	tokens map[string]kubeauth.User
}

func newFakeAuth() *fakeAuth {
	return &fakeAuth{tokens: map[string]kubeauth.User{
		"admin-token":  {Name: "admin"},
		"viewer-token": {Name: "viewer"},
		"team-token":   {Name: "team"},
		"nobody-token": {Name: "nobody"},
	}}
}

func (f *fakeAuth) Authenticate(_ context.Context, token string) (kubeauth.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.tokens[token]
	if !ok {
		return kubeauth.User{}, fmt.Errorf("%w: token rejected", kubeauth.ErrUnauthenticated)
	}
	return u, nil
}

func (f *fakeAuth) revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, token)
}

func (f *fakeAuth) AuthorizeAccess(_ context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error) {
	read := a.Verb == "get" || a.Verb == "list"
	switch {
	case u.Name == "admin", u.Name == "viewer" && read, u.Name == "team" && read && a.Namespace == "fleet" && a.Resource != "sites/log":
		return true, "", nil
	}
	return false, "RBAC says no", nil
}

// eventReader answers a site's Events and remembers what it was asked.
type eventReader struct {
	client.Reader
	mu     sync.Mutex
	fields []string
}

func (e *eventReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	e.mu.Lock()
	e.fields = append(e.fields, o.FieldSelector.String())
	e.mu.Unlock()
	list.(*eventsv1.EventList).Items = []eventsv1.Event{
		{Reason: "OperationSucceeded", Note: "operation uid-1 is Succeeded", Type: "Normal", EventTime: metav1.NewMicroTime(t0)},
		{Reason: "APIServerReachable", Note: "Reachable=True", Type: "Normal", EventTime: metav1.NewMicroTime(t0.Add(time.Minute))},
	}
	return nil
}

type bed struct {
	srv         *httptest.Server
	cache       client.Client
	auth        *fakeAuth
	hub         *Hub
	events      *eventReader
	recorder    *events.FakeRecorder
	kubeconfigs *fakeKubeconfigs
	logs        *fakeSiteLogs
	store       *fakeArtifactStore
}

func newBed(t *testing.T, limits Limits) *bed {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := fleetv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	running := &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "patch-1"},
		Spec:       fleetv1.CampaignSpec{Action: fleetv1.ActionPatch, Release: "r1", Targets: fleetv1.CampaignTargets{Names: []string{"store-1"}}},
		Status:     fleetv1.CampaignStatus{Phase: fleetv1.CampaignRunning, Total: 1, Progress: "0/1", Waves: 1, Counts: fleetv1.CampaignCounts{InProgress: 1}},
	}
	host := &fleetv1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "store-1-cp-0"},
		Spec: fleetv1.HostSpec{SiteRef: fleetv1.SiteReference{Name: "store-1"}, Role: fleetv1.RoleControlPlane, BootMACAddress: "52:54:00:00:00:01"},
		Status: fleetv1.HostStatus{Cluster: &fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: "v1.36.3",
			Hardware: &sitev1.HostHardware{CPUs: 4, MemoryMiB: 8192, Disks: []sitev1.HostDisk{{Name: "/dev/sda", SizeBytes: 240 << 30}}}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(site(), running, host, testRelease()).WithStatusSubresource(&fleetv1.Campaign{}).
		WithIndex(&fleetv1.Host{}, index.HostSite, func(o client.Object) []string {
			h := o.(*fleetv1.Host)
			return []string{index.Key(h.Namespace, h.Spec.SiteRef.Name)}
		}).Build()
	b := &bed{cache: c, auth: newFakeAuth(), hub: NewHub(), events: &eventReader{}, recorder: events.NewFakeRecorder(10), kubeconfigs: &fakeKubeconfigs{},
		logs: &fakeSiteLogs{}, store: newFakeArtifactStore()}
	s, err := New(Config{Cache: c, Events: b.events, Campaigns: c, Recorder: b.recorder, Auth: b.auth, Changes: b.hub, Log: testr.New(t), Limits: limits,
		Kubeconfigs: b.kubeconfigs, Logs: b.logs, Artifacts: b.store})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = httptest.NewServer(s.Handler())
	t.Cleanup(b.srv.Close)
	return b
}

// answer is what the server answered, read and closed.
type answer struct {
	status  int
	header  http.Header
	cookies []*http.Cookie
	body    string
}

// do sends a request with the token's cookie (none when empty) and the given Origin
// ("self" for the server's own), without following redirects.
func (b *bed) do(t *testing.T, method, path, token, origin string, form url.Values) answer {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
	}
	switch origin {
	case "":
	case "self":
		req.Header.Set("Origin", b.srv.URL)
	default:
		req.Header.Set("Origin", origin)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, cookies: resp.Cookies(), body: string(data)}
}

func TestPages(t *testing.T) {
	b := newBed(t, Limits{})
	cases := []struct {
		name, method, path, token, origin string
		form                              url.Values
		wantStatus                        int
		wantLocation                      string
		want, wantNot                     []string
	}{
		{name: "no cookie: to the login page", method: "GET", path: "/ui/sites?state=Ready",
			wantStatus: http.StatusSeeOther, wantLocation: "/ui/login?next=%2Fui%2Fsites%3Fstate%3DReady"},
		{name: "rejected cookie: to the login page, saying why", method: "GET", path: "/ui/", token: "stolen",
			wantStatus: http.StatusSeeOther, wantLocation: "/ui/login?expired=1&next=%2Fui%2F"},
		{name: "login page", method: "GET", path: "/ui/login?expired=1", wantStatus: http.StatusOK,
			want: []string{`name="token"`, "Your token was rejected"}},
		{name: "login with a bad token", method: "POST", path: "/ui/login", origin: "self", form: url.Values{"token": {"nope"}},
			wantStatus: http.StatusUnauthorized, want: []string{"rejected this token"}},
		{name: "login from another site's form", method: "POST", path: "/ui/login", origin: "https://evil.example", form: url.Values{"token": {"admin-token"}},
			wantStatus: http.StatusForbidden, want: []string{"Origin"}},
		{name: "login, then the page asked for", method: "POST", path: "/ui/login", origin: "self", form: url.Values{"token": {"admin-token"}, "next": {"/ui/sites?q=x"}},
			wantStatus: http.StatusSeeOther, wantLocation: "/ui/sites?q=x"},
		{name: "login never leads elsewhere", method: "POST", path: "/ui/login", origin: "self", form: url.Values{"token": {"admin-token"}, "next": {"//evil.example/ui/"}},
			wantStatus: http.StatusSeeOther, wantLocation: "/ui/"},
		{name: "overview", method: "GET", path: "/ui/", token: "viewer-token", wantStatus: http.StatusOK,
			want: []string{`data-state="Ready"><span class="count">1</span>`, "patch-1", `id="live"`, "viewer"}},
		{name: "overview of every namespace: the sites of the namespaces the user may read, no campaigns", method: "GET", path: "/ui/", token: "team-token",
			wantStatus: http.StatusOK, want: []string{`id="total">1<`, "team may not list campaigns: RBAC says no"}, wantNot: []string{"patch-1"}},
		{name: "overview for a user who may read no site", method: "GET", path: "/ui/", token: "nobody-token", wantStatus: http.StatusForbidden,
			want: []string{"nobody may not list sites.fleet.edgefleet.io in all namespaces: RBAC says no"}},
		{name: "overview of the team's namespace", method: "GET", path: "/ui/?namespace=fleet", token: "team-token", wantStatus: http.StatusOK,
			want: []string{"namespace fleet"}},
		{name: "site list", method: "GET", path: "/ui/sites?state=Ready&sort=heartbeat&order=desc", token: "viewer-token", wantStatus: http.StatusOK,
			want: []string{`data-site="store-1" data-state="Ready"`, `<span id="matched">1</span>`}},
		{name: "site list with a bad filter", method: "GET", path: "/ui/sites?state=Failed", token: "viewer-token", wantStatus: http.StatusBadRequest,
			want: []string{"state: must be one of"}},
		{name: "site page", method: "GET", path: "/ui/sites/fleet/store-1", token: "viewer-token", wantStatus: http.StatusOK,
			want: []string{"store-1-cp-0", "provisioned", "v1.36.3", "4 CPUs, 8Gi memory, 1 disk (240Gi), 0 NICs", "KubeconfigValid", "OperationSucceeded", "APIServerReachable"}},
		{name: "missing site", method: "GET", path: "/ui/sites/fleet/store-9", token: "viewer-token", wantStatus: http.StatusNotFound,
			want: []string{`site &#34;store-9&#34; not found in namespace &#34;fleet&#34;`}},
		{name: "campaign page for a viewer: no brakes", method: "GET", path: "/ui/campaigns/fleet/patch-1", token: "viewer-token", wantStatus: http.StatusOK,
			want: []string{`id="phase">Running`, `id="progress">0/1`}, wantNot: []string{`id="pause"`, `id="abort"`, `id="resume"`}},
		{name: "campaign page for an admin", method: "GET", path: "/ui/campaigns/fleet/patch-1", token: "admin-token", wantStatus: http.StatusOK,
			want: []string{`id="pause"`, `id="abort"`}, wantNot: []string{`id="resume"`}},
		{name: "a viewer's forged pause", method: "POST", path: "/ui/campaigns/fleet/patch-1/pause", token: "viewer-token", origin: "self",
			wantStatus: http.StatusForbidden, want: []string{"viewer may not patch campaigns.fleet.edgefleet.io &#34;patch-1&#34;"}},
		{name: "an admin's pause sent by another site", method: "POST", path: "/ui/campaigns/fleet/patch-1/pause", token: "admin-token", origin: "https://evil.example",
			wantStatus: http.StatusForbidden, want: []string{"Origin"}},
		{name: "an admin's pause without an Origin", method: "POST", path: "/ui/campaigns/fleet/patch-1/pause", token: "admin-token",
			wantStatus: http.StatusForbidden, want: []string{"Origin"}},
		{name: "unknown action", method: "POST", path: "/ui/campaigns/fleet/patch-1/explode", token: "admin-token", origin: "self",
			wantStatus: http.StatusNotFound, want: []string{"pause, resume or abort"}},
		{name: "static files need no token", method: "GET", path: "/ui/static/ui.js", wantStatus: http.StatusOK, want: []string{"EventSource"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do(t, tc.method, tc.path, tc.token, tc.origin, tc.form)
			body := a.body
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body:\n%s", a.status, tc.wantStatus, body)
			}
			if got := a.header.Get("Location"); got != tc.wantLocation {
				t.Errorf("Location %q, want %q", got, tc.wantLocation)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(body, w) {
					t.Errorf("body has %q", w)
				}
			}
		})
	}
	if got := b.events.fields; len(got) == 0 || !strings.Contains(got[0], "regarding.kind=Site") || !strings.Contains(got[0], "regarding.name=store-1") {
		t.Errorf("events were listed with field selectors %q, want the site's", got)
	}
	camp := &fleetv1.Campaign{}
	if err := b.cache.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "patch-1"}, camp); err != nil || camp.Spec.Paused {
		t.Fatalf("refused pauses paused the campaign: %v, paused %v", err, camp.Spec.Paused)
	}
}

func TestLoginCookie(t *testing.T) {
	b := newBed(t, Limits{})
	cookies := b.do(t, "POST", "/ui/login", "", "self", url.Values{"token": {"admin-token"}}).cookies
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	c := cookies[0]
	if c.Name != tokenCookie || c.Value != "admin-token" || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" {
		t.Errorf("cookie %+v: want %s=the token, HttpOnly, Secure, SameSite=Strict, Path=/ui", c, tokenCookie)
	}
	if c := b.do(t, "POST", "/ui/logout", "admin-token", "self", url.Values{}).cookies; len(c) != 1 || c[0].MaxAge >= 0 || c[0].Value != "" {
		t.Errorf("logout's cookies %v, want the token cookie removed", c)
	}
}

func TestCampaignActions(t *testing.T) {
	b := newBed(t, Limits{})
	key := client.ObjectKey{Namespace: "fleet", Name: "patch-1"}
	for _, step := range []struct {
		action          string
		paused, aborted bool
		event           string
	}{
		{"pause", true, false, "PausedFromUI paused from the web UI by admin"},
		// Paused already: no change, no event (the next step reads the resume's).
		{"pause", true, false, ""},
		{"resume", false, false, "ResumedFromUI resumed from the web UI by admin"},
		{"abort", false, true, "AbortedFromUI aborted from the web UI by admin"},
	} {
		a := b.do(t, "POST", "/ui/campaigns/fleet/patch-1/"+step.action, "admin-token", "self", url.Values{})
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/campaigns/fleet/patch-1" {
			t.Fatalf("%s: status %d, Location %q; want 303 to the campaign:\n%s", step.action, a.status, a.header.Get("Location"), a.body)
		}
		camp := &fleetv1.Campaign{}
		if err := b.cache.Get(t.Context(), key, camp); err != nil {
			t.Fatal(err)
		}
		if camp.Spec.Paused != step.paused || camp.Spec.Abort != step.aborted {
			t.Errorf("after %s: paused %v, abort %v; want %v, %v", step.action, camp.Spec.Paused, camp.Spec.Abort, step.paused, step.aborted)
		}
		if step.event == "" {
			continue
		}
		if e := <-b.recorder.Events; !strings.Contains(e, step.event) {
			t.Errorf("after %s: event %q, want one with %q", step.action, e, step.event)
		}
	}
	camp := &fleetv1.Campaign{}
	if err := b.cache.Get(t.Context(), key, camp); err != nil {
		t.Fatal(err)
	}
	camp.Status.Phase = fleetv1.CampaignAborted
	if err := b.cache.Status().Update(t.Context(), camp); err != nil {
		t.Fatal(err)
	}
	if a := b.do(t, "POST", "/ui/campaigns/fleet/patch-1/resume", "admin-token", "self", url.Values{}); a.status != http.StatusConflict || !strings.Contains(a.body, "has ended (Aborted)") {
		t.Errorf("resume of an ended campaign: %d, want 409 saying it ended:\n%s", a.status, a.body)
	}
}

// stream opens a live stream of path and returns its status, Content-Type and a function
// reading its next event.
func (b *bed) stream(t *testing.T, path, token string) (status int, contentType string, next func() (event, data string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := bufio.NewReader(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), func() (event, data string) {
		t.Helper()
		var lines []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read the stream: %v (event %q so far)", err, event)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && event != "":
				return event, strings.Join(lines, "\n")
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				lines = append(lines, strings.TrimPrefix(line, "data: "))
			}
		}
	}
}

func TestStream(t *testing.T) {
	limits := DefaultLimits()
	limits.UpdateInterval, limits.MaxStreams = 10*time.Millisecond, 1
	b := newBed(t, limits)
	status, ct, next := b.stream(t, "/ui/campaigns/fleet/patch-1", "viewer-token")
	if status != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", status, ct)
	}
	if ev, data := next(); ev != eventUpdate || !strings.Contains(data, `id="progress">0/1`) {
		t.Fatalf("first event %s:\n%s\nwant an update with the progress", ev, data)
	}

	t.Run("one stream at a time", func(t *testing.T) {
		if a := b.do(t, "GET", "/ui/campaigns/fleet/patch-1", "viewer-token", "", nil); a.status != http.StatusOK {
			t.Fatalf("the page itself: %d", a.status)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.srv.URL+"/ui/campaigns/fleet/patch-1", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.AddCookie(&http.Cookie{Name: tokenCookie, Value: "viewer-token"})
		second, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		second.Body.Close()
		if second.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a second stream over MaxStreams 1: %d, want 503", second.StatusCode)
		}
	})

	camp := &fleetv1.Campaign{}
	if err := b.cache.Get(t.Context(), client.ObjectKey{Namespace: "fleet", Name: "patch-1"}, camp); err != nil {
		t.Fatal(err)
	}
	camp.Status.Counts = fleetv1.CampaignCounts{Succeeded: 1}
	camp.Status.Phase = fleetv1.CampaignSucceeded
	if err := b.cache.Status().Update(t.Context(), camp); err != nil {
		t.Fatal(err)
	}
	b.hub.Publish(Change{Kind: KindSite, Namespace: "fleet", Name: "store-1"}) // not watched by this page
	b.hub.Publish(Change{Kind: KindCampaign, Namespace: "fleet", Name: "patch-1"})
	if ev, data := next(); ev != eventUpdate || !strings.Contains(data, `id="progress">1/1`) || !strings.Contains(data, `id="phase">Succeeded`) {
		t.Fatalf("event after the change %s:\n%s\nwant an update with 1/1 and Succeeded", ev, data)
	}

	b.auth.revoke("viewer-token")
	b.hub.Publish(Change{Kind: KindCampaign, Namespace: "fleet", Name: "patch-1"})
	if ev, data := next(); ev != eventDenied || !strings.Contains(data, "token was rejected") {
		t.Fatalf("event after the token was revoked: %s %q, want denied", ev, data)
	}
}

func TestSSE(t *testing.T) {
	got := string(sse("update", []byte("<p>a</p>\n<p>b</p>\r\n")))
	if want := "event: update\ndata: <p>a</p>\ndata: <p>b</p>\n\n"; got != want {
		t.Errorf("sse = %q, want %q", got, want)
	}
}

func TestHub(t *testing.T) {
	h := NewHub()
	sites := h.Subscribe(inNamespace("fleet", KindSite))
	all := h.Subscribe(inNamespace("", KindSite, KindCampaign))
	for range 3 {
		h.Publish(Change{Kind: KindSite, Namespace: "fleet", Name: "a"})
	}
	h.Publish(Change{Kind: KindCampaign, Namespace: "other", Name: "c"})
	if len(sites.c) != 1 || len(all.c) != 1 {
		t.Errorf("pending notifications %d and %d; want 1 each, however many changes", len(sites.c), len(all.c))
	}
	<-sites.C
	h.Publish(Change{Kind: KindCampaign, Namespace: "fleet", Name: "c"})
	if len(sites.c) != 0 {
		t.Error("a subscription to sites was notified of a campaign")
	}
	sites.Close()
	all.Close()
	if n := len(h.subs); n != 0 {
		t.Errorf("%d subscribers after Close, want 0", n)
	}
}
