package enrollment

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
)

// hosts resolves the names it holds, and IP literals to themselves.
type hosts map[string][]netip.Addr

func (h hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if addrs, ok := h[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// siteServer is a site's API server on loopback that answers the enrollment's reviews as a
// least-privilege credential's site would, and counts the connections it accepted.
type siteServer struct {
	*httptest.Server
	conns atomic.Int32
	ca    []byte // PEM of its certificate
}

func newSiteServer(t *testing.T) *siteServer {
	t.Helper()
	s := &siteServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		review, ok := obj.(*authzv1.SelfSubjectAccessReview)
		if err != nil || !ok || review.Spec.ResourceAttributes == nil {
			http.Error(w, "not a SelfSubjectAccessReview", http.StatusBadRequest)
			return
		}
		for _, q := range Questions() {
			if reflect.DeepEqual(q.Access, *review.Spec.ResourceAttributes) {
				review.Status.Allowed = q.Allowed
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(review)
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	s.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return s
}

// otherCA is the certificate of a CA that signed no test server's.
func otherCA(t *testing.T) []byte {
	t.Helper()
	ca, _, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// url is the server's URL with host in place of its address.
func (s *siteServer) url(host string) string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return "https://" + net.JoinHostPort(host, port)
}

// testBed is a global cluster (a fake client) with Site fleet/site-a and a token of it.
type testBed struct {
	t      *testing.T
	client client.Client
	token  string
	id     string
	log    *strings.Builder
}

func newTestBed(t *testing.T) *testBed {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := fleetv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	token, id, err := NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := strings.Cut(token, ".")
	now := time.Now().Truncate(time.Second)
	rec := Record{ID: id, Namespace: "fleet", Site: "site-a", Hash: HashSecret(secret), CreatedBy: "alice", Created: now, Expires: now.Add(time.Hour)}
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "site-a"},
		Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "site-a-kubeconfig"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(site, rec.newSecret()).Build()
	return &testBed{t: t, client: c, token: token, id: id, log: &strings.Builder{}}
}

// server is the enrollment server of the bed, as a controller (re)started with these options
// runs it.
func (b *testBed) server(resolver siteclient.Resolver, allowed []netip.Prefix, maxFailures int) *Server {
	return &Server{Client: b.client, Reader: b.client, Sites: b.client, Access: SelfReviews{Timeout: 10 * time.Second},
		Recorder: events.NewFakeRecorder(10), Clock: clock.RealClock{}, Random: rand.Reader, Timeout: 20 * time.Second,
		Log:       funcr.New(func(prefix, args string) { fmt.Fprintln(b.log, prefix, args) }, funcr.Options{}),
		Addresses: siteclient.AddressPolicy{Resolver: resolver, Allowed: allowed}, MaxFailures: maxFailures}
}

// enroll posts an enrollment of site-a with the bed's token, offering a kubeconfig of server
// with ca, and returns the answer.
func (b *testBed) enroll(s *Server, server string, ca []byte) (int, restv1.Error) {
	b.t.Helper()
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: site\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n"+
		"users:\n- name: u\n  user:\n    token: credential-of-the-site\ncontexts:\n- name: c\n  context:\n    cluster: site\n    user: u\ncurrent-context: c\n",
		server, base64.StdEncoding.EncodeToString(ca))
	body, _ := json.Marshal(restv1.Enroll{Namespace: "fleet", Site: "site-a", Machine: "edge-a", Kubeconfig: kc})
	r := httptest.NewRequestWithContext(b.t.Context(), http.MethodPost, EnrollPath, strings.NewReader(string(body)))
	r.Header.Set("Authorization", "Bearer "+b.token)
	w := httptest.NewRecorder()
	s.enroll(w, r)
	var e restv1.Error
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return w.Code, e
}

// record reads the token's record from the global cluster.
func (b *testBed) record() Record {
	b.t.Helper()
	s := &corev1.Secret{}
	if err := b.client.Get(b.t.Context(), client.ObjectKey{Namespace: "fleet", Name: SecretName(b.id)}, s); err != nil {
		b.t.Fatal(err)
	}
	rec, err := recordOf(s)
	if err != nil {
		b.t.Fatal(err)
	}
	return rec
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func TestEnrollRefusesAddressesNotAllowed(t *testing.T) {
	site := newSiteServer(t)
	resolver := hosts{
		"localhost":     {netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		// One refused address among others refuses the name: a connection could reach any.
		"mixed.test": {netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("127.0.0.1")},
		// example.com is in the test server's certificate; here it resolves to loopback.
		"example.com": {netip.MustParseAddr("127.0.0.1")},
	}
	cases := []struct {
		name    string
		host    string
		allowed []netip.Prefix
		class   string // "" = not refused for its address
	}{
		{"loopback address", "127.0.0.1", nil, "loopback"},
		{"name of loopback addresses", "localhost", nil, "loopback"},
		{"IPv6 loopback", "::1", nil, "loopback"},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", nil, "loopback"},
		{"cloud metadata endpoint", "metadata.test", nil, "link-local"},
		{"IPv6 link-local", "fe80::1", nil, "link-local"},
		{"unspecified", "0.0.0.0", nil, "unspecified"},
		{"multicast", "ff02::1", nil, "multicast"},
		{"one loopback address among others", "mixed.test", nil, "loopback"},
		{"allowed elsewhere only", "127.0.0.1", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "loopback"},
		{"allowed loopback", "example.com", loopback, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBed(t)
			before := site.conns.Load()
			status, e := b.enroll(b.server(resolver, tc.allowed, 5), site.url(tc.host), site.ca)
			conns := site.conns.Load() - before
			if tc.class == "" {
				// The name resolved to the checked address is what was dialed: example.com's
				// real addresses do not lead to the test server.
				if status != http.StatusOK || conns == 0 {
					t.Fatalf("got %d %+v with %d connections; want enrolled through the checked address", status, e, conns)
				}
				return
			}
			if status != http.StatusForbidden || e.Reason != ReasonAddress || !strings.Contains(e.Message, "a "+tc.class+" address") ||
				!strings.Contains(e.Message, "--enrollment-allowed-networks") {
				t.Errorf("got %d %+v; want 403 %s naming a %s address and the flag", status, e, ReasonAddress, tc.class)
			}
			if conns != 0 {
				t.Errorf("%d connections to the refused address", conns)
			}
		})
	}
}

func TestEnrollHidesTransportErrors(t *testing.T) {
	site := newSiteServer(t)
	closed := httptest.NewUnstartedServer(http.NotFoundHandler())
	closedURL := "https://" + closed.Listener.Addr().String()
	closed.Listener.Close()
	for _, tc := range []struct{ name, server, detail string }{
		{"a certificate of another CA", site.url("127.0.0.1"), "certificate"},
		{"nothing listening", closedURL, "connection refused"},
		{"a name that does not resolve", site.url("nowhere.test"), "no such host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBed(t)
			status, e := b.enroll(b.server(hosts{}, loopback, 5), tc.server, otherCA(t))
			if status != http.StatusBadGateway || e.Reason != ReasonUnreachable || e.Message != unreachable {
				t.Errorf("got %d %+v; want 502 %s with only %q", status, e, ReasonUnreachable, unreachable)
			}
			if !strings.Contains(b.log.String(), tc.detail) {
				t.Errorf("the log lacks the detail %q:\n%s", tc.detail, b.log)
			}
			if strings.Contains(b.log.String(), "credential-of-the-site") || strings.Contains(b.log.String(), b.token) {
				t.Errorf("the log carries a secret:\n%s", b.log)
			}
		})
	}
}

func TestEnrollLimitsFailedAttempts(t *testing.T) {
	site := newSiteServer(t)
	wrongCA := otherCA(t)
	b := newTestBed(t)
	s := b.server(hosts{}, loopback, 3)
	// A refused address and a server that twice does not prove its identity: three failures.
	if status, e := b.enroll(s, "https://169.254.169.254", site.ca); status != http.StatusForbidden {
		t.Fatalf("refused address: %d %+v", status, e)
	}
	for i := range 2 {
		if status, e := b.enroll(s, site.url("127.0.0.1"), wrongCA); status != http.StatusBadGateway {
			t.Fatalf("failure %d: %d %+v", i+2, status, e)
		}
	}
	if got := b.record().Failures; got != 3 {
		t.Fatalf("the record counts %d failed attempts, want 3", got)
	}
	// The limit holds across a restart of the controller (a new Server on the same cluster),
	// and refuses before any connection, a good credential's too.
	restarted := b.server(hosts{}, loopback, 3)
	before := site.conns.Load()
	status, e := b.enroll(restarted, site.url("127.0.0.1"), site.ca)
	if status != http.StatusForbidden || e.Reason != ReasonTooMany || !strings.Contains(e.Message, "the limit is 3") || !strings.Contains(e.Message, "issue a new token") {
		t.Errorf("after the limit: %d %+v; want 403 %s naming the limit and a new token", status, e, ReasonTooMany)
	}
	if n := site.conns.Load() - before; n != 0 {
		t.Errorf("%d connections after the limit", n)
	}
	if got := b.record().Failures; got != 3 {
		t.Errorf("the record counts %d failed attempts after the refusal, want still 3", got)
	}
	// Before the limit, an enrollment succeeds and does not count; the token is used up.
	b2 := newTestBed(t)
	s2 := b2.server(hosts{}, loopback, 3)
	if status, e := b2.enroll(s2, site.url("127.0.0.1"), wrongCA); status != http.StatusBadGateway {
		t.Fatalf("failure: %d %+v", status, e)
	}
	if status, e := b2.enroll(s2, site.url("127.0.0.1"), site.ca); status != http.StatusOK {
		t.Fatalf("enrollment: %d %+v", status, e)
	}
	if rec := b2.record(); rec.Failures != 1 || rec.UsedBy == "" {
		t.Errorf("after a failure and an enrollment: %d failures, used by %q; want 1 and the site's cluster", rec.Failures, rec.UsedBy)
	}
}

// A permission the API server could not be asked about is a 503 to try again (Retry-After),
// not a 500: the API server's fake clientset authenticates every token and fails every
// SubjectAccessReview.
func TestTokensWhenPermissionsCannotBeChecked(t *testing.T) {
	cs := k8sfake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authnv1.TokenReview{Status: authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice"}}}, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("fake: the API server did not answer")
	})
	b := newTestBed(t)
	s := b.server(hosts{}, nil, 5)
	s.Auth = kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: rbacGroup, Resource: rbacResource})
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/api/v1/namespaces/fleet/sites/site-a/enrollment-tokens", nil)
	r.Header.Set("Authorization", "Bearer a-token")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	var e restv1.Error
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Message, "try again") {
		t.Errorf("got %d, Retry-After %q: %s; want 503 with a time and a message to try again", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
