package campaign_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const succeeded, failed = fleetv1.OperationSucceeded, fleetv1.OperationFailed

// TestCanariesGateWindowAndRamp follows a campaign step by step with sites that finish only
// when the test says so: the canaries go alone and the rest waits for every one of them; the
// window slides (a finished site frees its place) and is never exceeded; it doubles once a
// wave succeeded.
func TestCanariesGateWindowAndRamp(t *testing.T) {
	ns := global.Namespace(t)
	reg := prometheus.NewRegistry()
	startController(t, controllerOptions{registry: reg})
	sim, g := startSimulator(t, ns, true, nil)
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 10, "r0")
	c := newCampaign(ns, "ramp", "r1", fleetv1.CampaignStrategy{Canaries: count(2), InitialConcurrency: count(2), MaxConcurrency: count(4), RampFactor: 2, SiteTimeout: &metav1.Duration{Duration: time.Hour}})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	id := string(getCampaign(t, c).UID)

	waitDispatched(t, sim, id, s[0:2])
	got := waitPhase(t, c, fleetv1.CampaignRunning)
	if cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignProgressingCondition); cond == nil || cond.Reason != fleetv1.ReasonWaitingForCanaries {
		t.Errorf("Progressing %+v, want reason %s", cond, fleetv1.ReasonWaitingForCanaries)
	}
	g.finish(succeeded, s[0])
	waitDispatched(t, sim, id, s[0:2]) // one canary left: the rest still waits
	g.finish(succeeded, s[1])
	waitDispatched(t, sim, id, s[0:4]) // wave 1 (s2, s3) in a window of 2
	g.finish(succeeded, s[2])
	waitDispatched(t, sim, id, s[0:5]) // s2's place goes to s4: a sliding window, no barrier
	g.finish(succeeded, s[3], s[4])
	waitDispatched(t, sim, id, s[0:9]) // wave 1 succeeded: window 4 (s5..s8)
	got = getCampaign(t, c)
	if got.Status.Window != 4 || got.Status.Counts.InProgress != 4 {
		t.Errorf("window %d with %d in flight, want 4 and 4", got.Status.Window, got.Status.Counts.InProgress)
	}
	if n := gauge(t, reg, "edgefleet_campaign_sites", map[string]string{"campaign": "ramp", "state": "inProgress"}); n != 4 {
		t.Errorf("metric of sites in progress %v, want 4", n)
	}
	g.finish(succeeded, s...)
	got = waitPhase(t, c, fleetv1.CampaignSucceeded)
	if got.Status.Progress != "10/10" || got.Status.Counts.Succeeded != 10 || got.Status.CompletionTime == nil {
		t.Errorf("status %+v, want 10/10 succeeded with a completion time", got.Status)
	}
	testutil.Eventually(t, wait, func() error {
		if n := gauge(t, reg, "edgefleet_campaign_sites", map[string]string{"campaign": "ramp", "state": "succeeded"}); n != 10 {
			return fmt.Errorf("metric of succeeded sites %v, want 10", n)
		}
		if n := gauge(t, reg, "edgefleet_campaign_dispatches_total", map[string]string{"campaign": "ramp", "stage": "Apply"}); n != 10 {
			return fmt.Errorf("metric of apply dispatches %v, want 10", n)
		}
		return hasEvents(t, c, "Running", "Succeeded", "WaveStarted", fleetv1.ReasonWaitingForCanaries, fleetv1.ReasonRollingOut)
	})
	dispatchedOnce(t, sim)
	// The dispatch set the release and recorded the previous one.
	site := &fleetv1.Site{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: s[9]}, site); err != nil {
		t.Fatal(err)
	}
	if op := site.Spec.Operation; site.Spec.Cluster.Release != "r1" || op == nil || op.ID != id || op.PreviousRelease != "r0" || op.Deadline == nil || op.Campaign != "ramp" {
		t.Errorf("site %s: release %q, operation %+v", s[9], site.Spec.Cluster.Release, op)
	}
}

// TestFailureBudgetStopsDispatchAndRollsBack fails the first two sites (dispatched together):
// over a budget of no failure the campaign dispatches nothing new, says why, and patches the failed sites back to
// the release they ran before.
func TestFailureBudgetStopsDispatchAndRollsBack(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 8, "r0")
	sim, _ := startSimulator(t, ns, false, func(site string, op *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) {
		if (site == s[0] || site == s[1]) && !strings.HasSuffix(op.ID, fleetv1.RollbackIDSuffix) {
			return failed, "kubelet did not come back"
		}
		return succeeded, ""
	})
	c := newCampaign(ns, "budget", "r1", fleetv1.CampaignStrategy{
		MaxConcurrency:    count(2),
		FailureBudget:     &fleetv1.FailureBudget{MaxFailures: *count(0)},
		RollbackOnFailure: true,
	})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignFailed)
	id := string(got.UID)
	if d := sim.DispatchedSites(id); !slices.Equal(d, s[0:2]) {
		t.Errorf("dispatched %v, want only %v", d, s[0:2])
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignCompleteCondition)
	if cond == nil || cond.Reason != fleetv1.ReasonFailureBudgetExceeded || !strings.Contains(cond.Message, "2 of 2 finished sites failed") {
		t.Errorf("Complete %+v, want %s saying 2 of 2 failed", cond, fleetv1.ReasonFailureBudgetExceeded)
	}
	if got.Status.Counts.Failed != 2 || got.Status.Counts.RolledBack != 2 || got.Status.Counts.Pending != 6 || got.Status.Failed != 2 {
		t.Errorf("counts %+v, want 2 failed and rolled back, 6 pending", got.Status.Counts)
	}
	if len(got.Status.FailedSites) != 2 || got.Status.FailedSites[0].Name != s[0] {
		t.Errorf("failed sites %+v, want %s and %s", got.Status.FailedSites, s[0], s[1])
	}
	for _, name := range s[0:2] {
		site := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, site); err != nil {
			t.Fatal(err)
		}
		if site.Spec.Cluster.Release != "r0" || site.Spec.Operation.ID != id+fleetv1.RollbackIDSuffix || site.Spec.Operation.Release != "r0" {
			t.Errorf("site %s: release %q operation %+v, want rolled back to r0", name, site.Spec.Cluster.Release, site.Spec.Operation)
		}
		if ids := sim.Dispatches()[name]; !slices.Equal(ids, []string{id, id + fleetv1.RollbackIDSuffix}) {
			t.Errorf("site %s dispatched %v, want the apply then the rollback", name, ids)
		}
	}
}

// TestTimeoutCountsAsTimedOut lets one site hang past its deadline: it counts as timed out.
// With no failure budget that fails the campaign (a campaign whose only site timed out once
// ended Succeeded); with a budget that tolerates it, the campaign runs to its end and ends
// PartiallySucceeded, never Succeeded.
func TestTimeoutCountsAsTimedOut(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 4, "r0")
	startSimulator(t, ns, false, func(site string, _ *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) {
		if site == s[0] || site == s[2] {
			return "", "" // hangs
		}
		return succeeded, ""
	})
	timeout := &metav1.Duration{Duration: 2 * time.Second}

	only := newCampaign(ns, "only-site-times-out", "r1", fleetv1.CampaignStrategy{SiteTimeout: timeout})
	only.Spec.Targets = fleetv1.CampaignTargets{Names: []string{s[0]}}
	if err := global.Client.Create(t.Context(), only); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, only, fleetv1.CampaignFailed)
	cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignCompleteCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != fleetv1.ReasonFailureBudgetExceeded ||
		!strings.Contains(cond.Message, "default failure budget of 0") || !strings.Contains(cond.Message, "0 succeeded, 0 failed, 1 timed out") {
		t.Errorf("Complete %+v, want %s naming the default budget and 1 timed out", cond, fleetv1.ReasonFailureBudgetExceeded)
	}

	tolerated := newCampaign(ns, "timeout-tolerated", "r1", fleetv1.CampaignStrategy{
		MaxConcurrency: count(3), SiteTimeout: timeout, FailureBudget: &fleetv1.FailureBudget{MaxFailures: *count(1)},
	})
	tolerated.Spec.Targets = fleetv1.CampaignTargets{Names: s[1:]}
	if err := global.Client.Create(t.Context(), tolerated); err != nil {
		t.Fatal(err)
	}
	got = waitPhase(t, tolerated, fleetv1.CampaignPartiallySucceeded)
	if got.Status.Counts.TimedOut != 1 || got.Status.Counts.Succeeded != 2 || got.Status.Failed != 1 {
		t.Errorf("counts %+v, want 1 timed out, 2 succeeded", got.Status.Counts)
	}
	if len(got.Status.FailedSites) != 1 || got.Status.FailedSites[0].Name != s[2] || got.Status.FailedSites[0].State != "TimedOut" {
		t.Errorf("failed sites %+v, want %s TimedOut", got.Status.FailedSites, s[2])
	}
	cond = meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignCompleteCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != fleetv1.ReasonSitesNotSucceeded || cond.Message != "2 succeeded, 0 failed, 1 timed out, 0 skipped of 3" {
		t.Errorf("Complete %+v, want %s with the counts", cond, fleetv1.ReasonSitesNotSucceeded)
	}
}

// TestPauseResumeAbort pauses a campaign (nothing new goes out while paused, the site in
// flight finishes), resumes it, then aborts it.
func TestPauseResumeAbort(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, g := startSimulator(t, ns, true, nil)
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 5, "r0")
	c := newCampaign(ns, "pause", "r1", fleetv1.CampaignStrategy{MaxConcurrency: count(1), SiteTimeout: &metav1.Duration{Duration: time.Hour}})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	id := string(getCampaign(t, c).UID)
	waitDispatched(t, sim, id, s[0:1])
	update(t, c, func(c *fleetv1.Campaign) { c.Spec.Paused = true })
	waitPhase(t, c, fleetv1.CampaignPaused)
	g.finish(succeeded, s[0])
	waitDispatched(t, sim, id, s[0:1])
	update(t, c, func(c *fleetv1.Campaign) { c.Spec.Paused = false })
	waitDispatched(t, sim, id, s[0:2])
	update(t, c, func(c *fleetv1.Campaign) { c.Spec.Abort = true })
	waitPhase(t, c, fleetv1.CampaignAborting)
	g.finish(succeeded, s...)
	got := waitPhase(t, c, fleetv1.CampaignAborted)
	waitDispatched(t, sim, id, s[0:2])
	testutil.Eventually(t, wait, func() error { return hasEvents(t, c, "Paused", "Aborting", "Aborted", fleetv1.ReasonAbortRequested) })
	if got.Status.Counts.Succeeded != 2 || got.Status.Counts.Pending != 3 {
		t.Errorf("counts %+v, want 2 succeeded, 3 never dispatched", got.Status.Counts)
	}
}

// TestMaintenanceWindowDefers holds a patch of a site whose window is closed, dispatches the
// others meanwhile, and dispatches it once the window opens (on the controller's clock).
func TestMaintenanceWindowDefers(t *testing.T) {
	ns := global.Namespace(t)
	// Saturday 20 November 2027, 01:00 UTC: in the future, so the simulator's real clock never
	// sees the deadlines pass.
	clk := clocktesting.NewFakePassiveClock(time.Date(2027, 11, 20, 1, 0, 0, 0, time.UTC))
	startController(t, controllerOptions{clock: clk})
	sim, _ := startSimulator(t, ns, false, nil)
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 3, "r0")
	site := &fleetv1.Site{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: s[0]}, site); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(site.DeepCopy())
	site.Spec.MaintenanceWindows = []fleetv1.MaintenanceWindow{{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: time.Hour}}}
	if err := global.Client.Patch(t.Context(), site, patch); err != nil {
		t.Fatal(err)
	}
	c := newCampaign(ns, "window", "r1", fleetv1.CampaignStrategy{MaxConcurrency: count(3)})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	id := string(getCampaign(t, c).UID)
	waitDispatched(t, sim, id, s[1:3])
	testutil.Eventually(t, wait, func() error {
		got := getCampaign(t, c)
		cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignProgressingCondition)
		if cond == nil || cond.Reason != fleetv1.ReasonOutsideMaintenanceWindow || !strings.Contains(cond.Message, "2027-11-20T02:00:00Z") ||
			!strings.Contains(cond.Message, "spec.maintenanceWindows: 1 (first: "+s[0]+")") {
			return fmt.Errorf("Progressing %+v, want %s naming %s and 02:00", cond, fleetv1.ReasonOutsideMaintenanceWindow, s[0])
		}
		return nil
	})
	clk.SetTime(time.Date(2027, 11, 20, 2, 30, 0, 0, time.UTC))
	waitDispatched(t, sim, id, s)
	waitPhase(t, c, fleetv1.CampaignSucceeded)
}

// TestWindowsThatNeverFireHoldEverything checks that a maintenance window whose schedule names
// no real date is never taken for open (one once was: a campaign with "0 2 30 2 *" dispatched
// at once). Such windows are refused at admission (webhooks); objects admitted without the
// webhook are handled here: a site with one is skipped with the reason and never dispatched,
// a campaign with one dispatches nothing and says which field is wrong.
func TestWindowsThatNeverFireHoldEverything(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, false, nil)
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 2, "r0")
	never := []fleetv1.MaintenanceWindow{{Schedule: "0 2 30 2 *", Duration: metav1.Duration{Duration: 168 * time.Hour}}}
	controlplane.Update(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[0]}}, func(site *fleetv1.Site) {
		site.Spec.MaintenanceWindows = never
	})

	held := newCampaign(ns, "campaign-window-never-fires", "r1", fleetv1.CampaignStrategy{MaintenanceWindows: never})
	if err := global.Client.Create(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		cond := meta.FindStatusCondition(getCampaign(t, held).Status.Conditions, fleetv1.CampaignProgressingCondition)
		if cond == nil || cond.Reason != fleetv1.ReasonInvalidSpec || !strings.Contains(cond.Message, "spec.strategy.maintenanceWindows") || !strings.Contains(cond.Message, "never fires") {
			return fmt.Errorf("Progressing %+v, want %s naming spec.strategy.maintenanceWindows", cond, fleetv1.ReasonInvalidSpec)
		}
		return nil
	})
	testutil.Consistently(t, time.Second, func() error { // the time a wrong controller would take to dispatch
		if n := len(sim.Log()); n != 0 {
			return fmt.Errorf("a campaign whose window never opens dispatched %d operations: %v", n, sim.Log())
		}
		return nil
	})
	if err := global.Client.Delete(t.Context(), held); err != nil {
		t.Fatal(err)
	}

	c := newCampaign(ns, "site-window-never-fires", "r1", fleetv1.CampaignStrategy{FailureBudget: &fleetv1.FailureBudget{MaxFailures: *count(1)}})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignPartiallySucceeded)
	if d := sim.DispatchedSites(string(got.UID)); !slices.Equal(d, s[1:]) {
		t.Errorf("dispatched %v, want only %v", d, s[1:])
	}
	if len(got.Status.FailedSites) != 1 || got.Status.FailedSites[0].Name != s[0] || got.Status.FailedSites[0].State != "Skipped" ||
		!strings.Contains(got.Status.FailedSites[0].Reason, `"0 2 30 2 *": never fires`) {
		t.Errorf("failed sites %+v, want %s skipped because its window never fires", got.Status.FailedSites, s[0])
	}
}

// TestPreCacheBeforeAnyDispatch checks that every target is pre-cached before the first apply,
// and that a site whose pre-cache fails is not applied.
func TestPreCacheBeforeAnyDispatch(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 4, "r0")
	sim, _ := startSimulator(t, ns, false, func(site string, op *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) {
		if site == s[3] && op.Stage == fleetv1.StagePreCache {
			return failed, "disk full"
		}
		return succeeded, ""
	})
	c := newCampaign(ns, "precache", "r1", fleetv1.CampaignStrategy{MaxConcurrency: count(1), PreCache: true, FailureBudget: &fleetv1.FailureBudget{MaxFailures: *count(1)}})
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignPartiallySucceeded)
	id := string(got.UID)
	firstApply, lastPreCache := -1, -1
	for i, d := range sim.Log() {
		switch d.ID {
		case id:
			if firstApply < 0 {
				firstApply = i
			}
		case id + fleetv1.PreCacheIDSuffix:
			lastPreCache = i
		}
	}
	if firstApply < lastPreCache {
		t.Errorf("an apply (#%d) went out before the last pre-cache (#%d): %v", firstApply, lastPreCache, sim.Log())
	}
	if d := sim.DispatchedSites(id + fleetv1.PreCacheIDSuffix); !slices.Equal(d, s) {
		t.Errorf("pre-cached %v, want %v", d, s)
	}
	if d := sim.DispatchedSites(id); !slices.Equal(d, s[0:3]) {
		t.Errorf("applied %v, want %v (not the site whose pre-cache failed)", d, s[0:3])
	}
	if got.Status.Counts.Failed != 1 || got.Status.Counts.Succeeded != 3 || got.Status.PreCacheCompletionTime == nil {
		t.Errorf("status %+v, want 3 succeeded, 1 failed, pre-cache completed", got.Status)
	}
	dispatchedOnce(t, sim)
}

// TestBlockedByWaits holds a campaign until the campaign it is blocked by has succeeded, and
// a campaign whose sites another campaign's operation holds says so, naming it.
func TestBlockedByWaits(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, g := startSimulator(t, ns, true, nil)
	createRelease(t, ns, "r1")
	createRelease(t, ns, "r2")
	s := createSites(t, ns, 2, "r0")
	second := newCampaign(ns, "second", "r2", fleetv1.CampaignStrategy{})
	second.Spec.BlockedBy = []string{"first"}
	if err := global.Client.Create(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, second, fleetv1.CampaignBlocked)
	if cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignProgressingCondition); cond == nil || !strings.Contains(cond.Message, `"first"`) {
		t.Errorf("Progressing %+v, want it to name campaign first", cond)
	}
	first := newCampaign(ns, "first", "r1", fleetv1.CampaignStrategy{SiteTimeout: &metav1.Duration{Duration: time.Hour}})
	if err := global.Client.Create(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	firstID, secondID := string(getCampaign(t, first).UID), string(got.UID)
	waitDispatched(t, sim, firstID, s)
	waitDispatched(t, sim, secondID, nil)
	waitPhase(t, second, fleetv1.CampaignBlocked)

	// Not blocked, but its sites are busy with first's operations: it waits, and says for what.
	same := newCampaign(ns, "same-release", "r1", fleetv1.CampaignStrategy{})
	if err := global.Client.Create(t.Context(), same); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		cond := meta.FindStatusCondition(getCampaign(t, same).Status.Conditions, fleetv1.CampaignProgressingCondition)
		if cond == nil || cond.Reason != fleetv1.ReasonSitesBusy || !strings.Contains(cond.Message, "held by another campaign's operation: 2") ||
			!strings.Contains(cond.Message, `operation `+firstID+` of campaign "first"`) {
			return fmt.Errorf("Progressing %+v, want %s naming campaign first's operation", cond, fleetv1.ReasonSitesBusy)
		}
		return nil
	})
	waitDispatched(t, sim, string(getCampaign(t, same).UID), nil)
	if err := global.Client.Delete(t.Context(), same); err != nil {
		t.Fatal(err)
	}

	g.finish(succeeded, s...)
	waitPhase(t, first, fleetv1.CampaignSucceeded)
	waitDispatched(t, sim, secondID, s)
	waitPhase(t, second, fleetv1.CampaignSucceeded)
}

// TestBlockedByAFailedCampaignSaysSo checks that a campaign blocked by one that ended without
// succeeding says it will not start, and how to start it anyway.
func TestBlockedByAFailedCampaignSaysSo(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	startSimulator(t, ns, false, func(string, *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) { return failed, "disk full" })
	createRelease(t, ns, "r1")
	createRelease(t, ns, "r2")
	createSites(t, ns, 1, "r0")
	first := newCampaign(ns, "first", "r1", fleetv1.CampaignStrategy{})
	if err := global.Client.Create(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, first, fleetv1.CampaignFailed)
	second := newCampaign(ns, "second", "r2", fleetv1.CampaignStrategy{})
	second.Spec.BlockedBy = []string{"first"}
	if err := global.Client.Create(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, func() error {
		got := getCampaign(t, second)
		cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignProgressingCondition)
		if got.Status.Phase != fleetv1.CampaignBlocked || cond == nil || !strings.Contains(cond.Message, `"first" of spec.blockedBy ended Failed, not Succeeded: this campaign will not start`) {
			return fmt.Errorf("phase %s, Progressing %+v, want Blocked saying it will not start", got.Status.Phase, cond)
		}
		return nil
	})
}

// TestDryRunTouchesNothing plans a campaign without writing to any site, then runs it.
func TestDryRunTouchesNothing(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, false, nil)
	createRelease(t, ns, "r1")
	s := createSites(t, ns, 7, "r0")
	// s[5] has no cluster, s[6] already runs r1: both are skipped.
	for i, edit := range map[int]func(*fleetv1.Site){
		5: func(site *fleetv1.Site) { site.Spec.Cluster = nil },
		6: func(site *fleetv1.Site) { site.Spec.Cluster.Release = "r1" },
	} {
		controlplane.Update(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[i]}}, edit)
	}
	controlplane.UpdateStatus(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[6]}}, func(at *fleetv1.Site) {
		at.Status.LastOperation = &fleetv1.SiteOperationStatus{ID: "earlier", Release: "r1", Phase: succeeded}
	})
	before := siteVersions(t, ns)

	c := newCampaign(ns, "plan", "r1", fleetv1.CampaignStrategy{Canaries: count(1), InitialConcurrency: count(1), MaxConcurrency: count(2), RampFactor: 2})
	c.Spec.DryRun = true
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignDryRun)
	p := got.Status.Plan
	if p == nil {
		t.Fatal("no plan in status")
	}
	var waves [][]string
	for _, w := range p.Waves {
		waves = append(waves, w.Sites)
	}
	want := [][]string{{s[0]}, {s[1]}, {s[2], s[3]}, {s[4]}}
	if fmt.Sprint(waves) != fmt.Sprint(want) || !p.Waves[0].Canary {
		t.Errorf("waves %v, want %v with the first as canary", waves, want)
	}
	if len(p.Skipped) != 2 || p.Skipped[0].Reason != "site has no spec.cluster" || p.Skipped[1].Reason != "already at release" {
		t.Errorf("skipped %+v, want %s (no cluster) and %s (already at release)", p.Skipped, s[5], s[6])
	}
	testutil.Consistently(t, time.Second, func() error { // the time a wrong controller would take to write
		if after := siteVersions(t, ns); fmt.Sprint(after) != fmt.Sprint(before) {
			return fmt.Errorf("a dry run changed sites: %v → %v", before, after)
		}
		if n := len(sim.Log()); n != 0 {
			return fmt.Errorf("a dry run dispatched %d operations", n)
		}
		return nil
	})
	update(t, c, func(c *fleetv1.Campaign) { c.Spec.DryRun = false })
	// The site without a cluster was not rolled out to: not every target succeeded.
	got = waitPhase(t, c, fleetv1.CampaignPartiallySucceeded)
	if got.Status.Counts.Skipped != 2 || got.Status.Counts.Succeeded != 5 || got.Status.Progress != "7/7" || got.Status.Plan != nil {
		t.Errorf("status %+v, want 5 succeeded, 2 skipped, no plan", got.Status)
	}
	if len(got.Status.FailedSites) != 1 || got.Status.FailedSites[0].Name != s[5] {
		t.Errorf("failed sites %+v, want only %s (no cluster; %s already runs the release)", got.Status.FailedSites, s[5], s[6])
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignCompleteCondition); cond == nil || cond.Message != "5 succeeded, 1 already at the release, 0 failed, 0 timed out, 1 skipped of 7" {
		t.Errorf("Complete %+v, want the counts with the site already at the release apart", cond)
	}
}

func siteVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	list := &fleetv1.SiteList{}
	if err := global.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// TestDryRunSkipsWhatTheSkewPolicyForbids checks issue 35's anchor at the reconciler: an
// upgrade campaign to a release at v1.34.0 does not plan a site whose cluster runs v1.36.3
// (it is skipped, the reason naming the policy and the rule), while a site on v1.33.5 and one
// never installed are planned, and one on v1.32.1 too, through the v1.33 release, as the
// plan's steps say.
func TestDryRunSkipsWhatTheSkewPolicyForbids(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	rel := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-1.34"},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.34.0", OSImage: sitev1.OSImage{SHA256: fmt.Sprintf("%064x", 134)}},
	}
	if err := global.Client.Create(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
	steps := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-1.33"},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.33.9", OSImage: sitev1.OSImage{SHA256: fmt.Sprintf("%064x", 133)}},
	}
	if err := global.Client.Create(t.Context(), steps); err != nil {
		t.Fatal(err)
	}
	s := createSites(t, ns, 4, "r0")
	for i, running := range map[int]string{0: "v1.36.3", 1: "v1.33.5", 3: "v1.32.1"} {
		controlplane.UpdateStatus(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[i]}}, func(at *fleetv1.Site) {
			at.Status.Cluster = &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: running}
		})
	}
	c := newCampaign(ns, "downgrade", "edge-1.34", fleetv1.CampaignStrategy{InitialConcurrency: count(5), MaxConcurrency: count(5), RampFactor: 1})
	c.Spec.Action, c.Spec.DryRun = fleetv1.ActionUpgrade, true
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	p := waitPhase(t, c, fleetv1.CampaignDryRun).Status.Plan
	if p == nil {
		t.Fatal("no plan in status")
	}
	var planned []string
	for _, w := range p.Waves {
		planned = append(planned, w.Sites...)
	}
	if fmt.Sprint(planned) != fmt.Sprint([]string{s[1], s[2], s[3]}) {
		t.Errorf("planned %v, want %s (v1.33.5), %s (never installed) and %s (v1.32.1, through v1.33)", planned, s[1], s[2], s[3])
	}
	if want := []fleetv1.CampaignSiteSteps{{Name: s[3], Releases: []string{"edge-1.33", "edge-1.34"}}}; !reflect.DeepEqual(p.Steps, want) {
		t.Errorf("plan's steps %+v, want %+v", p.Steps, want)
	}
	if len(p.Skipped) != 1 || p.Skipped[0].Name != s[0] || !strings.HasPrefix(p.Skipped[0].Reason, "Kubernetes version-skew policy: v1.34.0 would downgrade the control plane from v1.36.3") ||
		!strings.Contains(p.Skipped[0].Reason, "no control-plane downgrade") {
		t.Errorf("skipped %+v, want %s skipped by the version-skew policy, naming the rule", p.Skipped, s[0])
	}
}

// TestUpgradeStepsThroughEachMinor runs an upgrade campaign two minor versions ahead (v1.36.3
// to v1.38.0): each site moves through the newest v1.37 release first, its next step dispatched
// only once it reports that version, and ends on the campaign's release; a site whose
// version does not move after its step fails at the step's deadline, saying so, and gets no
// further step; a site three minor versions behind with no release at v1.35 is skipped,
// naming the version missing.
func TestUpgradeStepsThroughEachMinor(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	versions := map[string]string{"r0": "v1.36.3", "edge-1.37": "v1.37.2", "edge-1.37-old": "v1.37.1", "edge-1.38": "v1.38.0"}
	for name, v := range versions {
		if name == "r0" {
			continue
		}
		rel := &fleetv1.Release{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       fleetv1.ReleaseSpec{KubernetesVersion: v, OSImage: sitev1.OSImage{SHA256: fmt.Sprintf("%064x", len(name))}},
		}
		if err := global.Client.Create(t.Context(), rel); err != nil {
			t.Fatal(err)
		}
	}
	createRelease(t, ns, "r0") // v1.36.3
	s := createSites(t, ns, 4, "r0")
	for i, running := range []string{"v1.36.3", "v1.36.3", "v1.36.3", "v1.34.0"} {
		controlplane.UpdateStatus(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[i]}}, func(at *fleetv1.Site) {
			at.Status.Cluster = &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: running}
		})
	}
	stuck := s[2] // its cluster never reports the step's version
	sim, err := sitesim.NewFakeSiteReconciler(global.Config, sitesim.FakeSiteReconcilerOptions{
		Namespace: ns,
		ClusterVersion: func(site string, op *fleetv1.SiteOperation) string {
			if site == stuck {
				return ""
			}
			return versions[op.Release]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newCampaign(ns, "two-minors", "edge-1.38", fleetv1.CampaignStrategy{
		InitialConcurrency: count(4), MaxConcurrency: count(4), RampFactor: 1,
		FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromInt(1)},
		SiteTimeout:   &metav1.Duration{Duration: 20 * time.Second},
	})
	c.Spec.Action = fleetv1.ActionUpgrade
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignPartiallySucceeded)
	id := string(got.UID)

	byRelease := map[string][]string{} // site -> "ID release" dispatched, in order
	for _, d := range sim.Log() {
		byRelease[d.Site] = append(byRelease[d.Site], d.ID+" "+d.Release)
	}
	for _, site := range s[:2] {
		if want := []string{id + "-step-1 edge-1.37", id + " edge-1.38"}; !slices.Equal(byRelease[site], want) {
			t.Errorf("site %s was dispatched %v, want %v: the newest v1.37 release, then the campaign's", site, byRelease[site], want)
		}
		obj := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: site}, obj); err != nil {
			t.Fatal(err)
		}
		if obj.Spec.Cluster.Release != "edge-1.38" || obj.Spec.Operation.PreviousRelease != "edge-1.37" {
			t.Errorf("site %s: release %s, its last operation from %q; want edge-1.38 from edge-1.37", site, obj.Spec.Cluster.Release, obj.Spec.Operation.PreviousRelease)
		}
	}
	if want := []string{id + "-step-1 edge-1.37"}; !slices.Equal(byRelease[stuck], want) {
		t.Errorf("site %s (its version never moved) was dispatched %v, want %v and nothing after", stuck, byRelease[stuck], want)
	}
	if len(byRelease[s[3]]) != 0 {
		t.Errorf("site %s (v1.34.0, no release at v1.35) was dispatched %v", s[3], byRelease[s[3]])
	}
	if got.Status.Counts.Succeeded != 2 || got.Status.Counts.Failed != 1 || got.Status.Counts.Skipped != 1 {
		t.Errorf("counts %+v, want 2 succeeded, 1 failed, 1 skipped", got.Status.Counts)
	}
	reasons := map[string]string{}
	for _, f := range got.Status.FailedSites {
		reasons[f.Name] = f.Reason
	}
	if r := reasons[stuck]; !strings.Contains(r, "step 1 (release edge-1.37) succeeded, but by its deadline the site reported its control plane at \"v1.36.3\", not at the step's version v1.37.2") {
		t.Errorf("site %s: reason %q, want the step's version not reported", stuck, r)
	}
	if r := reasons[s[3]]; !strings.Contains(r, "no Release of this namespace is at v1.35 to step through") {
		t.Errorf("site %s: reason %q, want the missing v1.35 release named", s[3], r)
	}
}
