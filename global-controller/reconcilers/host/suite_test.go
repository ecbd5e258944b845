package host_test

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/host"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is the global cluster: a real API server with the fleet CRDs and the host reconciler
// running against it.
var global *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunWithManager(m, controlplane.Options{Name: "global", InstallCRDs: true},
		func(ctx context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			global = cp
			if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
			r := &host.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("host-controller")}
			return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4})
		}))
}
