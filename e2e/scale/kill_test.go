package scale_test

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/sitesim"
)

// A patch campaign over 1,000 sites — the real global controller binary pushing to simulated
// sites over the real transport — while the controller is killed with SIGKILL at random moments,
// at least ten times: the campaign finishes, and every site took each of its operations in
// exactly once (the simulator records what each site's ApplicationCluster was asked to carry).
var _ = Describe("A campaign across SIGKILLs of the global controller", Ordered, func() {
	const (
		ns    = "killed"
		sites = 1000
	)
	var (
		sim   *sitesim.ClusterSimulator
		names []string
	)
	// About 1% of the sites fail the patch and are rolled back; never a canary (the first 1%,
	// by name), which would stop the campaign.
	failing := func(site string) bool {
		h := fnv.New32a()
		h.Write([]byte(site))
		return site >= "store-00100" && h.Sum32()%100 == 0
	}

	BeforeAll(func(ctx context.Context) {
		Expect(fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(fleet.CreateSimulatedReleases(ctx, ns, map[string]string{"r0": "v1.36.2", "r1": "v1.36.3"})).To(Succeed())
		sim = &sitesim.ClusterSimulator{
			WorkTime: 2 * time.Second,
			Fail:     func(site, op string) bool { return failing(site) && !strings.HasSuffix(op, fleetv1.RollbackIDSuffix) },
		}
		simCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		DeferCleanup(cancel)
		Expect(sim.Start(simCtx, fleet.Sites["sim"].Config)).To(Succeed())
		var err error
		names, err = fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "store", sites, "r0", map[string]string{"fleet": "killed"})
		Expect(err).NotTo(HaveOccurred())
		By("every site has release r0 pushed")
		Eventually(func(g Gomega) {
			list := &fleetv1.SiteList{}
			g.Expect(fleet.Global.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			synced := 0
			for _, s := range list.Items {
				if apimeta.IsStatusConditionTrue(s.Status.Conditions, fleetv1.SiteClusterSyncedCondition) {
					synced++
				}
			}
			g.Expect(synced).To(Equal(sites))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("finishes, with every site dispatched exactly once", func(ctx context.Context) {
		pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
		camp := &fleetv1.Campaign{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patch-under-fire"},
			Spec: fleetv1.CampaignSpec{
				Action:  fleetv1.ActionPatch,
				Release: "r1",
				Targets: fleetv1.CampaignTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "killed"}}},
				Strategy: fleetv1.CampaignStrategy{
					Canaries: pct("1%"), InitialConcurrency: pct("2%"), MaxConcurrency: pct("10%"), RampFactor: 2,
					FailureBudget:     &fleetv1.FailureBudget{MaxFailures: intstr.FromString("5%"), MinFinished: 50},
					SiteTimeout:       &metav1.Duration{Duration: time.Hour},
					RollbackOnFailure: true,
				},
			},
		}
		Expect(fleet.Global.Client.Create(ctx, camp)).To(Succeed())
		status := func() fleetv1.CampaignStatus {
			got := &fleetv1.Campaign{}
			Expect(fleet.Global.Client.Get(ctx, client.ObjectKeyFromObject(camp), got)).To(Succeed())
			return got.Status
		}
		By("killing the controller at random moments while the campaign runs")
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 7))
		kills := 0
		for kills < 12 {
			time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
			if status().Phase.Final() {
				break
			}
			Expect(fleet.KillController()).To(Succeed())
			kills++
			Expect(fleet.StartController(ctx, controllerArgs...)).To(Succeed())
		}
		GinkgoWriter.Printf("killed the controller %d times while the campaign ran\n", kills)
		Expect(kills).To(BeNumerically(">=", 10), "the campaign finished before the tenth kill: %+v", status())

		By("the campaign runs to its end within its failure budget: PartiallySucceeded, since some sites fail by design")
		got := &fleetv1.Campaign{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKeyFromObject(camp), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(fleetv1.CampaignPartiallySucceeded), got.Status.Progress)
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		By("each site took its operations in exactly once: the patch, and the rollback where it failed")
		id := string(got.UID)
		dispatches := sim.Dispatches()
		failed := 0
		for _, name := range names {
			want := []string{id}
			if failing(name) {
				want = append(want, id+fleetv1.RollbackIDSuffix)
				failed++
			}
			Expect(slices.Equal(dispatches[name], want)).To(BeTrue(), "site %s took %v, want %v", name, dispatches[name], want)
		}
		Expect(int(got.Status.Counts.Failed)).To(Equal(failed))
		Expect(int(got.Status.Counts.Succeeded)).To(Equal(sites - failed))
		Expect(int(got.Status.Counts.RolledBack)).To(Equal(failed))
	})
})
