package site_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/site"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// global is the global cluster: a real API server with the fleet CRDs, and the site reconciler
// running against it in a manager. Each test starts the site control planes it needs.
var global *testenv.ControlPlane

// Short intervals so state changes show within seconds.
const (
	heartbeat = 2 * time.Second
	minRetry  = 250 * time.Millisecond
	timeout   = 2 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	cp, err := testenv.Start(testenv.Options{Name: "global", InstallCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	global = cp

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metrics, err := site.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := &site.Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Sites:             siteclient.NewCache(timeout, "site-reconciler-test"),
		Recorder:          mgr.GetEventRecorder("site-controller"),
		Metrics:           metrics,
		Clock:             clock.RealClock{},
		HeartbeatInterval: heartbeat,
		MinRetryInterval:  minRetry,
	}
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}
