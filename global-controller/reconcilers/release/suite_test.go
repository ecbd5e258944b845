package release_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is the global cluster with the release reconciler running against it over store, and
// refs answering the artifact store's reference question from the manager's cache.
var (
	global *controlplane.ControlPlane
	store  = &digests{have: map[string]bool{}}
	refs   release.References
)

// digests is an artifact store that holds the digests the test put in it.
type digests struct {
	mu   sync.Mutex
	have map[string]bool
}

func (d *digests) HasDigest(_ context.Context, sha256 string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.have[sha256], nil
}

func (d *digests) add(sha256 string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.have[sha256] = true
}

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunWithManager(m, controlplane.Options{Name: "global", InstallCRDs: true},
		func(ctx context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			global = cp
			if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
			refs = release.References{Reader: mgr.GetAPIReader()}
			r := &release.Reconciler{
				Client:          mgr.GetClient(),
				Artifacts:       store,
				Recorder:        mgr.GetEventRecorder("release-controller"),
				RecheckInterval: 200 * time.Millisecond,
			}
			return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2})
		}))
}
