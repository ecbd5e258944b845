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

// TestCampaignImmutableOnceStarted checks that action, release and targets can change before
// the campaign starts but not after, and that an abort cannot be undone.
func TestCampaignImmutableOnceStarted(t *testing.T) {
	ns := global.Namespace(t)
	c := validCampaign(ns)
	if err := global.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Targets.Exclude = append(c.Spec.Targets.Exclude, "store-0002")
	if err := global.Client.Update(t.Context(), c); err != nil {
		t.Fatalf("targets changed before the start refused: %v", err)
	}
	now := metav1.Now()
	c.Status.StartTime = &now
	c.Status.Phase = fleetv1.CampaignRunning
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatalf("set start time: %v", err)
	}
	for name, mutate := range map[string]func(*fleetv1.Campaign){
		"release": func(c *fleetv1.Campaign) { c.Spec.Release = "other" },
		"action":  func(c *fleetv1.Campaign) { c.Spec.Action = fleetv1.ActionUpgrade },
		"targets": func(c *fleetv1.Campaign) { c.Spec.Targets.Names = []string{"store-0003"} },
		"dryRun":  func(c *fleetv1.Campaign) { c.Spec.DryRun = true },
	} {
		changed := c.DeepCopy()
		mutate(changed)
		if err := global.Client.Update(t.Context(), changed); err == nil || !strings.Contains(err.Error(), "cannot change once the campaign started") {
			t.Errorf("change of %s after the start: got %v, want refused", name, err)
		}
	}
	c.Spec.Paused = true
	if err := global.Client.Update(t.Context(), c); err != nil {
		t.Fatalf("pause refused: %v", err)
	}
	c.Spec.Abort = true
	if err := global.Client.Update(t.Context(), c); err != nil {
		t.Fatalf("abort refused: %v", err)
	}
	c.Spec.Abort = false
	if err := global.Client.Update(t.Context(), c); err == nil || !strings.Contains(err.Error(), "abort cannot be undone") {
		t.Fatalf("undoing abort: got %v, want refused", err)
	}
}
