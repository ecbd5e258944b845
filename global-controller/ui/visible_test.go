package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// countingAuth passes every call to the real reviewer and counts the access reviews asked.
type countingAuth struct {
	*kubeauth.Reviewer
	reviews atomic.Int64
}

func (c *countingAuth) AuthorizeAccess(ctx context.Context, u kubeauth.User, a kubeauth.Access) (bool, string, error) {
	c.reviews.Add(1)
	return c.Reviewer.AuthorizeAccess(ctx, u, a)
}

// applyRoles creates the ClusterRoles deploy/rbac/global-controller/roles.yaml ships.
func applyRoles(t *testing.T, c client.Client) {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "deploy", "rbac", "global-controller", "roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(u); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("roles.yaml: %v", err)
		}
		if err := c.Create(t.Context(), u); err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
	}
}

// TestSiteOperatorSeesOnlyTheirSites runs the UI over a real API server's RBAC: the shipped
// edgefleet-site-operator bound in one namespace, the same rules narrowed with resourceNames
// in a Role of another, a fleet viewer, and a user bound to nothing. Reviews are real
// TokenReviews and SubjectAccessReviews; the Sites come from a controller-runtime cache.
func TestSiteOperatorSeesOnlyTheirSites(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "global", InstallCRDs: true})
	ctx := t.Context()
	c := cp.Client
	applyRoles(t, c)
	east, west, people := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	sites := map[string][]string{east: {"e1", "e2", "e3"}, west: {"w1", "w2", "w3"}}
	for ns, names := range sites {
		for _, n := range names {
			s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
				Spec: fleetv1.SiteSpec{KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: n + "-kubeconfig"}}}
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The documented narrowing: the site operator's rules in a Role, sites named.
	narrowed := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: west, Name: "site-operator-w1-w3"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites", "sites/status"}, Verbs: []string{"get", "watch"}, ResourceNames: []string{"w1", "w3"}},
		{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites/enrollment"}, Verbs: []string{"get", "create", "delete"}, ResourceNames: []string{"w1", "w3"}},
	}}
	if err := c.Create(ctx, narrowed); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for name, bind := range map[string]func(subject rbacv1.Subject) client.Object{
		"east-operator": func(s rbacv1.Subject) client.Object {
			return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: east, Name: "east-operator"}, Subjects: []rbacv1.Subject{s},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-site-operator"}}
		},
		"west-operator": func(s rbacv1.Subject) client.Object {
			return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: west, Name: "west-operator"}, Subjects: []rbacv1.Subject{s},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: narrowed.Name}}
		},
		"viewer": func(s rbacv1.Subject) client.Object {
			return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: people + "-viewer"}, Subjects: []rbacv1.Subject{s},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-fleet-viewer"}}
		},
		"nobody": nil,
	} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: people, Name: name}}); err != nil {
			t.Fatal(err)
		}
		if bind != nil {
			b := bind(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: people, Name: name})
			if err := c.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			if crb, ok := b.(*rbacv1.ClusterRoleBinding); ok {
				t.Cleanup(func() { _ = c.Delete(context.Background(), crb) })
			}
		}
		tr, err := cs.CoreV1().ServiceAccounts(people).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tr.Status.Token
	}

	informers, err := cache.New(cp.Config, cache.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Setup(ctx, informers); err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	for _, o := range []client.Object{&fleetv1.Site{}, &fleetv1.Host{}, &fleetv1.Campaign{}} {
		if _, err := informers.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	testutil.WaitFor(t, 30*time.Second, "all six sites in the cache", func() (bool, string) {
		l := &fleetv1.SiteList{}
		if err := informers.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		return len(l.Items) >= 6, fmt.Sprintf("the cache holds %d sites, want 6", len(l.Items))
	})
	auth := &countingAuth{Reviewer: kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: fleetv1.GroupVersion.Group, Resource: "artifacts"})}
	srv, err := New(Config{Cache: informers, Events: c, Campaigns: c, Recorder: events.NewFakeRecorder(10), Auth: auth, Changes: NewHub(), Log: testr.New(t),
		Rules: NewRulesReviewer(cp.Config)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	get := func(t *testing.T, user, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: tokenCookie, Value: tokens[user]})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	listed := regexp.MustCompile(`data-site="([^"]+)"`)
	siteNames := func(body string) []string {
		var names []string
		for _, m := range listed.FindAllStringSubmatch(body, -1) {
			names = append(names, m[1])
		}
		slices.Sort(names)
		return names
	}

	t.Run("the user's own rules spare the reviews of sites they do not name", func(t *testing.T) {
		before := auth.reviews.Load()
		if status, body := get(t, "west-operator", "/ui/sites?namespace="+west); status != http.StatusOK || !slices.Equal(siteNames(body), []string{"w1", "w3"}) {
			t.Fatalf("status %d, sites %v, want w1 and w3", status, siteNames(body))
		}
		// get sites in the namespace, then get sites w1 and w3: never w2.
		if n := auth.reviews.Load() - before; n != 3 {
			t.Errorf("the west operator's first list of %s asked %d access reviews, want 3", west, n)
		}
	})

	t.Run("site lists", func(t *testing.T) {
		for _, tc := range []struct {
			user, path string
			want       []string
		}{
			{"east-operator", "/ui/sites", []string{"e1", "e2", "e3"}},
			{"east-operator", "/ui/sites?namespace=" + east, []string{"e1", "e2", "e3"}},
			{"west-operator", "/ui/sites", []string{"w1", "w3"}},
			{"west-operator", "/ui/sites?namespace=" + west, []string{"w1", "w3"}},
			{"viewer", "/ui/sites", []string{"e1", "e2", "e3", "w1", "w2", "w3"}},
		} {
			status, body := get(t, tc.user, tc.path)
			if status != http.StatusOK {
				t.Fatalf("%s %s: status %d:\n%s", tc.user, tc.path, status, body)
			}
			if got := siteNames(body); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s lists %v, want %v", tc.user, tc.path, got, tc.want)
			}
		}
	})

	t.Run("overview counts only the sites a user sees", func(t *testing.T) {
		status, body := get(t, "west-operator", "/ui/")
		if status != http.StatusOK || !strings.Contains(body, `id="total">2<`) || !strings.Contains(body, "may not list campaigns") {
			t.Errorf("west-operator's overview: status %d, want 200 counting 2 sites and no campaigns:\n%s", status, body)
		}
	})

	t.Run("site pages", func(t *testing.T) {
		for _, tc := range []struct {
			user, site string
			want       int
		}{
			{"west-operator", west + "/w1", http.StatusOK},
			{"west-operator", west + "/w2", http.StatusForbidden},
			// A site that does not exist answers as one the user may not see: no existence leaks.
			{"west-operator", west + "/w9", http.StatusForbidden},
			{"west-operator", east + "/e1", http.StatusForbidden},
			{"east-operator", east + "/e2", http.StatusOK},
			{"east-operator", east + "/e9", http.StatusNotFound},
			{"east-operator", west + "/w1", http.StatusForbidden},
		} {
			if status, body := get(t, tc.user, "/ui/sites/"+tc.site); status != tc.want {
				t.Errorf("%s /ui/sites/%s: status %d, want %d:\n%s", tc.user, tc.site, status, tc.want, body)
			}
		}
		// The east operator's site page shows its hosts section (list hosts in east).
		if _, body := get(t, "east-operator", "/ui/sites/"+east+"/e1"); strings.Contains(body, "may not list hosts") {
			t.Errorf("east-operator may list hosts in %s, the page says otherwise", east)
		}
	})

	t.Run("a user bound to nothing", func(t *testing.T) {
		for _, p := range []string{"/ui/", "/ui/sites"} {
			if status, body := get(t, "nobody", p); status != http.StatusForbidden || !strings.Contains(body, "may not list sites") {
				t.Errorf("nobody %s: status %d, want 403 saying may not list sites:\n%s", p, status, body)
			}
		}
	})

	t.Run("a user who may get every site costs one review, however many sites", func(t *testing.T) {
		before := auth.reviews.Load()
		if status, _ := get(t, "viewer", "/ui/sites?q=zzz"); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		if n := auth.reviews.Load() - before; n != 1 {
			t.Errorf("the viewer's site list asked %d access reviews, want 1 (get sites in all namespaces)", n)
		}
		before = auth.reviews.Load()
		if status, _ := get(t, "east-operator", "/ui/sites?namespace="+east); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		if n := auth.reviews.Load() - before; n != 1 {
			t.Errorf("the east operator's list of %s asked %d access reviews, want 1 (get sites in the namespace)", east, n)
		}
	})
}
