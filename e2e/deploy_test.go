package e2e_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The global controller's kustomize base", func() {
	It("is accepted by a real API server (server-side dry run)", func(ctx context.Context) {
		out, err := fleet.Kubectl(ctx, "apply", "-k", "deploy/global-controller", "--dry-run=server")
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range []string{
			"customresourcedefinition.apiextensions.k8s.io/sites.fleet.edgefleet.io",
			"customresourcedefinition.apiextensions.k8s.io/hosts.fleet.edgefleet.io",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-global-controller",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-fleet-admin",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-fleet-viewer",
			"deployment.apps/edgefleet-global-controller",
			"persistentvolumeclaim/edgefleet-data",
		} {
			Expect(string(out)).To(ContainSubstring(obj))
		}
	})
})
