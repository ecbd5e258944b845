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
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func digest(c byte) string { return strings.Repeat(string(c), 64) }

// TestReleaseReadyOnceEveryArtifactIsStored checks that a release whose package is missing is
// not Ready and names the digest, becomes Ready once the artifact is uploaded, and that the
// artifact store's reference check names the release for each of its digests and no other.
func TestReleaseReadyOnceEveryArtifactIsStored(t *testing.T) {
	ns := global.Namespace(t)
	os, pkg, chart, image := digest('a'), digest('b'), digest('c'), digest('e')
	store.add(os)
	store.add(chart)
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
	ready := func(status metav1.ConditionStatus, reason, contains string) func() error {
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
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, "sha256:"+pkg))
	store.add(pkg)
	testutil.Eventually(t, 30*time.Second, ready(metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, "sha256:"+image))
	store.add(image)
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
