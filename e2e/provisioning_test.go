package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

var _ = Describe("Site provisioning from the global inventory", Ordered, func() {
	const site = "site-c"
	var (
		siteC   client.Client
		imageID string
	)

	BeforeAll(func(ctx context.Context) {
		Expect(fleet.StartSiteProvisioning(ctx, site)).To(Succeed())
		_, err := fleet.StartLocalController(ctx, site)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error { return fleet.StopLocalController(site) })
		scheme, err := setup.Scheme()
		Expect(err).NotTo(HaveOccurred())
		siteC, err = client.New(fleet.Sites[site].Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		// The OS image goes into the artifact store; the site caches it by its digest.
		data, digest := testenv.RandomContent(1<<20+3, 7)
		file := filepath.Join(GinkgoT().TempDir(), "edge-os.img")
		Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
		out, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", "os-image", "--name", "edge-os", "--version", "1.0.0", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var a restv1.Artifact
		Expect(json.Unmarshal(out, &a)).To(Succeed(), string(out))
		imageID = a.ID
		DeferCleanup(func(ctx context.Context) error {
			_, err := fleet.Edgefleet(ctx, "artifact", "delete", imageID)
			return err
		})

		Expect(fleet.Apply(ctx, "e2e/testdata/site-c.yaml")).To(Succeed())
		// The global controller gives the site its own token for the artifact API at this URL.
		patch := fmt.Sprintf(`{"spec":{"artifactAPIURL":%q,"cluster":{"kubernetesVersion":"v1.36.3","osImage":{"sha256":%q},`+
			`"network":{"podCIDRs":["10.244.0.0/16"],"serviceCIDRs":["10.96.0.0/12"],"controlPlaneEndpoint":{"host":"192.0.2.30"}}}}}`, fleet.APIURL, digest)
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", "provisioning", "--type", "merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			AddReportEntry(site+" local controller log", fleet.LocalController(site).Log)
		}
	})

	It("survives a crash of the local controller in the middle of provisioning", func(ctx context.Context) {
		// Wait until machines exist and some host is on its way, then kill the controller.
		Eventually(func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(siteC.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
			g.Expect(len(machines.Items)).To(BeNumerically(">=", 3))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		ac := &sitev1.ApplicationCluster{}
		Expect(siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site}, ac)).To(Succeed())
		Expect(ac.Status.Phase).NotTo(Equal(sitev1.ClusterProvisioned), "the kill must come before the end")
		Expect(fleet.KillLocalController(site)).To(Succeed())
		_, err := fleet.StartLocalController(ctx, site)
		Expect(err).NotTo(HaveOccurred())
	})

	It("provisions 3 control-plane and 2 worker hosts, and the global Site shows the summary", func(ctx context.Context) {
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "provisioning", Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Phase).To(Equal(sitev1.ClusterProvisioned), "site says: %s %s", s.Status.Cluster.Message, s.Status.Cluster.LastError)
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 3, Total: 3}))
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: 2, Total: 2}))
			g.Expect(s.Status.Cluster.KubernetesVersion).To(Equal("v1.36.3"))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// Nothing duplicated by the crash: one Machine and one claim per host.
		machines := &clusterv1.MachineList{}
		Expect(siteC.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
		Expect(machines.Items).To(HaveLen(5))
		bmhs := &metal3api.BareMetalHostList{}
		Expect(siteC.List(ctx, bmhs, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
		Expect(bmhs.Items).To(HaveLen(5))
		consumers := map[string]string{}
		for _, b := range bmhs.Items {
			Expect(b.Status.Provisioning.State).To(Equal(metal3api.StateProvisioned), b.Name)
			Expect(b.Spec.ConsumerRef).NotTo(BeNil(), b.Name)
			Expect(consumers).NotTo(HaveKey(b.Spec.ConsumerRef.Name), "two hosts claimed by one machine")
			consumers[b.Spec.ConsumerRef.Name] = b.Name
		}
		nodes := &corev1.NodeList{}
		Expect(fleet.Applications[site].Client.List(ctx, nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveLen(5))

		// Each global Host shows its state at the site.
		hosts := &fleetv1.HostList{}
		Expect(fleet.Global.Client.List(ctx, hosts, client.InNamespace("provisioning"))).To(Succeed())
		Expect(hosts.Items).To(HaveLen(5))
		for _, h := range hosts.Items {
			Expect(h.Status.Cluster).NotTo(BeNil(), h.Name)
			Expect(h.Status.Cluster.ProvisioningState).To(Equal("provisioned"), h.Name)
			Expect(h.Status.Cluster.Ready).To(BeTrue(), h.Name)
		}
	})
})
