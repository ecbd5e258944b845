package webhooks_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/webhooks"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is a real API server with the CRDs and the webhook configurations of deploy/webhook,
// calling the validators served by a manager's webhook server (the release validator over
// store, the site version validator over the API server).
var (
	global *controlplane.ControlPlane
	store  = &digests{have: map[string][]restv1.ArtifactKind{}}
)

// digests is an artifact store holding the digests the test put in it, each as artifacts of
// its kinds; down makes it fail.
type digests struct {
	mu   sync.Mutex
	have map[string][]restv1.ArtifactKind
	down bool
}

func (d *digests) KindsOf(_ context.Context, sha256 string) ([]restv1.ArtifactKind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return nil, errors.New("connection refused")
	}
	return d.have[sha256], nil
}

func (d *digests) set(f func(*digests)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func TestMain(m *testing.M) {
	var cp *controlplane.ControlPlane
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "global", InstallCRDs: true, GlobalWebhooks: true}, func(ctx context.Context, c *controlplane.ControlPlane) error {
		cp, global = c, c
		host, port, certDir := cp.WebhookServerOptions()
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
			Scheme:                 controlplane.Scheme(),
			WebhookServer:          webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir}),
			HealthProbeBindAddress: "0",
		})
		if err != nil {
			return err
		}
		if err := (&webhooks.ReleaseValidator{Artifacts: store}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := webhooks.SetupWindowValidators(mgr, time.Now); err != nil {
			return err
		}
		if err := (&webhooks.SiteVersionValidator{Releases: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
			return err
		}
		go func() { _ = mgr.Start(ctx) }()
		return waitServing(ctx, mgr)
	}))
}

// waitServing waits until the webhook server answers.
func waitServing(ctx context.Context, mgr manager.Manager) error {
	check := mgr.GetWebhookServer().StartedChecker()
	for {
		err := check(nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func release(ns string, digests ...string) *fleetv1.Release {
	r := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-1.36.3"},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: digests[0]}},
	}
	for _, d := range digests[1:] {
		r.Spec.Packages = append(r.Spec.Packages, sitev1.ArtifactRef{SHA256: d})
	}
	return r
}

// TestReleaseWithMissingArtifactsIsRefused checks that creating a release that names content
// the store lacks, or holds only as another kind than the field's, is refused with an error
// naming each such digest's field, that the same release is admitted once the content is
// there as its kind, and that an unreachable store refuses.
func TestReleaseWithMissingArtifactsIsRefused(t *testing.T) {
	ns := global.Namespace(t)
	img, pkg1, pkg2 := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	store.set(func(d *digests) {
		d.have[img] = []restv1.ArtifactKind{restv1.KindOSImage}
		d.have[pkg1] = []restv1.ArtifactKind{restv1.KindBinaryPackage}
	})
	err := global.Client.Create(t.Context(), release(ns, img, pkg1, pkg2))
	if err == nil || !strings.Contains(err.Error(), "spec.packages[1].sha256") || !strings.Contains(err.Error(), "sha256:"+pkg2) || strings.Contains(err.Error(), "packages[0]") {
		t.Fatalf("release naming a missing package: got %v, want refused naming spec.packages[1].sha256 only", err)
	}
	// A container image archive counts as much as a package.
	missingImage := release(ns, img, pkg1)
	missingImage.Spec.Images = []sitev1.ArtifactRef{{SHA256: pkg2, Name: "container-image-archive pause"}}
	if err := global.Client.Create(t.Context(), missingImage); err == nil || !strings.Contains(err.Error(), "spec.images[0].sha256") || !strings.Contains(err.Error(), "sha256:"+pkg2) {
		t.Fatalf("release naming a missing image: got %v, want refused naming spec.images[0].sha256", err)
	}
	store.set(func(d *digests) { d.down = true })
	if err := global.Client.Create(t.Context(), release(ns, img)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("release with the store down: got %v, want refused", err)
	}
	// Stored, but as a chart: not a package.
	store.set(func(d *digests) { d.down = false; d.have[pkg2] = []restv1.ArtifactKind{restv1.KindHelmChart} })
	err = global.Client.Create(t.Context(), release(ns, img, pkg1, pkg2))
	if want := `spec.packages[1].sha256: Invalid value: "sha256:` + pkg2 + `": stored as helm-chart, not as binary-package: name a binary-package's digest (edgefleet artifact list --kind binary-package)`; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "packages[0]") {
		t.Fatalf("release naming a chart among its packages: got %v, want refused with %q", err, want)
	}
	store.set(func(d *digests) { d.have[pkg2] = append(d.have[pkg2], restv1.KindBinaryPackage) })
	if err := global.Client.Create(t.Context(), release(ns, img, pkg1, pkg2)); err != nil {
		t.Fatalf("release whose artifacts are all stored: %v", err)
	}
}
