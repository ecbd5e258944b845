package meshpolicy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"google.golang.org/protobuf/proto"
	securityapi "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const timeout = 10 * time.Second

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := controlplane.Scheme()
	if err := securityv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startManager runs a manager with the mesh policies of c set up in mode on cp until the test
// ends or the returned function is called, which returns what the manager's Start returned.
// The manager logs to log.
func startManager(t *testing.T, cp *controlplane.ControlPlane, mode string, c meshpolicy.Component, log logr.Logger) func() error {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme(t),
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := meshpolicy.Setup(t.Context(), mgr, mode, c, timeout); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	return stop
}

func globalController(ns string) meshpolicy.Component {
	return meshpolicy.Component{
		Namespace: ns,
		Name:      "edgefleet-global-controller",
		Selector:  map[string]string{"app.kubernetes.io/name": "edgefleet-global-controller"},
		Ports: []meshpolicy.Port{
			{Name: "artifact API", Number: 8443, Principals: []string{
				meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account"),
				meshpolicy.ServiceAccount(ns, "edgefleet-cli"),
			}},
			{Name: "webhooks", Number: 9443, SourceRanges: []string{"10.0.0.1"}},
		},
	}
}

// current checks that the API server holds c's two policies as the builders make them.
func current(ctx context.Context, cl client.Client, c meshpolicy.Component) error {
	key := client.ObjectKey{Namespace: c.Namespace, Name: c.Name}
	pa, ap := &securityv1.PeerAuthentication{}, &securityv1.AuthorizationPolicy{}
	if err := cl.Get(ctx, key, pa); err != nil {
		return err
	}
	if err := cl.Get(ctx, key, ap); err != nil {
		return err
	}
	if want := meshpolicy.PeerAuthentication(c); !proto.Equal(&pa.Spec, &want.Spec) {
		return fmt.Errorf("PeerAuthentication spec is %v, want %v", &pa.Spec, &want.Spec)
	}
	if want := meshpolicy.AuthorizationPolicy(c); !proto.Equal(&ap.Spec, &want.Spec) {
		return fmt.Errorf("AuthorizationPolicy spec is %v, want %v", &ap.Spec, &want.Spec)
	}
	for _, o := range []client.Object{pa, ap} {
		if o.GetLabels()[meshpolicy.ManagedByLabel] != c.Name {
			return fmt.Errorf("%T labels %v lack %s=%s", o, o.GetLabels(), meshpolicy.ManagedByLabel, c.Name)
		}
	}
	return nil
}

// TestPoliciesKeptAndUninstalled runs the reconciler against an API server with Istio's CRDs
// (from the istio.io/api module go.mod pins): the policies appear, hand edits — mTLS made
// PERMISSIVE, a principal deleted, the managed-by label changed, an object deleted — are
// repaired while labels of others stay, and Uninstall removes both.
func TestPoliciesKeptAndUninstalled(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "istio", IstioCRDs: true})
	cl, err := client.New(cp.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	c := globalController(ns)
	stop := startManager(t, cp, meshpolicy.ModeOn, c, testr.New(t))
	ctx := t.Context()
	key := client.ObjectKey{Namespace: ns, Name: c.Name}
	testutil.Eventually(t, 30*time.Second, func() error { return current(ctx, cl, c) })

	pa := &securityv1.PeerAuthentication{}
	if err := cl.Get(ctx, key, pa); err != nil {
		t.Fatal(err)
	}
	pa.Spec.Mtls.Mode = securityapi.PeerAuthentication_MutualTLS_PERMISSIVE
	pa.Labels["team"] = "mesh"
	if err := cl.Update(ctx, pa); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error { return current(ctx, cl, c) })
	if err := cl.Get(ctx, key, pa); err != nil || pa.Labels["team"] != "mesh" {
		t.Fatalf("labels of others after the repair: %v, %v; want team=mesh kept", pa.Labels, err)
	}

	ap := &securityv1.AuthorizationPolicy{}
	if err := cl.Get(ctx, key, ap); err != nil {
		t.Fatal(err)
	}
	ap.Spec.Rules[0].From[0].Source.Principals = ap.Spec.Rules[0].From[0].Source.Principals[1:]
	ap.Labels[meshpolicy.ManagedByLabel] = "someone"
	if err := cl.Update(ctx, ap); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error { return current(ctx, cl, c) })

	for _, o := range []client.Object{&securityv1.PeerAuthentication{}, &securityv1.AuthorizationPolicy{}} {
		o.SetNamespace(ns)
		o.SetName(c.Name)
		if err := cl.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, func() error { return current(ctx, cl, c) })
	}

	// The documented uninstall: the controller is stopped, then its policies are removed.
	if err := stop(); err != nil {
		t.Fatalf("manager: %v", err)
	}
	for range 2 { // a second run finds nothing to remove and succeeds
		if err := meshpolicy.Uninstall(ctx, cp.Config, ns, c.Name, timeout); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []client.Object{&securityv1.PeerAuthentication{}, &securityv1.AuthorizationPolicy{}} {
		if err := cl.Get(ctx, key, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T after uninstall: %v, want not found", o, err)
		}
	}
}

// TestNothingWithoutIstio checks that where Istio's CRDs are absent the default mode runs the
// manager without error and Uninstall does nothing, while --istio=on refuses to start.
func TestNothingWithoutIstio(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "no-istio"})
	c := globalController("edgefleet-system")
	if ok, err := meshpolicy.Installed(t.Context(), cp.Config, timeout); ok || err != nil {
		t.Fatalf("Installed = %v, %v; want false, nil", ok, err)
	}
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	stop := startManager(t, cp, meshpolicy.ModeAuto, c, log)
	testutil.Consistently(t, 2*time.Second, func() error { // the time a wrong manager would take to start a controller or fail
		mu.Lock()
		all := strings.Join(lines, "\n")
		mu.Unlock()
		if strings.Contains(all, "keeping mesh policies current") || strings.Contains(all, `"error"`) {
			return fmt.Errorf("the manager's log shows a mesh policy controller or an error:\n%s", all)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("manager with --istio=auto and no Istio: %v", err)
	}
	mu.Lock()
	all := strings.Join(lines, "\n")
	mu.Unlock()
	if n := strings.Count(all, "Istio CRDs absent, mesh policies off"); n != 1 {
		t.Errorf("the manager's log says \"Istio CRDs absent, mesh policies off\" %d times, want once:\n%s", n, all)
	}
	if strings.Contains(all, "keeping mesh policies current") || strings.Contains(all, `"error"`) {
		t.Errorf("the manager's log shows a mesh policy controller or an error:\n%s", all)
	}
	if err := meshpolicy.Uninstall(t.Context(), cp.Config, c.Namespace, c.Name, timeout); err != nil {
		t.Fatalf("uninstall without Istio: %v", err)
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	err = meshpolicy.Setup(t.Context(), mgr, meshpolicy.ModeOn, c, timeout)
	if err == nil || !strings.Contains(err.Error(), "--istio=on") {
		t.Fatalf("Setup with --istio=on and no Istio = %v, want an error naming --istio=on", err)
	}
}
