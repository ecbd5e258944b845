package release_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is the global cluster with the release reconciler running against it over store, and
// refs answering the artifact store's reference question from the manager's cache.
var (
	global *controlplane.ControlPlane
	store  = &digests{have: map[string]release.Stored{}}
	refs   release.References
)

// digests is an artifact store that holds the artifacts the test put in it: their kinds, and
// the manifests of packages.
type digests struct {
	mu   sync.Mutex
	have map[string]release.Stored
}

func (d *digests) KindsOf(_ context.Context, sha256 string) ([]restv1.ArtifactKind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.have[sha256].Kinds, nil
}

func (d *digests) Manifest(_ context.Context, sha256 string) (*packages.Manifest, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.have[sha256]; st.Invalid != "" {
		return nil, &artifacts.ValidationError{Field: "content", Message: st.Invalid}
	}
	return d.have[sha256].Manifest, nil
}

// add stores content of sha256 as an artifact of kind.
func (d *digests) add(sha256 string, kind restv1.ArtifactKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.have[sha256]
	st.Kinds = append(st.Kinds, kind)
	d.have[sha256] = st
}

// addInvalidPackage stores content of sha256 as a binary-package that is none (why).
func (d *digests) addInvalidPackage(sha256, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.have[sha256] = release.Stored{Kinds: []restv1.ArtifactKind{restv1.KindBinaryPackage}, Invalid: why}
}

// addPackage stores a binary package of sha256 with manifest m.
func (d *digests) addPackage(sha256 string, m *packages.Manifest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.have[sha256] = release.Stored{Kinds: []restv1.ArtifactKind{restv1.KindBinaryPackage}, Manifest: m}
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
