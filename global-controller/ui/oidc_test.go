package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// askedAuth passes every call to the real reviewer and remembers who access was asked for.
type askedAuth struct {
	*kubeauth.Reviewer
	mu    sync.Mutex
	users []kubeauth.User
}

func (a *askedAuth) AuthorizeAccess(ctx context.Context, u kubeauth.User, acc kubeauth.Access) (bool, string, error) {
	a.mu.Lock()
	a.users = append(a.users, u)
	a.mu.Unlock()
	return a.Reviewer.AuthorizeAccess(ctx, u, acc)
}

func (a *askedAuth) askedFor(name string) (kubeauth.User, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.users, func(u kubeauth.User) bool { return u.Name == name })
	if i < 0 {
		return kubeauth.User{}, false
	}
	return a.users[i], true
}

// TestOIDCLogin signs in to the UI with an OIDC ID token: a test issuer (discovery and JWKS over
// TLS on loopback, an RSA key made here) that a real API server trusts through its
// AuthenticationConfiguration; the UI's TokenReview accepts the token, and the
// SubjectAccessReviews are asked for the OIDC user, whom a ClusterRoleBinding makes a fleet
// viewer.
func TestOIDCLogin(t *testing.T) {
	const audience, prefix = "edgefleet", "oidc:"
	issuer, err := controlplane.StartOIDCIssuer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(issuer.Close)
	cp := controlplane.StartT(t, controlplane.Options{Name: "global", InstallCRDs: true,
		JWTAuthenticators: []apiserverv1.JWTAuthenticator{issuer.JWTAuthenticator(audience, prefix)}})
	ctx := t.Context()
	applyRoles(t, cp.Client)
	ns := cp.Namespace(t)
	if err := cp.Client.Create(ctx, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-1"},
		Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "kubeconfig"}}}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oidc-alice-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-fleet-viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: prefix + "alice"}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := issuer.IDToken("alice", []string{"store-ops"}, audience, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The API server reads the issuer's discovery document and keys in the background after
	// it starts: wait until it accepts the token.
	testutil.WaitFor(t, 30*time.Second, "the OIDC token accepted by the API server", func() (bool, string) {
		tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: alice}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return tr.Status.Authenticated, tr.Status.Error // never the token itself
	})

	auth := &askedAuth{Reviewer: kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: fleetv1.GroupVersion.Group, Resource: "artifacts"})}
	srv, err := New(Config{Cache: cp.Client, Events: cp.Client, Campaigns: cp.Client, Recorder: events.NewFakeRecorder(10), Auth: auth,
		Changes: NewHub(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	send := func(t *testing.T, req *http.Request) answer {
		t.Helper()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return answer{status: resp.StatusCode, header: resp.Header, cookies: resp.Cookies(), body: string(body)}
	}
	login := func(t *testing.T, token string) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", hs.URL)
		return send(t, req)
	}
	overview := func(t *testing.T, cookie *http.Cookie) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/ui/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(cookie)
		a := send(t, req)
		return a.status, a.body
	}

	t.Run("an OIDC ID token signs in and reaches the overview", func(t *testing.T) {
		a := login(t, alice)
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
			t.Fatalf("login answered %d to %q, want 303 to /ui/", a.status, a.header.Get("Location"))
		}
		i := slices.IndexFunc(a.cookies, func(c *http.Cookie) bool { return c.Name == tokenCookie })
		if i < 0 {
			t.Fatal("no token cookie")
		}
		status, body := overview(t, a.cookies[i])
		if status != http.StatusOK || !strings.Contains(body, "oidc:alice") || !strings.Contains(body, `id="total">1<`) {
			t.Fatalf("overview: status %d, want 200 for oidc:alice counting one site:\n%s", status, body)
		}
		u, ok := auth.askedFor(prefix + "alice")
		if !ok || !slices.Contains(u.Groups, prefix+"store-ops") {
			t.Errorf("no SubjectAccessReview for oidc:alice in group oidc:store-ops; asked for %+v", auth.users)
		}
	})

	t.Run("an OIDC user bound to nothing is denied", func(t *testing.T) {
		bob, err := issuer.IDToken("bob", nil, audience, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if a := login(t, bob); a.status != http.StatusSeeOther {
			t.Fatalf("bob's login: status %d, want 303 (the token is valid)", a.status)
		}
		if status, body := overview(t, &http.Cookie{Name: tokenCookie, Value: bob}); status != http.StatusForbidden || !strings.Contains(body, "oidc:bob may not list sites") {
			t.Errorf("bob's overview: status %d, want 403 naming oidc:bob:\n%s", status, body)
		}
	})

	t.Run("tokens the API server does not trust are refused", func(t *testing.T) {
		other, err := controlplane.StartOIDCIssuer()
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		forged, err := other.IDToken("alice", nil, audience, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wrongAudience, err := issuer.IDToken("alice", nil, "someone-else", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for name, token := range map[string]string{"another issuer": forged, "another audience": wrongAudience} {
			if a := login(t, token); a.status != http.StatusUnauthorized {
				t.Errorf("%s: login status %d, want 401", name, a.status)
			}
		}
	})
}
