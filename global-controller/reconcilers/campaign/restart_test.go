package campaign_test

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/sitesim"
)

// TestKillAndRestartDispatchesEverySiteOnce runs a campaign over 1,000 sites with pre-cache,
// ramp, failures and rollbacks, and stops the controller at random points (at least ten times
// while the campaign runs), starting a new one each time. Every site must be pre-cached once
// and applied once, every failed site rolled back once, none skipped; the campaign ends
// PartiallySucceeded.
func TestKillAndRestartDispatchesEverySiteOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 sites")
	}
	const n = 1000
	ns := global.Namespace(t)
	createRelease(t, ns, "r1")
	names := createSites(t, ns, n, "r0")
	fails := func(site string) bool { h := fnv.New32a(); h.Write([]byte(site)); return h.Sum32()%100 == 0 }
	sim, err := sitesim.NewFakeSiteReconciler(global.Config, sitesim.FakeSiteReconcilerOptions{
		Namespace: ns,
		Workers:   16,
		WorkTime: func(site string, _ *fleetv1.SiteOperation) time.Duration {
			h := fnv.New32a()
			h.Write([]byte(site))
			return time.Duration(100+h.Sum32()%300) * time.Millisecond
		},
		Outcome: func(site string, op *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) {
			if fails(site) && op.Stage == fleetv1.StageApply && op.Release == "r1" {
				return fleetv1.OperationFailed, "simulated failure"
			}
			return fleetv1.OperationSucceeded, ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	pct := intstr.FromString("5%")
	c := newCampaign(ns, "restart", "r1", fleetv1.CampaignStrategy{
		Canaries: count(10), InitialConcurrency: count(20), MaxConcurrency: count(60), RampFactor: 2,
		FailureBudget:     &fleetv1.FailureBudget{MaxFailures: pct, MinFinished: 50},
		SiteTimeout:       &metav1.Duration{Duration: 10 * time.Minute},
		PreCache:          true,
		RollbackOnFailure: true,
	})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	restarts := 0
	for restarts < 12 {
		stop := startController(t, controllerOptions{})
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		stop()
		phase := getCampaign(t, c).Status.Phase
		if phase.Final() {
			break
		}
		restarts++
	}
	startController(t, controllerOptions{})
	// 1% of the sites fail by design, within the 5% budget: the campaign runs to its end, and
	// says that not every site succeeded.
	got := waitPhase(t, c, fleetv1.CampaignPartiallySucceeded)
	t.Logf("%d restarts while the campaign ran; status %s, counts %+v", restarts, got.Status.Progress, got.Status.Counts)
	if restarts < 10 {
		t.Fatalf("the campaign finished after %d restarts; the test wants at least 10 while it runs", restarts)
	}
	id := string(got.UID)
	dispatches := sim.Dispatches()
	failedSites := 0
	for _, name := range names {
		want := []string{id + fleetv1.PreCacheIDSuffix, id}
		if fails(name) {
			want = append(want, id+fleetv1.RollbackIDSuffix)
			failedSites++
		}
		if ids := dispatches[name]; !slices.Equal(ids, want) {
			t.Errorf("site %s dispatched %v, want %v", name, ids, want)
		}
	}
	if int(got.Status.Counts.Succeeded) != n-failedSites || int(got.Status.Counts.Failed) != failedSites || int(got.Status.Counts.RolledBack) != failedSites {
		t.Errorf("counts %+v, want %d succeeded, %d failed and rolled back", got.Status.Counts, n-failedSites, failedSites)
	}
}
