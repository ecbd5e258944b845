package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestClusterAPIClusterReconciler installs Cluster-API's core CRDs from the module cache and
// runs Cluster-API's own Cluster reconciler and ClusterCache in-process on a controller-runtime
// manager: the reconciler must put its finalizer on a new Cluster, move it to phase Pending,
// report the remote connection (through the Cluster's kubeconfig Secret) as working, and let
// the Cluster go on delete.
func TestClusterAPIClusterReconciler(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "capi", ClusterAPICRDs: true})
	ctx := t.Context()

	scheme := controlplane.Scheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"clusters", "machines", "machinesets", "machinedeployments", "machinehealthchecks"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name + ".cluster.x-k8s.io"}, crd); err != nil {
			t.Fatalf("Cluster-API CRD %s: %v", name, err)
		}
		if !established(crd) || !servesVersion(crd, clusterv1.GroupVersion.Version) {
			t.Fatalf("Cluster-API CRD %s is not established or does not serve %s", crd.Name, clusterv1.GroupVersion.Version)
		}
	}

	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Controller names are unique per process; -count=N runs this test N times.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The Cluster reconciler wired as Cluster-API's core manager wires it (core/main.go).
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		t.Fatalf("Cluster-API indexes: %v", err)
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		t.Fatal(err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions("edgefleet-testenv", 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 1})
	if err != nil {
		t.Fatalf("Cluster-API ClusterCache: %v", err)
	}
	if err := (&cluster.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                clusterCache,
		RemoteConnectionGracePeriod: 50 * time.Second,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		t.Fatalf("Cluster-API Cluster reconciler: %v", err)
	}
	ns := cp.Namespace(t)
	// No infrastructure or control plane yet: the Cluster stays Pending.
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-a"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{
			Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}},
		}},
	}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatalf("create Cluster: %v", err)
	}
	// The Cluster's kubeconfig Secret, in Cluster-API's format, points at this same control
	// plane: the ClusterCache connects to it as to the workload cluster.
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, kubeconfig.GenerateSecret(cl, kc)); err != nil {
		t.Fatalf("create the Cluster's kubeconfig Secret: %v", err)
	}

	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		// The ClusterCache's per-cluster caches outlive the manager: their watches would hold
		// the API server's shutdown until it times out.
		if s, ok := clusterCache.(interface{ Shutdown() }); ok {
			s.Shutdown()
		} else {
			t.Errorf("ClusterCache %T has no Shutdown", clusterCache)
		}
	})

	testutil.Eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			return err
		}
		if !slices.Contains(cl.Finalizers, clusterv1.ClusterFinalizer) {
			return fmt.Errorf("Cluster has finalizers %v, want %s", cl.Finalizers, clusterv1.ClusterFinalizer)
		}
		if cl.Status.Phase != string(clusterv1.ClusterPhasePending) {
			return fmt.Errorf("Cluster is in phase %q, want %s", cl.Status.Phase, clusterv1.ClusterPhasePending)
		}
		if !conditions.IsTrue(cl, clusterv1.ClusterRemoteConnectionProbeCondition) {
			return fmt.Errorf("Cluster condition %s is not true: %+v", clusterv1.ClusterRemoteConnectionProbeCondition,
				conditions.Get(cl, clusterv1.ClusterRemoteConnectionProbeCondition))
		}
		return nil
	})

	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func() error {
		left := &clusterv1.Cluster{}
		err := c.Get(ctx, client.ObjectKeyFromObject(cl), left)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("Cluster still there after delete, finalizers %v", left.Finalizers)
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}
