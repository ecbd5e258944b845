package realhosts_test

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// Campaigns over two sites whose clusters are built on real hosts (needs root): a campaign's
// work at each site is the push of its release, the site's provisioning through Metal3 and
// Cluster-API, and the BPA's install or patch over SSH. An install campaign brings both
// clusters up; a patch campaign then rolls a new kubelet package, canary first.
var _ = Describe("Campaigns over sites on real hosts", Ordered, ContinueOnFailure, func() {
	const ns = "campaigns"
	names := []string{"site-e", "site-f"}
	var (
		sites  []*realSite
		digest = map[string]string{} // of uploaded artifacts, by name
	)

	site := func(ctx context.Context, name string) *fleetv1.Site {
		GinkgoHelper()
		s := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		return s
	}

	BeforeAll(func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		vault := testvault.StartVault(GinkgoTB())
		for _, name := range names {
			hn := testhosts.NewHosts(GinkgoTB(), 1, testhosts.HostOptions{Names: []string{name + "-cp-0"}})
			sites = append(sites, startRealSite(ctx, name, ns, hn, 1, 0, vault, map[string]string{"ring": "e2e"}))
		}
		uploadBase(ctx, dir, builders.KubernetesVersion, digest)
		digest["kubelet 1.36.3-2"] = uploadPackage(ctx, builders.BuildPackage(GinkgoTB(), "kubelet", "1.36.3-2", nil))
		createRelease(ctx, ns, "edge-1", builders.KubernetesVersion, digest, stackWith()...)
		createRelease(ctx, ns, "edge-1-p1", builders.KubernetesVersion, digest, stackWith("kubelet 1.36.3-2")...)
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			for _, name := range names {
				AddReportEntry(name+" logs", fleet.LocalController(name).Log+" "+filepath.Join(fleet.Dir, name+"-bpa.log"))
			}
		}
	})

	skipAfterFailedBed()

	It("installs the release on every site with an install campaign, the artifacts cached at each site first", Label(bedLabel), func(ctx context.Context) {
		out := runCampaign(ctx, ns, "install-edge-1", "--action", "install", "--release", "edge-1", "--selector", "ring=e2e",
			"--max-concurrency", "2", "--pre-cache")
		Expect(out).To(ContainSubstring("phase Succeeded"))
		for i, name := range names {
			s := site(ctx, name)
			Expect(s.Spec.Cluster.Release).To(Equal("edge-1"))
			Expect(s.Status.LastOperation).NotTo(BeNil(), name)
			Expect(s.Status.LastOperation.Campaign).To(Equal("install-edge-1"), name)
			Expect(s.Status.LastOperation.Phase).To(Equal(fleetv1.OperationSucceeded), "%s: %s", name, s.Status.LastOperation.Message)
			Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 1, Total: 1}), name)
			Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil(), name)
			Expect(s.Status.Cluster.Bootstrap.Phase).To(Equal(sitev1.BootstrapInstalled), name)
			Expect(s.Status.Cluster.Bootstrap.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "kubelet", Version: "1.36.3", SHA256: digest["kubelet"]}), name)
			Expect(installed(ctx, sites[i].hosts.Hosts[0], "kubelet")).To(Equal("1.36.3 1.36.3"), name)
			// A cluster of one control-plane host runs its workloads there: not tainted.
			Eventually(func(g Gomega) {
				g.Expect(sites[i].bootstrap(g, ctx).Message).To(HaveSuffix("2 charts deployed, their pods 5/5 ready"))
			}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), name)
		}
		// Each site pre-cached the release before the apply was dispatched to it.
		events, err := fleet.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "reason=OperationPreCached",
			"-o", "jsonpath={.items[*].involvedObject.name}")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(string(events))).To(ConsistOf(names))
	})

	It("patches the kubelet on every site with a patch campaign, the canary first", func(ctx context.Context) {
		out := runCampaign(ctx, ns, "patch-edge-1-p1", "--action", "patch", "--release", "edge-1-p1", "--sites", strings.Join(names, ","),
			"--canaries", "1", "--max-concurrency", "2")
		Expect(out).To(ContainSubstring("phase Succeeded"))
		for i, name := range names {
			s := site(ctx, name)
			Expect(s.Spec.Cluster.Release).To(Equal("edge-1-p1"))
			Expect(s.Status.LastOperation.Campaign).To(Equal("patch-edge-1-p1"), name)
			Expect(s.Status.LastOperation.Phase).To(Equal(fleetv1.OperationSucceeded), "%s: %s", name, s.Status.LastOperation.Message)
			// The verdict came from the BPA's report of the patch, not from a cluster that was
			// Ready all along: the package is on the host.
			Expect(s.Status.Cluster.Bootstrap.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "kubelet", Version: "1.36.3-2", SHA256: digest["kubelet 1.36.3-2"]}), name)
			Expect(installed(ctx, sites[i].hosts.Hosts[0], "kubelet")).To(Equal("1.36.3-2 1.36.3-2"), name)
		}
		// The second site was dispatched only once the canary had succeeded.
		canary, rest := site(ctx, names[0]), site(ctx, names[1])
		Expect(rest.Spec.Operation.DispatchTime.Time).NotTo(BeTemporally("<", canary.Status.LastOperation.CompletionTime.Time))
	})
})
