package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Run is the body of a TestMain that needs one control plane for the whole package: it starts
// the control plane, calls setup (which keeps cp in a package variable and prepares what the
// tests share), runs the tests and stops the control plane. It returns the exit code for
// os.Exit; errors are printed.
func Run(m *testing.M, opts Options, setup func(ctx context.Context, cp *ControlPlane) error) int {
	return withControlPlane(opts, func(ctx context.Context, cp *ControlPlane) int {
		if err := setup(ctx, cp); err != nil {
			fmt.Fprintln(os.Stderr, "set up the test suite:", err)
			return 1
		}
		return m.Run()
	})
}

// RunWithManager is Run for reconciler suites: setup registers the reconcilers on a
// controller-runtime manager of the control plane, which runs while the tests do.
// Controller-runtime logs errors only, to stderr.
func RunWithManager(m *testing.M, opts Options, setup func(ctx context.Context, cp *ControlPlane, mgr manager.Manager) error) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	return withControlPlane(opts, func(ctx context.Context, cp *ControlPlane) int {
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
			Scheme:                 Scheme(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "create manager:", err)
			return 1
		}
		if err := setup(ctx, cp, mgr); err != nil {
			fmt.Fprintln(os.Stderr, "set up the test suite:", err)
			return 1
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		code := m.Run()
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			return 1
		}
		return code
	})
}

func withControlPlane(opts Options, run func(context.Context, *ControlPlane) int) int {
	cp, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return run(context.Background(), cp)
}
