package campaign_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestDispatchedReleaseDiffersFromSpec puts the campaign in the state a swapped release left:
// two sites carry the campaign's apply of release r1 (as its dispatch writes it) while its
// spec says r2. The API server now refuses the swap itself, so the test writes the two
// operations by hand on a paused campaign, then resumes it. The campaign must end Failed with
// a reason naming both releases and what to do, with an event, dispatch nothing more (the
// window would let a third site go), and leave the two sites as they are: no rollback,
// although rollbackOnFailure is set. Today's controller counted the two as r2's and
// dispatched r2 to the next site.
func TestDispatchedReleaseDiffersFromSpec(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, true, nil)
	createRelease(t, ns, "r1")
	createRelease(t, ns, "r2")
	s := createSites(t, ns, 5, "r0")
	c := newCampaign(ns, "swapped", "r2", fleetv1.CampaignStrategy{MaxConcurrency: count(3), SiteTimeout: &metav1.Duration{Duration: time.Hour}, RollbackOnFailure: true})
	c.Spec.Paused = true
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	id := string(getCampaign(t, c).UID)
	now := metav1.Now()
	deadline := metav1.NewTime(now.Add(time.Hour))
	for _, name := range s[0:2] {
		controlplane.Update(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(site *fleetv1.Site) {
			site.Spec.Cluster.Release = "r1"
			site.Spec.Operation = &fleetv1.SiteOperation{ID: id, Campaign: c.Name, Action: fleetv1.ActionPatch, Stage: fleetv1.StageApply,
				Release: "r1", PreviousRelease: "r0", DispatchTime: now, Deadline: &deadline}
		})
	}
	update(t, c, func(c *fleetv1.Campaign) { c.Spec.Paused = false })

	got := waitPhase(t, c, fleetv1.CampaignFailed)
	for _, typ := range []string{fleetv1.CampaignProgressingCondition, fleetv1.CampaignCompleteCondition} {
		cond := meta.FindStatusCondition(got.Status.Conditions, typ)
		if cond == nil || cond.Reason != fleetv1.ReasonSpecChanged || !strings.Contains(cond.Message, `spec.release is "r2" but this campaign dispatched release "r1"`) ||
			!strings.Contains(cond.Message, `create a new Campaign to roll out "r2"`) || !strings.Contains(cond.Message, "keep their operation") {
			t.Errorf("%s %+v, want %s naming r2 and r1 and what to do", typ, cond, fleetv1.ReasonSpecChanged)
		}
	}
	if got.Status.CompletionTime == nil {
		t.Errorf("no completion time in %+v", got.Status)
	}
	waitDispatched(t, sim, id, s[0:2])
	waitDispatched(t, sim, id+fleetv1.RollbackIDSuffix, nil)
	testutil.Eventually(t, wait, func() error { return hasEvents(t, c, "Failed", fleetv1.ReasonSpecChanged) })
	for i, name := range s {
		site := &fleetv1.Site{}
		if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, site); err != nil {
			t.Fatal(err)
		}
		op := site.Spec.Operation
		switch {
		case i < 2 && (site.Spec.Cluster.Release != "r1" || op == nil || op.ID != id || op.Release != "r1"):
			t.Errorf("site %s: release %q, operation %+v; want left at the campaign's r1 apply", name, site.Spec.Cluster.Release, op)
		case i >= 2 && (site.Spec.Cluster.Release != "r0" || op != nil):
			t.Errorf("site %s: release %q, operation %+v; want untouched", name, site.Spec.Cluster.Release, op)
		}
	}
}

// TestAbortBeforeStartEndsAborted aborts a campaign waiting for its release and one waiting
// for the campaign it is blocked by: both end Aborted at once (they stayed Pending and
// Blocked), and never start when what they waited for comes.
func TestAbortBeforeStartEndsAborted(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, false, nil)
	createSites(t, ns, 2, "r0")
	createRelease(t, ns, "r2")
	waiting := newCampaign(ns, "waits-for-release", "r1", fleetv1.CampaignStrategy{})
	blocked := newCampaign(ns, "waits-for-first", "r2", fleetv1.CampaignStrategy{})
	blocked.Spec.BlockedBy = []string{"first"}
	for _, c := range []*fleetv1.Campaign{waiting, blocked} {
		if err := global.Client.Create(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	waitPhase(t, waiting, fleetv1.CampaignPending)
	waitPhase(t, blocked, fleetv1.CampaignBlocked)
	for _, c := range []*fleetv1.Campaign{waiting, blocked} {
		update(t, c, func(c *fleetv1.Campaign) { c.Spec.Abort = true })
		got := waitPhase(t, c, fleetv1.CampaignAborted)
		cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1.CampaignCompleteCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != fleetv1.ReasonAbortRequested || !strings.Contains(cond.Message, "no site was dispatched") {
			t.Errorf("%s: Complete %+v, want True %s saying no site was dispatched", c.Name, cond, fleetv1.ReasonAbortRequested)
		}
		if got.Status.CompletionTime == nil || got.Status.StartTime != nil {
			t.Errorf("%s: status %+v, want a completion time and no start time", c.Name, got.Status)
		}
	}
	testutil.Eventually(t, wait, func() error { return hasEvents(t, waiting, "Aborted", fleetv1.ReasonAbortRequested) })
	// What they waited for comes: the release, and the blocking campaign succeeds. They stay
	// Aborted and dispatch nothing.
	createRelease(t, ns, "r1")
	first := newCampaign(ns, "first", "r1", fleetv1.CampaignStrategy{})
	if err := global.Client.Create(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, first, fleetv1.CampaignSucceeded)
	for _, c := range []*fleetv1.Campaign{waiting, blocked} {
		got := getCampaign(t, c)
		waitDispatched(t, sim, string(got.UID), nil)
		if got = getCampaign(t, c); got.Status.Phase != fleetv1.CampaignAborted {
			t.Errorf("%s went from Aborted to %s", c.Name, got.Status.Phase)
		}
	}
}

// TestInvalidSpecBeforeStartEndsFailed checks that a campaign refused for an invalid spec
// before its first dispatch ends Failed with the reason naming the field (it sat Pending as if
// it waited for its release), and that it stays so.
func TestInvalidSpecBeforeStartEndsFailed(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, false, nil)
	createRelease(t, ns, "r1")
	createSites(t, ns, 2, "r0")
	c := newCampaign(ns, "bad-selector", "r1", fleetv1.CampaignStrategy{})
	// The API server takes any operator string; the controller cannot use it.
	c.Spec.Targets.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Near", Values: []string{"store"}}}}
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, c, fleetv1.CampaignFailed)
	for _, typ := range []string{fleetv1.CampaignProgressingCondition, fleetv1.CampaignCompleteCondition} {
		cond := meta.FindStatusCondition(got.Status.Conditions, typ)
		if cond == nil || cond.Reason != fleetv1.ReasonInvalidSpec || !strings.Contains(cond.Message, "spec.targets.selector") ||
			!strings.Contains(cond.Message, "create it again with the field fixed") {
			t.Errorf("%s %+v, want %s naming spec.targets.selector and what to do", typ, cond, fleetv1.ReasonInvalidSpec)
		}
	}
	testutil.Eventually(t, wait, func() error { return hasEvents(t, c, "Failed", fleetv1.ReasonInvalidSpec) })
	staysUndispatched(t, sim, c, fleetv1.CampaignFailed, "an invalid campaign")
}

// TestReleaseNeverReadyEndsFailed gives two campaigns a release that is not Ready, as the
// release controller says it: one whose packages conflict (it never will be: its spec and the
// content it names cannot change) and one whose artifacts are missing (they may be uploaded).
// The first campaign ends Failed at once with a reason and a message that say why and what to
// do, and dispatches nothing; the second waits, Pending.
func TestReleaseNeverReadyEndsFailed(t *testing.T) {
	ns := global.Namespace(t)
	startController(t, controllerOptions{})
	sim, _ := startSimulator(t, ns, false, nil)
	createSites(t, ns, 2, "r0")
	for name, reason := range map[string]string{"conflicting": fleetv1.ReasonPackagesConflict, "incomplete": fleetv1.ReasonArtifactsMissing} {
		createRelease(t, ns, name)
		rel := &fleetv1.Release{}
		key := types.NamespacedName{Namespace: ns, Name: name}
		testutil.Eventually(t, wait, func() error { // the release controller's first verdict, then its own
			if err := global.Client.Get(t.Context(), key, rel); err != nil {
				return err
			}
			if meta.FindStatusCondition(rel.Status.Conditions, fleetv1.ReleaseReadyCondition) == nil {
				return fmt.Errorf("release %s not checked yet", name)
			}
			return nil
		})
		meta.SetStatusCondition(&rel.Status.Conditions, metav1.Condition{Type: fleetv1.ReleaseReadyCondition, Status: metav1.ConditionFalse,
			ObservedGeneration: rel.Generation, Reason: reason, Message: "package kubelet and package kubelet-old both install kubelet"})
		if err := global.Client.Status().Update(t.Context(), rel); err != nil {
			t.Fatal(err)
		}
	}
	never := newCampaign(ns, "never", "conflicting", fleetv1.CampaignStrategy{})
	later := newCampaign(ns, "later", "incomplete", fleetv1.CampaignStrategy{})
	for _, c := range []*fleetv1.Campaign{never, later} {
		if err := global.Client.Create(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	got := waitPhase(t, never, fleetv1.CampaignFailed)
	for _, typ := range []string{fleetv1.CampaignProgressingCondition, fleetv1.CampaignCompleteCondition} {
		cond := meta.FindStatusCondition(got.Status.Conditions, typ)
		if cond == nil || cond.Reason != fleetv1.ReasonReleaseInvalid || !strings.Contains(cond.Message, `Release "conflicting" will never be Ready`) ||
			!strings.Contains(cond.Message, "both install kubelet") || !strings.Contains(cond.Message, "create a Release that fixes it") {
			t.Errorf("%s %+v, want %s naming the release, why and what to do", typ, cond, fleetv1.ReasonReleaseInvalid)
		}
	}
	if got.Status.CompletionTime == nil || got.Status.StartTime != nil {
		t.Errorf("status %+v, want a completion time and no start time", got.Status)
	}
	testutil.Eventually(t, wait, func() error { return hasEvents(t, never, "Failed", fleetv1.ReasonReleaseInvalid) })
	waitPhase(t, later, fleetv1.CampaignPending)
	staysUndispatched(t, sim, later, fleetv1.CampaignPending, "campaigns of releases not Ready")
	if p := getCampaign(t, never).Status.Phase; p != fleetv1.CampaignFailed {
		t.Errorf("the campaign of a release never to be Ready went from Failed to %s", p)
	}
}
