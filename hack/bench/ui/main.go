package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/setup"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func main() {
	var (
		sites    = flag.Int("sites", 10000, "Sites to register.")
		requests = flag.Int("requests", 50, "Requests per page measured (and per anchor).")
		workers  = flag.Int("workers", 16, "Sites written in parallel while registering.")
	)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *sites, *requests, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "ui bench:", err)
		os.Exit(1)
	}
}

const ns = "bench"

func run(ctx context.Context, n, requests, workers int) (err error) {
	logf("starting a global control plane")
	cp, err := controlplane.Start(controlplane.Options{Name: "global", InstallCRDs: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	token, err := viewerToken(ctx, cp)
	if err != nil {
		return err
	}
	operatorToken, err := siteOperatorToken(ctx, cp, operatorSites)
	if err != nil {
		return err
	}
	start := time.Now()
	logf("registering %d sites with statuses of every state, %d at a time", n, workers)
	if err := registerSites(ctx, cp.Client, n, workers); err != nil {
		return err
	}
	logf("registered in %s", time.Since(start).Round(time.Second))

	logf("starting the web UI as the global controller wires it, over an informer cache of the sites")
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: controlplane.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	auth := kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: "fleet.edgefleet.io", Resource: "artifacts"})
	web, err := setup.UI(ctx, mgr, auth, nil, nil, nil)
	if err != nil {
		return err
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	go func() { _ = mgr.Start(mgrCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	srv := httptest.NewTLSServer(web)
	defer srv.Close()
	hc := srv.Client()
	hc.Timeout = time.Minute
	hc.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS12

	getAs := func(token, path string) func() ([]byte, error) {
		return func() ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			if err != nil {
				return nil, err
			}
			req.AddCookie(&http.Cookie{Name: "edgefleet-token", Value: token})
			resp, err := hc.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %d: %.300s", path, resp.StatusCode, body)
			}
			return body, nil
		}
	}
	get := func(path string) func() ([]byte, error) { return getAs(token, path) }
	// RBAC has taken the viewer's binding in, and the cache holds every site, before anything
	// is measured.
	if err := waitForSites(get("/ui/sites?namespace="+ns+"&size=1"), n); err != nil {
		return err
	}
	apiList := func() ([]byte, error) {
		list := &fleetv1.SiteList{}
		if err := cp.Client.List(ctx, list, client.InNamespace(ns), client.Limit(50)); err != nil {
			return nil, err
		}
		return nil, nil
	}
	cases := []struct{ name, what string }{
		{"anchor: API server list of 50 sites", ""},
		{"anchor: a static file of the UI", "/ui/static/ui.css"},
		{"overview", "/ui/?namespace=" + ns},
		{"site list, page 1", "/ui/sites?namespace=" + ns},
		{"site list, all namespaces, page 1", "/ui/sites"},
		{"site list, by state, page 1", "/ui/sites?namespace=" + ns + "&sort=state"},
		{"site list, by heartbeat desc, page 150", "/ui/sites?namespace=" + ns + "&sort=heartbeat&order=desc&page=150"},
		{"site list, Unreachable only", "/ui/sites?namespace=" + ns + "&state=Unreachable"},
		{"site list, search \"eu-west\", by release", "/ui/sites?namespace=" + ns + "&q=eu-west&sort=release"},
		{"site list, 500 per page", "/ui/sites?namespace=" + ns + "&size=500"},
		{fmt.Sprintf("site operator (Role with resourceNames of %d sites): site list", operatorSites), "operator:/ui/sites?namespace=" + ns},
		{"site operator: site list, all namespaces", "operator:/ui/sites"},
		{"site operator: overview", "operator:/ui/?namespace=" + ns},
	}
	fmt.Printf("\n%d sites, %d requests each, one at a time, over HTTPS with a viewer's token (TokenReview and SubjectAccessReview cached as in production)\n\n", n, requests)
	fmt.Println("| request | first | p50 | p99 | max | p50 / API list | bytes |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var anchor time.Duration
	for i, c := range cases {
		do := apiList
		if path, ok := strings.CutPrefix(c.what, "operator:"); ok {
			do = getAs(operatorToken, path)
		} else if c.what != "" {
			do = get(c.what)
		}
		first, lat, size, err := measure(requests, do)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		if i == 0 {
			anchor = p50
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %.1f | %d |\n", c.name, ms(first), ms(p50), ms(p99), ms(slices.Max(lat)), float64(p50)/float64(anchor), size)
	}
	return nil
}

// measure runs do requests times, one after another, after one warm-up run that took first
// (with the UI's caches cold for a new user or page); size is the size of what it returned.
func measure(requests int, do func() ([]byte, error)) (first time.Duration, lat []time.Duration, size int, err error) {
	start := time.Now()
	body, err := do()
	if err != nil {
		return 0, nil, 0, err
	}
	first = time.Since(start)
	lat = make([]time.Duration, 0, requests)
	for range requests {
		start := time.Now()
		if _, err := do(); err != nil {
			return 0, nil, 0, err
		}
		lat = append(lat, time.Since(start))
	}
	return first, lat, len(body), nil
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// viewerToken applies the ClusterRoles people are bound to (deploy/rbac/global-controller/roles.yaml)
// and returns a token of a ServiceAccount bound to edgefleet-fleet-viewer.
func viewerToken(ctx context.Context, cp *controlplane.ControlPlane) (string, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return "", err
	}
	f, err := os.Open(root + "/deploy/rbac/global-controller/roles.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(u); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("roles.yaml: %w", err)
		}
		if err := cp.Client.Create(ctx, u); err != nil {
			return "", fmt.Errorf("create %s: %w", u.GetName(), err)
		}
	}
	c := cp.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-fleet-viewer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			return "", fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "viewer", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of the viewer: %w", err)
	}
	return tr.Status.Token, nil
}

// operatorSites is how many sites the benchmark's site operator is granted, by name.
const operatorSites = 20

// siteOperatorToken returns a token of ServiceAccount bench/site-operator, bound to a Role
// granting get on the first n sites by name (docs/security.md, "Site operators"): the UI
// checks every site of the namespace for it, one SubjectAccessReview each, cached per user.
func siteOperatorToken(ctx context.Context, cp *controlplane.ControlPlane, n int) (string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("store-%05d", i)
	}
	c := cp.Client
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-operator"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-operator"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{fleetv1.GroupVersion.Group}, Resources: []string{"sites", "sites/status"}, Verbs: []string{"get", "watch"}, ResourceNames: names}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-operator"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "site-operator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "site-operator"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			return "", fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "site-operator", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of the site operator: %w", err)
	}
	return tr.Status.Token, nil
}

// waitForSites waits until the site list, asked with list, counts n sites.
func waitForSites(list func() ([]byte, error), n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	want := fmt.Sprintf(`<span id="matched">%d</span>`, n)
	for {
		body, err := list()
		if err == nil && strings.Contains(string(body), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the site list never counted %d sites (last error: %w)", n, err)
		}
		time.Sleep(time.Second)
	}
}
