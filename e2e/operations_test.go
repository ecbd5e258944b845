package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// Many sites behind one site control plane, answered by a ClusterSimulator: the global
// controller pushes each site's ApplicationCluster over the real transport and follows each
// operation to its verdict, across a restart, without carrying any operation twice.
var _ = Describe("Operations dispatched to many simulated sites", Ordered, func() {
	const (
		ns    = "simulated"
		sites = 40
	)
	var (
		sim   *sitesim.ClusterSimulator
		names []string
	)
	failing := func(site string) bool { return strings.HasSuffix(site, "07") || strings.HasSuffix(site, "27") }

	BeforeAll(func(ctx context.Context) {
		sim = &sitesim.ClusterSimulator{WorkTime: time.Second, Fail: func(site, _ string) bool { return failing(site) }}
		simCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		DeferCleanup(cancel)
		Expect(sim.Start(simCtx, fleet.Sites["sim"].Config)).To(Succeed())
		var err error
		names, err = fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "store", sites, "", map[string]string{"tier": "retail"})
		Expect(err).NotTo(HaveOccurred())
		// The release's OS image is in the store, as the admission webhook requires.
		image, _ := testutil.RandomContent(64<<10, 3)
		imageFile := filepath.Join(GinkgoT().TempDir(), "retail-os.img")
		Expect(os.WriteFile(imageFile, image, 0o600)).To(Succeed())
		uploaded, err := fleet.Upload(ctx, imageFile, "os-image", "retail-os", "1.0.0")
		Expect(err).NotTo(HaveOccurred())

		release := &fleetv1.Release{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "retail-1"},
			Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: uploaded.SHA256}},
		}
		Expect(fleet.Global.Client.Create(ctx, release)).To(Succeed())
		// After the container's specs: the release, then its image, which the store keeps while
		// a release names it (409).
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(fleet.Global.Client.Delete(ctx, release))).To(Succeed())
			Eventually(func() error {
				_, err := fleet.Edgefleet(ctx, "artifact", "delete", uploaded.ID)
				return err
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		})
	})

	It("waits for a release, then carries each operation once and reports every site's verdict, across a controller restart", func(ctx context.Context) {
		By("nothing is pushed to a site that has no release yet")
		Eventually(func(g Gomega) {
			list := &fleetv1.SiteList{}
			g.Expect(fleet.Global.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(sites))
			for _, s := range list.Items {
				synced := apimeta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteClusterSyncedCondition)
				g.Expect(synced).NotTo(BeNil(), s.Name)
				g.Expect(synced.Reason).To(Equal(fleetv1.ReasonReleaseNotSet), s.Name)
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("dispatching an install to every site, the way a campaign does, then restarting the controller")
		now := metav1.Now()
		for _, name := range names {
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{
				"operation": fleetv1.SiteOperation{ID: "install-1", Campaign: "retail-install", Action: fleetv1.ActionInstall,
					Stage: fleetv1.StageApply, Release: "retail-1", DispatchTime: now},
				"cluster": map[string]any{"release": "retail-1"},
			}})
			Expect(err).NotTo(HaveOccurred())
			site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			Expect(fleet.Global.Client.Patch(ctx, site, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		Expect(fleet.StopController()).To(Succeed())
		Expect(fleet.StartController(ctx, controllerArgs...)).To(Succeed())

		By("every site reaches its verdict: the simulated failures fail with the site's reason, the others succeed")
		Eventually(func(g Gomega) {
			list := &fleetv1.SiteList{}
			g.Expect(fleet.Global.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, s := range list.Items {
				last := s.Status.LastOperation
				g.Expect(last).NotTo(BeNil(), s.Name)
				g.Expect(last.ID).To(Equal("install-1"), s.Name)
				if failing(s.Name) {
					g.Expect(last.Phase).To(Equal(fleetv1.OperationFailed), s.Name)
					g.Expect(last.Message).To(ContainSubstring("simulated host failure"), s.Name)
				} else {
					g.Expect(last.Phase).To(Equal(fleetv1.OperationSucceeded), "%s: %s", s.Name, last.Message)
					g.Expect(s.Status.Cluster).NotTo(BeNil(), s.Name)
					g.Expect(s.Status.Cluster.KubernetesVersion).To(Equal("v1.36.3"), s.Name)
				}
				g.Expect(last.CompletionTime).NotTo(BeNil(), s.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("each site took the operation in exactly once")
		dispatches := sim.Dispatches()
		Expect(dispatches).To(HaveLen(sites))
		for _, name := range names {
			Expect(dispatches[name]).To(Equal([]string{"install-1"}), name)
		}
	})
})
