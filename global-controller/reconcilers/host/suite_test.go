package host_test

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/host"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// global is the global cluster: a real API server with the fleet CRDs and the host reconciler
// running against it.
var global *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithManager(m, testenv.Options{Name: "global", InstallCRDs: true},
		func(ctx context.Context, cp *testenv.ControlPlane, mgr manager.Manager) error {
			global = cp
			if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
			r := &host.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("host-controller")}
			return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4})
		}))
}
