package edgebootstrap_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/reconcilers/edgebootstrap"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "edgebootstrap", InstallSiteCRDs: true, ClusterAPICRDs: true},
		func(_ context.Context, c *controlplane.ControlPlane) error {
			cp = c
			return nil
		}))
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := controlplane.Scheme()
	if err := clusterv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// userData is a Bootstrapper whose hosts never join: these tests look at the first-boot data.
type userData struct{}

func (userData) UserData(context.Context, *clusterv1.Cluster, *clusterv1.Machine) ([]byte, error) {
	return []byte("#cloud-config\n"), nil
}

func (userData) Join(context.Context, *clusterv1.Cluster, *clusterv1.Machine) (bool, error) {
	return false, nil
}

// startManager runs the EdgeBootstrapConfig reconciler on a manager whose cache sees only ns.
func startManager(t *testing.T, ns string) {
	t.Helper()
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
	r := &edgebootstrap.Reconciler{Client: mgr.GetClient(), Bootstrapper: userData{},
		Recorder: mgr.GetEventRecorder("edgebootstrapconfig-controller"), JoinRetry: time.Second}
	if err := r.SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatalf("set up the EdgeBootstrapConfig reconciler: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// TestPaused: the config of a Machine of a paused Cluster gets no first-boot data and reports
// only the Paused condition, True/Paused (Cluster-API's v1beta2 contract); once the Cluster is
// unpaused it reports False/NotPaused and writes the data Secret. The paused annotation on the
// config pauses it alone.
func TestPaused(t *testing.T) {
	t.Parallel()
	ns := cp.Namespace(t)
	ctx := t.Context()
	c, err := client.New(cp.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: "site"}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m-0", Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: cl.Name,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeBootstrapConfig", Name: "m-0"}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: sitev1.GroupVersion.Group, Kind: "EdgeMachine", Name: "m-0"},
		},
	}
	for _, o := range []client.Object{cl, m} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Owned by its Machine, as Cluster-API's Machine controller would set it.
	cfg := &sitev1.EdgeBootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m-0", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}}}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)

	waitPaused(t, c, cfg, metav1.ConditionTrue, clusterv1.PausedReason, "Cluster spec.paused")
	testutil.Consistently(t, 3*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
		if cfg.Status.DataSecretName != nil || len(cfg.Status.Conditions) != 1 {
			return fmt.Errorf("config of a paused Cluster was reconciled: %+v", cfg.Status)
		}
		return nil
	})

	controlplane.Update(t, c, cl, func(cl *clusterv1.Cluster) { cl.Spec.Paused = ptr.To(false) })
	waitPaused(t, c, cfg, metav1.ConditionFalse, clusterv1.NotPausedReason, "")
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
		if cfg.Status.DataSecretName == nil || !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
			return fmt.Errorf("no first-boot data after unpause: %+v", cfg.Status)
		}
		return nil
	})

	controlplane.Update(t, c, cfg, func(cfg *sitev1.EdgeBootstrapConfig) {
		cfg.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	waitPaused(t, c, cfg, metav1.ConditionTrue, clusterv1.PausedReason, "EdgeBootstrapConfig has the cluster.x-k8s.io/paused annotation")
	controlplane.Update(t, c, cfg, func(cfg *sitev1.EdgeBootstrapConfig) { delete(cfg.Annotations, clusterv1.PausedAnnotation) })
	waitPaused(t, c, cfg, metav1.ConditionFalse, clusterv1.NotPausedReason, "")
}

// waitPaused waits until cfg's Paused condition has status and reason (and its message
// contains msg), for cfg's current generation.
func waitPaused(t *testing.T, c client.Client, cfg *sitev1.EdgeBootstrapConfig, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
		p := meta.FindStatusCondition(cfg.Status.Conditions, clusterv1.PausedCondition)
		if p == nil || p.Status != status || p.Reason != reason || !strings.Contains(p.Message, msg) || p.ObservedGeneration != cfg.Generation {
			return fmt.Errorf("Paused is %+v, want %s/%s (%q) at generation %d", p, status, reason, msg, cfg.Generation)
		}
		return nil
	})
}
