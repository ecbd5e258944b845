package edgecluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgecluster"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "edgecluster", InstallSiteCRDs: true, ClusterAPICRDs: true},
		func(_ context.Context, c *controlplane.ControlPlane) error {
			cp = c
			return nil
		}))
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := controlplane.Scheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startManager runs the EdgeCluster reconciler and, with capi, Cluster-API's own Cluster
// reconciler (wired as Cluster-API's core/main.go does) on a manager whose cache sees only ns.
func startManager(t *testing.T, ns string, capi bool) {
	t.Helper()
	ctx := t.Context()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &edgecluster.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("edgecluster-controller")}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		t.Fatalf("set up the EdgeCluster reconciler: %v", err)
	}
	var clusterCache clustercache.ClusterCache
	if capi {
		if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
			t.Fatal(err)
		}
		secrets, err := setup.CreateSecretCachingClient(mgr)
		if err != nil {
			t.Fatal(err)
		}
		clusterCache, err = clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
			SecretClient: secrets,
			Cache:        setup.ClusterCacheCacheOptions(),
			Client:       setup.ClusterCacheClientOptions("edgefleet-test", 20, 30),
		}, controller.Options{MaxConcurrentReconciles: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := (&cluster.Reconciler{
			Client:                      mgr.GetClient(),
			APIReader:                   mgr.GetAPIReader(),
			ClusterCache:                clusterCache,
			RemoteConnectionGracePeriod: 50 * time.Second,
		}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
			t.Fatalf("set up Cluster-API's Cluster reconciler: %v", err)
		}
	}
	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if s, ok := clusterCache.(interface{ Shutdown() }); ok {
			s.Shutdown() // its per-cluster caches outlive the manager
		}
	})
}

func newEdgeCluster(ns, name string) *sitev1.EdgeCluster {
	return &sitev1.EdgeCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sitev1.EdgeClusterSpec{ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
	}
}

func newCluster(ns, name, infra string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeCluster", Name: infra,
			},
		},
	}
}

func readyReason(ec *sitev1.EdgeCluster) string {
	if c := meta.FindStatusCondition(ec.Status.Conditions, sitev1.EdgeClusterReadyCondition); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "unset"
}

// TestEdgeClusterWithClusterAPI runs the EdgeCluster reconciler next to Cluster-API's Cluster
// reconciler: an EdgeCluster without an owner waits (Ready=False WaitingForOwner, not
// provisioned); once a Cluster references it, Cluster-API sets the owner reference, the
// EdgeCluster reports provisioned and Ready, and Cluster-API — reading it through the v1beta2
// contract (CRD label, status.initialization.provisioned, spec.controlPlaneEndpoint) — marks
// the Cluster's infrastructure provisioned and takes over the endpoint.
func TestEdgeClusterWithClusterAPI(t *testing.T) {
	t.Parallel()
	ns := cp.Namespace(t)
	ctx := t.Context()
	c, err := client.New(cp.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, ns, true)

	ec := newEdgeCluster(ns, "site-a")
	if err := c.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if got := readyReason(ec); got != "False/"+sitev1.ReasonWaitingForOwner {
			return fmt.Errorf("Ready is %s, want False/%s", got, sitev1.ReasonWaitingForOwner)
		}
		return nil
	})
	if ec.Status.Initialization.Provisioned != nil {
		t.Fatalf("EdgeCluster without an owner Cluster reports provisioned=%v", *ec.Status.Initialization.Provisioned)
	}

	cc := c
	cl := newCluster(ns, "site-a", ec.Name)
	if err := cc.Create(ctx, cl); err != nil {
		t.Fatalf("create Cluster: %v", err)
	}
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.Create(ctx, kubeconfig.GenerateSecret(cl, kc)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			return err
		}
		if !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
			return fmt.Errorf("Cluster's infrastructure is not provisioned yet")
		}
		return nil
	})
	if ep := cl.Spec.ControlPlaneEndpoint; ep.Host != "10.0.0.10" || ep.Port != 6443 {
		t.Errorf("Cluster's controlPlaneEndpoint = %+v, want the EdgeCluster's 10.0.0.10:6443", ep)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(ec.Status.Initialization.Provisioned, false) || readyReason(ec) != "True/"+sitev1.ReasonInfrastructureProvisioned {
		t.Errorf("EdgeCluster: provisioned %v, Ready %s; want true, True/%s", ec.Status.Initialization.Provisioned, readyReason(ec), sitev1.ReasonInfrastructureProvisioned)
	}
	owned := false
	for _, ref := range ec.OwnerReferences {
		owned = owned || (ref.Kind == "Cluster" && ref.Name == cl.Name)
	}
	if !owned {
		t.Errorf("EdgeCluster owner references %v do not name Cluster %s", ec.OwnerReferences, cl.Name)
	}
}

// TestEdgeClusterPaused checks that an EdgeCluster of a paused Cluster is left alone until the
// Cluster is unpaused, and reports so in a Paused condition (v1beta2 contract): True/Paused
// while paused — and nothing else —, False/NotPaused after. Then the paused annotation on the
// EdgeCluster itself does the same. The owner reference is set here as Cluster-API would (its
// Cluster reconciler does nothing on a paused Cluster either).
func TestEdgeClusterPaused(t *testing.T) {
	t.Parallel()
	ns := cp.Namespace(t)
	ctx := t.Context()
	cc, err := client.New(cp.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, ns, false)

	cl := newCluster(ns, "paused", "paused")
	cl.Spec.Paused = ptr.To(true)
	if err := cc.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	ec := newEdgeCluster(ns, "paused")
	ec.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cl.Name, UID: cl.UID,
	}}
	if err := cc.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, cc, ec, metav1.ConditionTrue, clusterv1.PausedReason, "Cluster spec.paused")
	testutil.Consistently(t, 3*time.Second, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if ec.Status.Initialization.Provisioned != nil || len(ec.Status.Conditions) != 1 {
			return fmt.Errorf("EdgeCluster of a paused Cluster was reconciled: %+v", ec.Status)
		}
		return nil
	})

	controlplane.Update(t, cc, cl, func(cl *clusterv1.Cluster) { cl.Spec.Paused = ptr.To(false) })
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if !ptr.Deref(ec.Status.Initialization.Provisioned, false) {
			return fmt.Errorf("EdgeCluster not provisioned after unpause; Ready %s", readyReason(ec))
		}
		return nil
	})
	waitPaused(t, cc, ec, metav1.ConditionFalse, clusterv1.NotPausedReason, "")

	// The annotation pauses the EdgeCluster alone: a changed endpoint is taken in only after.
	controlplane.Update(t, cc, ec, func(ec *sitev1.EdgeCluster) {
		ec.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		ec.Spec.ControlPlaneEndpoint.Port = 7443
	})
	waitPaused(t, cc, ec, metav1.ConditionTrue, clusterv1.PausedReason, "EdgeCluster has the cluster.x-k8s.io/paused annotation")
	if c := meta.FindStatusCondition(ec.Status.Conditions, sitev1.EdgeClusterReadyCondition); c == nil || !strings.HasSuffix(c.Message, ":6443") {
		t.Errorf("paused EdgeCluster took the new endpoint in: Ready %+v", c)
	}
	controlplane.Update(t, cc, ec, func(ec *sitev1.EdgeCluster) { delete(ec.Annotations, clusterv1.PausedAnnotation) })
	waitPaused(t, cc, ec, metav1.ConditionFalse, clusterv1.NotPausedReason, "")
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, sitev1.EdgeClusterReadyCondition); c == nil || !strings.HasSuffix(c.Message, ":7443") {
			return fmt.Errorf("Ready is %+v after the annotation went, want the new endpoint :7443", c)
		}
		return nil
	})
}

// waitPaused waits until ec's Paused condition has status and reason (and its message
// contains msg), for ec's current generation.
func waitPaused(t *testing.T, c client.Client, ec *sitev1.EdgeCluster, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		p := meta.FindStatusCondition(ec.Status.Conditions, clusterv1.PausedCondition)
		if p == nil || p.Status != status || p.Reason != reason || !strings.Contains(p.Message, msg) || p.ObservedGeneration != ec.Generation {
			return fmt.Errorf("Paused is %+v, want %s/%s (%q) at generation %d", p, status, reason, msg, ec.Generation)
		}
		return nil
	})
}
