package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func validCampaign(ns string) *fleetv1.Campaign {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	return &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patch-2026-11"},
		Spec: fleetv1.CampaignSpec{
			Action:  fleetv1.ActionPatch,
			Release: "edge-1.36.3-p1",
			Targets: fleetv1.CampaignTargets{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu-west"}},
				Exclude:  []string{"store-0001"},
			},
			Strategy: fleetv1.CampaignStrategy{
				Canaries:           pct("1%"),
				InitialConcurrency: pct("2%"),
				MaxConcurrency:     pct("20%"),
				RampFactor:         2,
				FailureBudget:      &fleetv1.FailureBudget{MaxFailures: intstr.FromString("2%"), MinFinished: 50},
				SiteTimeout:        &metav1.Duration{Duration: time.Hour},
				MaintenanceWindows: []fleetv1.MaintenanceWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: 4 * time.Hour}}},
			},
		},
	}
}

func mutateCampaign(ns string, f func(*fleetv1.Campaign)) *fleetv1.Campaign {
	c := validCampaign(ns)
	f(c)
	return c
}

// TestCampaignValidation checks the Campaign's OpenAPI and CEL rules: each invalid campaign is
// refused with an error naming the field.
func TestCampaignValidation(t *testing.T) {
	ns := global.Namespace(t)
	if err := global.Client.Create(t.Context(), validCampaign(ns)); err != nil {
		t.Fatalf("valid campaign rejected: %v", err)
	}
	str := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt(n); return &v }
	tests := []struct {
		name  string
		obj   *fleetv1.Campaign
		field string
	}{
		{"unknown action", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Action = "reboot" }), "spec.action"},
		{"no release", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Release = "" }), "spec.release"},
		{"no targets", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Targets = fleetv1.CampaignTargets{} }), "spec.targets"},
		{"canaries not a percentage", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.Canaries = str("ten") }), "spec.strategy.canaries"},
		{"canaries over 100%", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.Canaries = str("150%") }), "spec.strategy.canaries"},
		{"zero concurrency", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.MaxConcurrency = num(0) }), "spec.strategy.maxConcurrency"},
		{"0% initial concurrency", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.InitialConcurrency = str("0%") }), "spec.strategy.initialConcurrency"},
		{"ramp factor 0 stays default, 11 refused", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.RampFactor = 11 }), "spec.strategy.rampFactor"},
		{"negative failure budget", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.FailureBudget.MaxFailures = intstr.FromInt(-1) }), "spec.strategy.failureBudget.maxFailures"},
		{"failure budget minimum below 1", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.FailureBudget.MinFinished = -3 }), "spec.strategy.failureBudget.minFinished"},
		{"zero site timeout", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.SiteTimeout.Duration = 0 }), "spec.strategy.siteTimeout"},
		{"window cron of four fields", mutateCampaign(ns, func(c *fleetv1.Campaign) { c.Spec.Strategy.MaintenanceWindows[0].Schedule = "0 2 * *" }), "spec.strategy.maintenanceWindows[0].schedule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obj.Name = "invalid"
			err := global.Client.Create(t.Context(), tt.obj)
			if err == nil {
				t.Fatalf("accepted; want an error naming %s", tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error does not name %s: %v", tt.field, err)
			}
		})
	}
}

// TestCampaignFixedAtCreation checks that action, release and targets cannot change once a
// campaign is created, whatever its status says: removing status.startTime (anyone who may
// update campaigns/status can) once let the release be swapped under a running campaign. The
// error names the field and says to re-create the campaign. A dry run may still change them
// until dryRun is cleared; a campaign created without dryRun can never be made one. Pause and
// abort stay free; an abort cannot be undone.
func TestCampaignFixedAtCreation(t *testing.T) {
	ns := global.Namespace(t)
	c := validCampaign(ns)
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	refused := func(t *testing.T, c *fleetv1.Campaign, field string, mutate func(*fleetv1.Campaign)) {
		t.Helper()
		changed := c.DeepCopy()
		mutate(changed)
		err := global.Client.Update(t.Context(), changed)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("change of %s: got %v, want refused naming %s", field, err, field)
			return
		}
		want := "cannot change once the campaign is created"
		if field == "spec.dryRun" {
			want = "create a new campaign with dryRun set"
		}
		if !strings.Contains(err.Error(), want) || (field != "spec.dryRun" && !strings.Contains(err.Error(), "delete the campaign and create it again")) {
			t.Errorf("change of %s: error %q does not say %q and how to go on", field, err, want)
		}
	}
	edits := map[string]func(*fleetv1.Campaign){
		"spec.release": func(c *fleetv1.Campaign) { c.Spec.Release = "other" },
		"spec.action":  func(c *fleetv1.Campaign) { c.Spec.Action = fleetv1.ActionUpgrade },
		"spec.targets": func(c *fleetv1.Campaign) { c.Spec.Targets.Names = append(c.Spec.Targets.Names, "store-0003") },
		"spec.dryRun":  func(c *fleetv1.Campaign) { c.Spec.DryRun = true },
	}
	// Started, then the start removed from the status: still fixed.
	now := metav1.Now()
	c.Status.StartTime = &now
	c.Status.Phase = fleetv1.CampaignRunning
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatalf("set start time: %v", err)
	}
	c.Status.StartTime = nil
	c.Status.Phase = fleetv1.CampaignPending
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatalf("remove start time: %v", err)
	}
	if c.Status.StartTime != nil {
		t.Fatalf("status.startTime still %v", c.Status.StartTime)
	}
	for field, mutate := range edits {
		refused(t, c, field, mutate)
	}
	// Never started (Pending, waiting for its release): fixed too.
	p := validCampaign(ns)
	p.Name = "pending"
	if err := global.Client.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	for field, mutate := range edits {
		refused(t, p, field, mutate)
	}
	c.Spec.Paused = true
	c.Spec.Strategy.MaxConcurrency = nil
	if err := global.Client.Update(t.Context(), c); err != nil {
		t.Fatalf("pause and a strategy change refused: %v", err)
	}
	c.Spec.Abort = true
	if err := global.Client.Update(t.Context(), c); err != nil {
		t.Fatalf("abort refused: %v", err)
	}
	c.Spec.Abort = false
	if err := global.Client.Update(t.Context(), c); err == nil || !strings.Contains(err.Error(), "abort cannot be undone") {
		t.Fatalf("undoing abort: got %v, want refused", err)
	}

	// A dry run touches no site: release and targets may change while dryRun is set, and in
	// the update that clears it; after that they are fixed, and dryRun cannot come back.
	d := validCampaign(ns)
	d.Name = "dry-run"
	d.Spec.DryRun = true
	if err := global.Client.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Release = "edge-1.36.3-p2"
	d.Spec.Targets.Exclude = append(d.Spec.Targets.Exclude, "store-0002")
	if err := global.Client.Update(t.Context(), d); err != nil {
		t.Fatalf("release and targets of a dry run changed: %v", err)
	}
	d.Spec.DryRun = false
	d.Spec.Action = fleetv1.ActionInstall
	if err := global.Client.Update(t.Context(), d); err != nil {
		t.Fatalf("dryRun cleared with the action changed: %v", err)
	}
	for field, mutate := range edits {
		refused(t, d, field, mutate)
	}
}
