package kubeauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const (
	group    = "fleet.edgefleet.io"
	resource = "artifacts"
	ttl      = 10 * time.Second
)

// global is a real kube-apiserver (RBAC, ServiceAccount tokens) that every test shares.
var global *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "global"}, func(_ context.Context, cp *controlplane.ControlPlane) error {
		global = cp
		return nil
	}))
}

// calls counts the requests a client sends, by the resource they create.
type calls struct{ tokenReviews, accessReviews atomic.Int64 }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// adminClient is a clientset of the global cluster's admin whose review requests are counted
// into c when c is not nil.
func adminClient(t *testing.T, c *calls) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(global.Config)
	if c != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				switch path.Base(r.URL.Path) {
				case "tokenreviews":
					c.tokenReviews.Add(1)
				case "subjectaccessreviews":
					c.accessReviews.Add(1)
				}
				return rt.RoundTrip(r)
			})
		})
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// unreachableClient is a clientset of an address where nothing listens.
func unreachableClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// serviceAccount creates a ServiceAccount and returns it with a token of it, issued for
// audiences (the API server's own when none).
func serviceAccount(t *testing.T, ns, name string, audiences ...string) (*corev1.ServiceAccount, string) {
	t.Helper()
	cs := adminClient(t, nil)
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	return sa, token(t, sa, audiences...)
}

func token(t *testing.T, sa *corev1.ServiceAccount, audiences ...string) string {
	t.Helper()
	tr, err := adminClient(t, nil).CoreV1().ServiceAccounts(sa.Namespace).CreateToken(t.Context(), sa.Name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token of ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	return tr.Status.Token
}

// grantArtifactReading binds a ClusterRole allowing get and list on artifacts to the
// ServiceAccount, removes both in cleanup, and waits until the API server's RBAC sees them.
func grantArtifactReading(t *testing.T, sa *corev1.ServiceAccount, u kubeauth.User) {
	t.Helper()
	cs := adminClient(t, nil)
	name := "kubeauth-test-artifact-reader-" + sa.Namespace
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"get", "list"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRole: %v", err)
	}
	t.Cleanup(func() {
		// The test's context is already cancelled here.
		if err := cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ClusterRole %s: %v", name, err)
		}
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ClusterRoleBinding %s: %v", name, err)
		}
	})

	// RBAC reads bindings from an informer: wait (uncached) until the grant shows.
	uncached := kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: group, Resource: resource, CacheTTL: -1})
	testutil.WaitFor(t, 10*time.Second, "the ClusterRoleBinding in effect", func() (bool, string) {
		allowed, _, err := uncached.Authorize(t.Context(), u, "get", "")
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		return allowed, "not allowed"
	})
}

func TestAuthenticate(t *testing.T) {
	ns := global.Namespace(t)
	sa, saToken := serviceAccount(t, ns, "uploader")
	audienceToken := token(t, sa, "edgefleet-artifacts")
	plain := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource})
	withAudience := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource,
		Audiences: []string{"edgefleet-artifacts"}})
	wantUser := kubeauth.User{
		Name:   "system:serviceaccount:" + ns + ":uploader",
		UID:    string(sa.UID),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}

	cases := []struct {
		name       string
		reviewer   *kubeauth.Reviewer
		token      string
		wantErr    string // substring; the error must wrap ErrUnauthenticated
		wantUserOK bool
	}{
		{name: "ServiceAccount token", reviewer: plain, token: saToken, wantUserOK: true},
		{name: "token for the reviewer's audience", reviewer: withAudience, token: audienceToken, wantUserOK: true},
		{name: "garbage", reviewer: plain, token: "not-a-token", wantErr: "token rejected: "},
		{name: "JWT signed by someone else", reviewer: plain,
			token: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZmxlZXQ6eCJ9.c2lnbmF0dXJl", wantErr: "token rejected"},
		{name: "empty token", reviewer: plain, token: "", wantErr: "empty token"},
		{name: "token for another audience", reviewer: plain, token: audienceToken, wantErr: "token rejected"},
		{name: "token for the API server, reviewer wants another audience", reviewer: withAudience, token: saToken, wantErr: "token rejected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.reviewer.Authenticate(t.Context(), tc.token)
			if tc.wantErr != "" {
				if !errors.Is(err, kubeauth.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Authenticate = %+v, %v; want an ErrUnauthenticated containing %q", u, err, tc.wantErr)
				}
				if tc.token != "" && strings.Contains(err.Error(), tc.token) {
					t.Errorf("the error %q contains the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if u.Name != wantUser.Name || u.UID != wantUser.UID {
				t.Errorf("user = %q (uid %q), want %q (uid %q)", u.Name, u.UID, wantUser.Name, wantUser.UID)
			}
			for _, g := range wantUser.Groups {
				if !slices.Contains(u.Groups, g) {
					t.Errorf("groups %q lack %q", u.Groups, g)
				}
			}
			if len(u.Extra["authentication.kubernetes.io/credential-id"]) == 0 {
				t.Errorf("extra %v lacks the token's credential ID", u.Extra)
			}
		})
	}

	t.Run("API server unreachable", func(t *testing.T) {
		r := kubeauth.NewReviewer(kubeauth.Config{Client: unreachableClient(t), Group: group, Resource: resource})
		_, err := r.Authenticate(t.Context(), saToken)
		if err == nil || errors.Is(err, kubeauth.ErrUnauthenticated) {
			t.Fatalf("Authenticate = %v; want an error other than ErrUnauthenticated", err)
		}
		if !strings.Contains(err.Error(), "TokenReview") || strings.Contains(err.Error(), saToken) {
			t.Errorf("error %q should name the TokenReview and not contain the token", err)
		}
	})
}

func TestAuthorize(t *testing.T) {
	ns := global.Namespace(t)
	reviewer := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource})
	userOf := func(sa string) kubeauth.User {
		_, tok := serviceAccount(t, ns, sa)
		u, err := reviewer.Authenticate(t.Context(), tok)
		if err != nil {
			t.Fatalf("Authenticate %s: %v", sa, err)
		}
		return u
	}
	reader, stranger := userOf("reader"), userOf("stranger")
	readerSA, err := adminClient(t, nil).CoreV1().ServiceAccounts(ns).Get(t.Context(), "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grantArtifactReading(t, readerSA, reader)

	cases := []struct {
		name       string
		user       kubeauth.User
		verb, obj  string
		want       bool
		wantReason string
	}{
		{name: "bound: get", user: reader, verb: "get", want: true, wantReason: "RBAC: allowed by ClusterRoleBinding"},
		{name: "bound: get one artifact", user: reader, verb: "get", obj: "os-image-debian-12", want: true},
		{name: "bound: list", user: reader, verb: "list", want: true},
		{name: "bound: delete", user: reader, verb: "delete", obj: "os-image-debian-12",
			wantReason: `cannot delete resource "artifacts" in API group "fleet.edgefleet.io" (object "os-image-debian-12")`},
		{name: "bound: create", user: reader, verb: "create", wantReason: "cannot create"},
		{name: "not bound: get", user: stranger, verb: "get", wantReason: `user "system:serviceaccount:` + ns + `:stranger" cannot get`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allowed, reason, err := reviewer.Authorize(t.Context(), tc.user, tc.verb, tc.obj)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			if allowed != tc.want || !strings.Contains(reason, tc.wantReason) {
				t.Errorf("Authorize(%s %s %q) = %v, %q; want %v, a reason containing %q", tc.user.Name, tc.verb, tc.obj, allowed, reason, tc.want, tc.wantReason)
			}
		})
	}

	t.Run("invalid arguments", func(t *testing.T) {
		if _, _, err := reviewer.Authorize(t.Context(), kubeauth.User{}, "get", ""); err == nil {
			t.Error("Authorize of an empty user: no error")
		}
		if _, _, err := reviewer.Authorize(t.Context(), reader, "", ""); err == nil {
			t.Error("Authorize of an empty verb: no error")
		}
	})
	t.Run("API server unreachable", func(t *testing.T) {
		r := kubeauth.NewReviewer(kubeauth.Config{Client: unreachableClient(t), Group: group, Resource: resource})
		if allowed, _, err := r.Authorize(t.Context(), reader, "get", ""); err == nil || allowed {
			t.Errorf("Authorize = %v, %v; want false and an error", allowed, err)
		}
	})
}

// TestAuthorizeAccess asks about real resources in namespaces: a RoleBinding grants its
// namespace only.
func TestAuthorizeAccess(t *testing.T) {
	ns, other := global.Namespace(t), global.Namespace(t)
	reviewer := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource})
	sa, tok := serviceAccount(t, ns, "site-reader")
	u, err := reviewer.Authenticate(t.Context(), tok)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	cs := adminClient(t, nil)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{"sites"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sites := func(verb, namespace, name string) kubeauth.Access {
		return kubeauth.Access{Verb: verb, Group: group, Resource: "sites", Namespace: namespace, Name: name}
	}
	// RBAC reads bindings from an informer: wait (uncached) until the grant shows.
	uncached := kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: group, Resource: resource, CacheTTL: -1})
	testutil.Eventually(t, 10*time.Second, func() error {
		if allowed, reason, err := uncached.AuthorizeAccess(t.Context(), u, sites("list", ns, "")); err != nil || !allowed {
			return fmt.Errorf("the RoleBinding has not taken effect (%s): %w", reason, err)
		}
		return nil
	})
	cases := []struct {
		name       string
		access     kubeauth.Access
		want       bool
		wantReason string
	}{
		{name: "list in its namespace", access: sites("list", ns, ""), want: true},
		{name: "get one in its namespace", access: sites("get", ns, "store-1"), want: true},
		{name: "patch in its namespace", access: sites("patch", ns, "store-1"),
			wantReason: `cannot patch resource "sites" in API group "fleet.edgefleet.io" (object "store-1") in namespace "` + ns + `"`},
		{name: "list in another namespace", access: sites("list", other, ""), wantReason: `in namespace "` + other + `"`},
		{name: "list in all namespaces", access: sites("list", "", ""), wantReason: `cannot list resource "sites"`},
		{name: "another resource", access: kubeauth.Access{Verb: "list", Group: group, Resource: "campaigns", Namespace: ns}, wantReason: `"campaigns"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allowed, reason, err := reviewer.AuthorizeAccess(t.Context(), u, tc.access)
			if err != nil {
				t.Fatalf("AuthorizeAccess: %v", err)
			}
			if allowed != tc.want || !strings.Contains(reason, tc.wantReason) {
				t.Errorf("AuthorizeAccess(%s) = %v, %q; want %v, a reason containing %q", tc.access, allowed, reason, tc.want, tc.wantReason)
			}
		})
	}
	if _, _, err := reviewer.AuthorizeAccess(t.Context(), u, kubeauth.Access{Verb: "get"}); err == nil {
		t.Error("AuthorizeAccess without a resource: no error")
	}
}

// TestCaching counts the reviews a Reviewer sends to the real API server while a fake clock
// moves through the cache TTL.
func TestCaching(t *testing.T) {
	ns := global.Namespace(t)
	sa, tok := serviceAccount(t, ns, "cached")
	var c calls
	clk := clocktesting.NewFakeClock(time.Now())
	r := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, &c), Group: group, Resource: resource, CacheTTL: ttl, Clock: clk})
	u, err := r.Authenticate(t.Context(), tok)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	grantArtifactReading(t, sa, u)

	type step struct {
		do         string // what to do, see below
		advance    time.Duration
		wantTokens int64 // TokenReviews sent so far
		wantAccess int64 // SubjectAccessReviews sent so far
	}
	steps := []step{
		{do: "authenticate", wantTokens: 1}, // the Authenticate above
		{do: "authenticate", advance: ttl - time.Second, wantTokens: 1},
		{do: "authenticate", advance: time.Second, wantTokens: 2},
		{do: "garbage", wantTokens: 3},
		{do: "garbage", advance: ttl - time.Second, wantTokens: 3},
		{do: "garbage", advance: time.Second, wantTokens: 4},
		{do: "get", wantTokens: 4, wantAccess: 1},
		{do: "get", advance: ttl - time.Second, wantTokens: 4, wantAccess: 1},
		{do: "delete", wantTokens: 4, wantAccess: 2},
		{do: "delete", wantTokens: 4, wantAccess: 2},
		{do: "get", advance: time.Second, wantTokens: 4, wantAccess: 3},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		switch s.do {
		case "authenticate":
			got, err := r.Authenticate(t.Context(), tok)
			if err != nil || got.Name != u.Name {
				t.Fatalf("step %d: Authenticate = %q, %v; want %q", i, got.Name, err, u.Name)
			}
			got.Groups[0] = "mutated by the caller" // must not reach the cache
		case "garbage":
			if _, err := r.Authenticate(t.Context(), "garbage"); !errors.Is(err, kubeauth.ErrUnauthenticated) {
				t.Fatalf("step %d: Authenticate(garbage) = %v; want ErrUnauthenticated", i, err)
			}
		case "get", "delete":
			allowed, _, err := r.Authorize(t.Context(), u, s.do, "")
			if err != nil || allowed != (s.do == "get") {
				t.Fatalf("step %d: Authorize(%s) = %v, %v", i, s.do, allowed, err)
			}
		}
		if got := c.tokenReviews.Load(); got != s.wantTokens {
			t.Errorf("step %d (%s): %d TokenReviews sent, want %d", i, s.do, got, s.wantTokens)
		}
		if got := c.accessReviews.Load(); got != s.wantAccess {
			t.Errorf("step %d (%s): %d SubjectAccessReviews sent, want %d", i, s.do, got, s.wantAccess)
		}
	}
	if got, err := r.Authenticate(t.Context(), tok); err != nil || got.Groups[0] == "mutated by the caller" {
		t.Errorf("Authenticate after the caller changed a returned user = %q, %v; the cache was changed", got.Groups, err)
	}
}

func TestMiddleware(t *testing.T) {
	ns := global.Namespace(t)
	_, tok := serviceAccount(t, ns, "client")
	reviewer := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, nil), Group: group, Resource: resource})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := kubeauth.UserFrom(r.Context())
		if !ok {
			http.Error(w, "no user in the context", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(u.Name))
	})
	srv := httptest.NewServer(reviewer.Middleware(next))
	t.Cleanup(srv.Close)
	down := httptest.NewServer(kubeauth.NewReviewer(kubeauth.Config{Client: unreachableClient(t), Group: group, Resource: resource}).Middleware(next))
	t.Cleanup(down.Close)

	cases := []struct {
		name        string
		url         string
		header      string // Authorization; none when empty
		wantStatus  int
		wantMessage string // for error answers
		wantBody    string // for 200
	}{
		{name: "no header", url: srv.URL, wantStatus: http.StatusUnauthorized, wantMessage: "missing Authorization header"},
		{name: "basic auth", url: srv.URL, header: "Basic eHl6", wantStatus: http.StatusUnauthorized, wantMessage: "not a Bearer token"},
		{name: "empty bearer token", url: srv.URL, header: "Bearer ", wantStatus: http.StatusUnauthorized, wantMessage: "empty Bearer token"},
		{name: "bad token", url: srv.URL, header: "Bearer not-a-token", wantStatus: http.StatusUnauthorized, wantMessage: "rejected"},
		{name: "good token", url: srv.URL, header: "Bearer " + tok, wantStatus: http.StatusOK, wantBody: "system:serviceaccount:" + ns + ":client"},
		{name: "good token, lower-case scheme", url: srv.URL, header: "bearer " + tok, wantStatus: http.StatusOK, wantBody: "system:serviceaccount:" + ns + ":client"},
		{name: "API server unreachable", url: down.URL, header: "Bearer " + tok, wantStatus: http.StatusServiceUnavailable, wantMessage: "try again later"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.url+"/api/v1/artifacts", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusOK {
				var body strings.Builder
				if _, err := io.Copy(&body, resp.Body); err != nil {
					t.Fatal(err)
				}
				if body.String() != tc.wantBody {
					t.Errorf("next saw user %q, want %q", body.String(), tc.wantBody)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
			var e restv1.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("decode the error body: %v", err)
			}
			if !strings.Contains(e.Message, tc.wantMessage) {
				t.Errorf("message %q, want one containing %q", e.Message, tc.wantMessage)
			}
			if strings.Contains(e.Message, tok) {
				t.Errorf("message %q contains the token", e.Message)
			}
		})
	}

	t.Run("no user outside the middleware", func(t *testing.T) {
		if u, ok := kubeauth.UserFrom(t.Context()); ok {
			t.Errorf("UserFrom of a bare context = %+v, true", u)
		}
	})
}

// TestAuthorizeAccessNow shows that AuthorizeAccessNow neither reads nor fills the cache:
// every call is a SubjectAccessReview, while AuthorizeAccess asks once.
func TestAuthorizeAccessNow(t *testing.T) {
	c := &calls{}
	r := kubeauth.NewReviewer(kubeauth.Config{Client: adminClient(t, c), Group: group, Resource: resource})
	u := kubeauth.User{Name: "alice", Groups: []string{"system:authenticated"}}
	a := kubeauth.Access{Verb: "create", Group: group, Resource: "sites/kubeconfig", Namespace: "fleet", Name: "site-a"}
	for range 2 {
		if _, _, err := r.AuthorizeAccess(t.Context(), u, a); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.accessReviews.Load(); n != 1 {
		t.Fatalf("AuthorizeAccess twice sent %d reviews, want 1 (cached)", n)
	}
	for range 2 {
		allowed, reason, err := r.AuthorizeAccessNow(t.Context(), u, a)
		if err != nil || allowed || !strings.Contains(reason, `"sites/kubeconfig"`) {
			t.Fatalf("AuthorizeAccessNow = %v, %q, %v; want denied naming sites/kubeconfig", allowed, reason, err)
		}
	}
	if n := c.accessReviews.Load(); n != 3 {
		t.Errorf("AuthorizeAccessNow twice after a cached answer sent %d reviews in all, want 3", n)
	}
	if _, _, err := r.AuthorizeAccessNow(t.Context(), u, kubeauth.Access{Verb: "get"}); err == nil {
		t.Error("AuthorizeAccessNow without a resource: no error")
	}
}
