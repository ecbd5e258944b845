package campaign_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/testenv"
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
		testenv.Update(t, global.Client, &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(site *fleetv1.Site) {
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
	testenv.Eventually(t, wait, func() error { return hasEvents(t, c, "Failed", fleetv1.ReasonSpecChanged) })
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
