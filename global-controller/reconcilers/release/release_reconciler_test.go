package release_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func digest(c byte) string { return strings.Repeat(string(c), 64) }

// readyIs returns a check that rel's Ready condition has status and reason and a message
// holding contains.
func readyIs(t *testing.T, rel *fleetv1.Release) func(status metav1.ConditionStatus, reason, contains string) func() error {
	return func(status metav1.ConditionStatus, reason, contains string) func() error {
		return func() error {
			got := &fleetv1.Release{}
			if err := global.Client.Get(t.Context(), client.ObjectKeyFromObject(rel), got); err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.ReleaseReadyCondition)
			if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, contains) {
				return fmt.Errorf("Ready is %+v, want %s/%s mentioning %q", c, status, reason, contains)
			}
			return nil
		}
	}
}

// TestReleaseReadyOnceEveryArtifactIsStored checks that a release whose package is missing is
// not Ready and names the digest, becomes Ready once the artifact is uploaded, and that the
// artifact store's reference check names the release for each of its digests and no other.
func TestReleaseReadyOnceEveryArtifactIsStored(t *testing.T) {
	ns := global.Namespace(t)
	os, pkg, chart, image := digest('a'), digest('b'), digest('c'), digest('e')
	store.add(os, restv1.KindOSImage)
	store.add(chart, restv1.KindHelmChart)
	rel := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-1.36.3"},
		Spec: fleetv1.ReleaseSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: os},
			Packages:          []sitev1.ArtifactRef{{SHA256: pkg, Name: "kubelet"}},
			Charts:            []sitev1.ArtifactRef{{SHA256: chart, Name: "cni"}},
			Images:            []sitev1.ArtifactRef{{SHA256: image, Name: "pause"}},
		},
	}
	if err := global.Client.Create(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
	ready := readyIs(t, rel)
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, "sha256:"+pkg))
	store.addPackage(pkg, &packages.Manifest{Name: "kubelet", Version: "1.36.3"})
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, "sha256:"+image))
	store.add(image, restv1.KindContainerImageArchive)
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, ""))

	want := "Release/" + ns + "/edge-1.36.3"
	for _, d := range []string{os, pkg, chart, image} {
		testutil.Eventually(t, 10*time.Second, func() error {
			by, err := refs.ReferencesTo(t.Context(), d)
			if err != nil {
				return err
			}
			if !slices.Contains(by, want) {
				return fmt.Errorf("references to %s: %v, want %s", d[:8], by, want)
			}
			return nil
		})
	}
	by, err := refs.ReferencesTo(t.Context(), digest('d'))
	if err != nil || len(by) != 0 {
		t.Fatalf("references to an unused digest: %v, %v", by, err)
	}
}

// TestReleaseNotReadyWhileItsArtifactsCannotGoTogether checks that a release naming a package's
// digest among its charts is not Ready (WrongArtifactKind, naming the field) until that content
// is uploaded as a chart, then not Ready because its package comes after a package the release
// lacks (PackagesConflict, naming both); that a release whose package runs on worker hosts
// only says so when it is Ready; and that a package whose content is no package is named
// (PackageInvalid).
func TestReleaseNotReadyWhileItsArtifactsCannotGoTogether(t *testing.T) {
	ns := global.Namespace(t)
	os, apiserver, chart, hello := digest('1'), digest('2'), digest('3'), digest('4')
	store.add(os, restv1.KindOSImage)
	store.addPackage(apiserver, &packages.Manifest{Name: "kube-apiserver", Version: "1.36.3", Hosts: packages.HostsControlPlane, After: []string{"etcd"}})
	store.add(chart, restv1.KindBinaryPackage)
	store.addPackage(hello, &packages.Manifest{Name: "edge-hello", Version: "1.0.0", Hosts: packages.HostsWorker})
	bad := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: fleetv1.ReleaseSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: os},
			Packages:          []sitev1.ArtifactRef{{SHA256: apiserver, Name: "kube-apiserver"}},
			Charts:            []sitev1.ArtifactRef{{SHA256: chart, Name: "cni"}},
		},
	}
	good := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec: fleetv1.ReleaseSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: os},
			Packages:          []sitev1.ArtifactRef{{SHA256: hello, Name: "edge-hello"}},
		},
	}
	for _, rel := range []*fleetv1.Release{bad, good} {
		if err := global.Client.Create(t.Context(), rel); err != nil {
			t.Fatal(err)
		}
	}
	ready := readyIs(t, bad)
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonWrongArtifactKind,
		"spec.charts[0] (cni) sha256:"+chart+" is stored as binary-package, not as helm-chart"))
	store.add(chart, restv1.KindHelmChart)
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonPackagesConflict,
		"kube-apiserver comes after etcd, which is not among the packages"))
	testutil.Eventually(t, 30*time.Second, readyIs(t, good)(metav1.ConditionTrue, fleetv1.ReasonArtifactsFound,
		"package(s) edge-hello run on worker hosts only: a site without a worker Host fails this release"))

	// A package stored before the store checked packages, which is none.
	junk := digest('5')
	store.addInvalidPackage(junk, "not a binary package (docs/packages.md): package: not gzip-compressed")
	invalid := good.DeepCopy()
	invalid.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "invalid"}
	invalid.Spec.Packages = []sitev1.ArtifactRef{{SHA256: junk, Name: "junk"}}
	if err := global.Client.Create(t.Context(), invalid); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, readyIs(t, invalid)(metav1.ConditionFalse, fleetv1.ReasonPackageInvalid,
		"spec.packages[0] (junk) sha256:"+junk+" is not a binary package (docs/packages.md)"))
}
