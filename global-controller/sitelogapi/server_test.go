package sitelogapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/logline"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// The suite runs the endpoint over real components: a global control plane answering
// TokenReview and SubjectAccessReview with the ClusterRoles shipped in deploy/, a site control
// plane reached through siteclient.Cache as the user the shipped site Role binds, and on it the
// real sitelogs.Responder of the local controller, fed by a logger of the test. No BPA answers.
var (
	global, site *controlplane.ControlPlane
	globalCS     kubernetes.Interface
	// controllerLog is teed into the answering local controller's ring.
	controllerLog *zap.Logger
	server        *httptest.Server
	sites         *countingSites
)

const ns = "fleet-a"

// countingSites is the real siteclient.Cache, counting who asked for a site's client: every
// LogRequest needs one, so a count of zero proves none was created.
type countingSites struct {
	cache *siteclient.Cache
	mu    sync.Mutex
	asked int
}

func (s *countingSites) Client(key types.NamespacedName) (client.Client, error) {
	s.mu.Lock()
	s.asked++
	s.mu.Unlock()
	return s.cache.Client(key)
}

func (s *countingSites) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	var err error
	if global, err = controlplane.Start(controlplane.Options{Name: "global", InstallCRDs: true}); err != nil {
		return fail(err)
	}
	defer func() { _ = global.Stop() }()
	if site, err = controlplane.Start(controlplane.Options{Name: "site", InstallSiteCRDs: true}); err != nil {
		return fail(err)
	}
	defer func() { _ = site.Stop() }()
	if globalCS, err = kubernetes.NewForConfig(global.Config); err != nil {
		return fail(err)
	}
	if err := global.ApplyManifest(ctx, "deploy/rbac/global-controller/roles.yaml"); err != nil {
		return fail(err)
	}
	if err := global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fail(err)
	}
	for _, name := range []string{"site-a", "site-gone"} {
		s := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: name + "-kubeconfig"}}}
		if err := global.Client.Create(ctx, s); err != nil {
			return fail(fmt.Errorf("create Site %s: %w", name, err))
		}
	}
	gone := &fleetv1.Site{}
	if err := global.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "site-gone"}, gone); err != nil {
		return fail(err)
	}
	meta.SetStatusCondition(&gone.Status.Conditions, metav1.Condition{Type: fleetv1.SiteReachableCondition, Status: metav1.ConditionFalse,
		Reason: "Unreachable", Message: "dial tcp 10.9.9.9:6443: connect: no route to host"})
	if err := global.Client.Status().Update(ctx, gone); err != nil {
		return fail(err)
	}
	// The site, reached as the global controller is: its least-privilege kubeconfig.
	kc, err := site.SiteKubeconfig(ctx)
	if err != nil {
		return fail(err)
	}
	sites = &countingSites{cache: siteclient.NewCache(10*time.Second, "sitelogapi-test", siteclient.AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})}
	if _, err := sites.cache.Connect(ctx, types.NamespacedName{Namespace: ns, Name: "site-a"}, "v1", func(context.Context) ([]byte, error) { return kc, nil }); err != nil {
		return fail(err)
	}
	// The site's local controller answers; its BPA does not run.
	siteMgr, err := ctrl.NewManager(site.Config, ctrl.Options{Scheme: controlplane.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return fail(err)
	}
	ring := sitelogs.NewRing(1000, 1<<20)
	controllerLog = zap.NewNop().WithOptions(ring.Tee())
	responder := &sitelogs.Responder{Client: siteMgr.GetClient(), Component: sitev1.LogComponentLocalController, Ring: ring, Instance: "local-controller@test", Clock: clock.RealClock{}}
	if err := responder.SetupWithManager(siteMgr); err != nil {
		return fail(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr() // before the control planes stop
	go func() { _ = siteMgr.Start(mgrCtx) }()
	api := &sitelogapi.Server{
		Auth:   kubeauth.NewReviewer(kubeauth.Config{Client: globalCS, Group: "fleet.edgefleet.io", Resource: "artifacts"}),
		Reader: global.Client,
		Sites:  sites,
		Clock:  clock.RealClock{},
		Wait:   3 * time.Second,
		Poll:   50 * time.Millisecond,
	}
	mux := http.NewServeMux()
	mux.Handle(sitelogapi.Path, api.Handler())
	server = httptest.NewServer(mux)
	defer server.Close()
	return m.Run()
}

// user creates a ServiceAccount bound to clusterRole in ns (none: no binding) and returns its
// token.
func user(t *testing.T, name, clusterRole string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := globalCS.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}
		if _, err := globalCS.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := globalCS.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// get asks for site's log as the token's user.
func get(t *testing.T, token, site string, q url.Values) (int, restv1.SiteLog, restv1.Error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, server.URL+"/api/v1/namespaces/"+ns+"/sites/"+site+"/log?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log restv1.SiteLog
	var e restv1.Error
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&log)
	} else {
		err = json.NewDecoder(resp.Body).Decode(&e)
	}
	if err != nil {
		t.Fatalf("answer %d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, log, e
}

// requestsLeft counts the LogRequests on the site.
func requestsLeft(t *testing.T) int {
	t.Helper()
	list := &sitev1.LogRequestList{}
	if err := site.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestSiteLog(t *testing.T) {
	viewer := user(t, "viewer", "edgefleet-fleet-viewer")
	outsider := user(t, "outsider", "edgefleet-cluster-user")
	controllerLog.Info("reconciled ApplicationCluster", zap.String("cluster", "site-a"), zap.Int("hosts", 3))
	controllerLog.Info("second line")

	var newest time.Time
	t.Run("a viewer gets the local controller's lines, and the LogRequest is deleted", func(t *testing.T) {
		status, log, e := get(t, viewer, "site-a", url.Values{})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, e.Message)
		}
		if log.Component != sitev1.LogComponentLocalController || log.Instance != "local-controller@test" || len(log.Lines) != 2 || log.Since == nil {
			t.Fatalf("answer %+v; want the local controller's two lines", log)
		}
		first := logline.Parse(log.Lines[0])
		if first.Message != "reconciled ApplicationCluster" || first.Level != "info" || first.Time.IsZero() ||
			!strings.Contains(first.Render(), "cluster=site-a hosts=3") {
			t.Errorf("first line %q read as %+v", log.Lines[0], first)
		}
		newest = logline.Parse(log.Lines[1]).Time
		if n := requestsLeft(t); n != 0 {
			t.Errorf("%d LogRequests left on the site after the answer", n)
		}
	})

	t.Run("a follower asking after the newest line it has gets only newer lines", func(t *testing.T) {
		controllerLog.Info("third line")
		status, log, e := get(t, viewer, "site-a", url.Values{"sinceTime": {newest.Format(time.RFC3339Nano)}})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, e.Message)
		}
		if len(log.Lines) != 1 || logline.Parse(log.Lines[0]).Message != "third line" {
			t.Errorf("lines %q; want only the third line", log.Lines)
		}
	})

	t.Run("a user without get sites/log is forbidden and nothing reaches the site", func(t *testing.T) {
		before := sites.count()
		status, _, e := get(t, outsider, "site-a", url.Values{})
		if status != http.StatusForbidden || !strings.Contains(e.Message, "sites/log") {
			t.Errorf("status %d: %s; want 403 naming sites/log", status, e.Message)
		}
		if after := sites.count(); after != before {
			t.Errorf("the site's client was asked for %d times: a LogRequest may have been created", after-before)
		}
	})

	t.Run("a bad parameter is 400 naming it, and nothing reaches the site", func(t *testing.T) {
		before := sites.count()
		for _, q := range []url.Values{{"component": {"kubelet"}}, {"tailLines": {"2001"}}, {"sinceSeconds": {"-1"}}} {
			status, _, e := get(t, viewer, "site-a", q)
			var param string
			for k := range q {
				param = k
			}
			if status != http.StatusBadRequest || e.Field != param || !strings.Contains(e.Message, param) {
				t.Errorf("%v: status %d, field %q: %s; want 400 naming %s", q, status, e.Field, e.Message, param)
			}
		}
		if after := sites.count(); after != before {
			t.Errorf("the site was reached for bad requests")
		}
	})

	t.Run("a component that does not answer is 504 naming it, and the LogRequest is deleted", func(t *testing.T) {
		status, _, e := get(t, viewer, "site-a", url.Values{"component": {"bpa"}})
		if status != http.StatusGatewayTimeout || !strings.Contains(e.Message, "the bpa of site "+ns+"/site-a did not answer within 3s: is it running?") {
			t.Errorf("status %d: %s; want 504", status, e.Message)
		}
		if n := requestsLeft(t); n != 0 {
			t.Errorf("%d LogRequests left on the site", n)
		}
	})

	t.Run("an unreachable site is 503 naming the Site's conditions", func(t *testing.T) {
		status, _, e := get(t, viewer, "site-gone", url.Values{})
		if status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "cannot be reached") || !strings.Contains(e.Message, "Reachable=False (Unreachable: dial tcp") {
			t.Errorf("status %d: %s; want 503 with the Reachable condition", status, e.Message)
		}
	})

	t.Run("a Site that does not exist is 404", func(t *testing.T) {
		status, _, e := get(t, viewer, "site-nowhere", url.Values{})
		if status != http.StatusNotFound || !strings.Contains(e.Message, "there is no Site") {
			t.Errorf("status %d: %s; want 404", status, e.Message)
		}
	})
}
