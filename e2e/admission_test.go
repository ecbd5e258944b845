package e2e_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// What a user meets through kubectl when the global controller's admission webhooks are
// registered (as in every test fleet, the demo and deploy/): the controller binary serves
// them, and what cannot work is refused before it is stored, naming the field.
var _ = Describe("Admission through the global controller's webhooks", Ordered, func() {
	const ns = "admission"

	BeforeAll(func(ctx context.Context) {
		Expect(fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	// refused applies manifest with kubectl, expects a refusal naming each of want (what the
	// webhooks alone say: the schema admits these manifests), and checks that nothing named name
	// of kind obj was stored.
	refused := func(ctx context.Context, manifest string, obj client.Object, name string, want ...string) {
		GinkgoHelper()
		out, err := fleet.KubectlStdin(ctx, manifest, "apply", "-f", "-")
		Expect(err).To(HaveOccurred(), "kubectl apply admitted:\n%s\n%s", manifest, out)
		for _, w := range want {
			Expect(string(out)+err.Error()).To(ContainSubstring(w), "kubectl apply of:\n%s", manifest)
		}
		err = fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s stored after the refusal: %v", name, err)
	}
	campaign := func(name, window string) string {
		return fmt.Sprintf(`apiVersion: fleet.edgefleet.io/v1alpha1
kind: Campaign
metadata: {name: %s, namespace: %s}
spec:
  action: patch
  release: r1
  targets: {names: [a]}
  strategy:
    maintenanceWindows: [%s]
`, name, ns, window)
	}

	It("refuses a Release naming an artifact the store does not hold", func(ctx context.Context) {
		missing := strings.Repeat("ab", 32)
		refused(ctx, fmt.Sprintf(`apiVersion: fleet.edgefleet.io/v1alpha1
kind: Release
metadata: {name: missing-os, namespace: %s}
spec:
  kubernetesVersion: v1.36.3
  osImage: {sha256: %q}
`, ns, missing), &fleetv1.Release{}, "missing-os", "spec.osImage.sha256", "sha256:"+missing+" (not in the artifact store: upload it first)")
	})

	It("refuses a campaign whose maintenance window never opens, or names a time zone that does not exist", func(ctx context.Context) {
		refused(ctx, campaign("february-30", `{schedule: "0 2 30 2 *", duration: 4h}`), &fleetv1.Campaign{}, "february-30",
			"spec.strategy.maintenanceWindows[0].schedule", "never fires")
		refused(ctx, campaign("on-mars", `{schedule: "0 2 * * *", duration: 4h, timeZone: Mars/Olympus}`), &fleetv1.Campaign{}, "on-mars",
			"spec.strategy.maintenanceWindows[0].timeZone", "Mars/Olympus")
	})
})
