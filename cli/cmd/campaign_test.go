package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func TestCampaignCreatePauseResumeAbort(t *testing.T) {
	ns := global.Namespace(t)
	if out, err := run(t, "campaign", "create", "patch-11", "-n", ns, "--action", "patch", "--release", "r1",
		"--selector", "region=eu-west", "--exclude", "lab-1", "--canaries", "1%", "--max-concurrency", "20%", "--initial-concurrency", "5",
		"--ramp", "2", "--max-failures", "2%", "--min-finished", "20", "--site-timeout", "90m", "--soak", "10m",
		"--window", "0 2 * * 6/4h", "--pre-cache", "--rollback", "--blocked-by", "patch-10", "--dry-run"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	c := &fleetv1.Campaign{}
	key := types.NamespacedName{Namespace: ns, Name: "patch-11"}
	if err := global.Client.Get(t.Context(), key, c); err != nil {
		t.Fatal(err)
	}
	st := c.Spec.Strategy
	switch {
	case c.Spec.Action != fleetv1.ActionPatch || c.Spec.Release != "r1" || !c.Spec.DryRun:
		t.Errorf("spec %+v", c.Spec)
	case c.Spec.Targets.Selector.MatchLabels["region"] != "eu-west" || c.Spec.Targets.Exclude[0] != "lab-1":
		t.Errorf("targets %+v", c.Spec.Targets)
	case st.Canaries.String() != "1%" || st.MaxConcurrency.String() != "20%" || st.InitialConcurrency.IntValue() != 5 || st.RampFactor != 2:
		t.Errorf("pace %+v", st)
	case st.FailureBudget == nil || st.FailureBudget.MaxFailures.String() != "2%" || st.FailureBudget.MinFinished != 20:
		t.Errorf("budget %+v", st.FailureBudget)
	case st.SiteTimeout.Minutes() != 90 || st.Soak.Minutes() != 10 || !st.PreCache || !st.RollbackOnFailure:
		t.Errorf("strategy %+v", st)
	case len(st.MaintenanceWindows) != 1 || st.MaintenanceWindows[0].Schedule != "0 2 * * 6" || st.MaintenanceWindows[0].Duration.Hours() != 4:
		t.Errorf("windows %+v", st.MaintenanceWindows)
	case len(c.Spec.BlockedBy) != 1 || c.Spec.BlockedBy[0] != "patch-10":
		t.Errorf("blockedBy %v", c.Spec.BlockedBy)
	}
	for _, step := range []struct {
		verb  string
		check func(*fleetv1.Campaign) bool
	}{
		{"pause", func(c *fleetv1.Campaign) bool { return c.Spec.Paused }},
		{"resume", func(c *fleetv1.Campaign) bool { return !c.Spec.Paused }},
		{"abort", func(c *fleetv1.Campaign) bool { return c.Spec.Abort }},
	} {
		if out, err := run(t, "campaign", step.verb, "patch-11", "-n", ns); err != nil {
			t.Fatalf("%s: %v\n%s", step.verb, err, out)
		}
		if err := global.Client.Get(t.Context(), key, c); err != nil {
			t.Fatal(err)
		}
		if !step.check(c) {
			t.Errorf("after %s: spec %+v", step.verb, c.Spec)
		}
	}
	if out, err := run(t, "campaign", "create", "bad", "-n", ns, "--action", "reboot", "--release", "r1", "--sites", "a"); err == nil || !strings.Contains(err.Error(), "spec.action") {
		t.Errorf("create with a bad action: %v\n%s", err, out)
	}
}

// TestCampaignPlanAndWatchPrintTheStatus prints a plan and a finished campaign's progress from
// a status written here as the controller would.
func TestCampaignPlanAndWatchPrintTheStatus(t *testing.T) {
	ns := global.Namespace(t)
	if out, err := run(t, "campaign", "create", "p", "-n", ns, "--action", "upgrade", "--release", "r2", "--sites", "a,b,c,d", "--dry-run"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	c := &fleetv1.Campaign{}
	if err := global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "p"}, c); err != nil {
		t.Fatal(err)
	}
	c.Status.Phase = fleetv1.CampaignDryRun
	c.Status.Counts.Skipped = 1
	c.Status.Plan = &fleetv1.CampaignPlan{
		Waves: []fleetv1.CampaignWave{
			{Index: 0, Canary: true, Size: 1, Window: 1, Sites: []string{"a"}},
			{Index: 1, Size: 2, Window: 2, Sites: []string{"b"}},
		},
		Skipped:   []fleetv1.CampaignSiteResult{{Name: "d", State: "Skipped", Reason: "site has no spec.cluster"}},
		Steps:     []fleetv1.CampaignSiteSteps{{Name: "a", Releases: []string{"r1", "r2"}}},
		Truncated: true,
	}
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "campaign", "plan", "p", "-n", ns)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"0 (canaries)", "b,… (1 more)", "d: site has no spec.cluster", "a: r1 → r2"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	c.Status = fleetv1.CampaignStatus{Phase: fleetv1.CampaignFailed, Total: 4, Progress: "4/4", Counts: fleetv1.CampaignCounts{Succeeded: 2, Failed: 2},
		Conditions: []metav1.Condition{{Type: fleetv1.CampaignProgressingCondition, Status: metav1.ConditionFalse, Reason: fleetv1.ReasonFailureBudgetExceeded, Message: "2 of 4 finished sites failed", LastTransitionTime: metav1.Now()}}}
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "campaign", "watch", "p", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("watch of a failed campaign: %v", err)
	}
	for _, want := range []string{"phase Failed", "succeeded    [####################....................] 2/4", "FailureBudgetExceeded: 2 of 4 finished sites failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("watch output lacks %q:\n%s", want, out)
		}
	}
}

// TestCampaignWait follows campaigns through --wait: the status a controller would write is
// written here, while the command waits.
func TestCampaignWait(t *testing.T) {
	ns := global.Namespace(t)
	kubeconfig := adminKubeconfig(t)
	key := types.NamespacedName{Namespace: ns, Name: "w"}
	// setStatus writes the campaign's status once its generation reached gen.
	setStatus := func(gen int64, status func(*fleetv1.Campaign)) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			c := &fleetv1.Campaign{}
			if err := global.Client.Get(t.Context(), key, c); err != nil {
				return err
			}
			if c.Generation < gen {
				return fmt.Errorf("generation %d, waiting for %d", c.Generation, gen)
			}
			status(c)
			return global.Client.Status().Update(t.Context(), c)
		})
	}

	// A dry run: --wait prints the plan once it is written.
	out := &syncBuffer{}
	done := start(t, out, "--kubeconfig", kubeconfig, "campaign", "create", "w", "-n", ns, "--action", "install", "--release", "r1",
		"--sites", "a,b", "--dry-run", "--wait", "--timeout", "60s")
	setStatus(1, func(c *fleetv1.Campaign) {
		c.Status.Phase = fleetv1.CampaignDryRun
		c.Status.Plan = &fleetv1.CampaignPlan{Waves: []fleetv1.CampaignWave{{Index: 0, Size: 2, Window: 2, Sites: []string{"a", "b"}}}}
		c.Status.ObservedGeneration = c.Generation
	})
	if err := <-done; err != nil || len(lines(out.String(), "0", "2", "a,b")) != 1 {
		t.Errorf("create --dry-run --wait: %v\n%s", err, out)
	}

	// pause --wait returns once the controller reconciled the paused spec, showing progress.
	out = &syncBuffer{}
	done = start(t, out, "--kubeconfig", kubeconfig, "campaign", "pause", "w", "-n", ns, "--wait", "--timeout", "60s")
	setStatus(2, func(c *fleetv1.Campaign) {
		c.Status.Phase = fleetv1.CampaignPaused
		c.Status.Conditions = []metav1.Condition{{Type: fleetv1.CampaignProgressingCondition, Status: metav1.ConditionFalse, Reason: fleetv1.ReasonPaused,
			Message: "spec.paused is set: nothing new is dispatched, 0 sites in flight", LastTransitionTime: metav1.Now()}}
		c.Status.ObservedGeneration = c.Generation
	})
	if err := <-done; err != nil || len(lines(out.String(), "phase Paused")) != 1 || len(lines(out.String(), "Paused: spec.paused is set")) != 1 {
		t.Errorf("pause --wait: %v\n%s", err, out)
	}

	// resume --wait gives up when nothing reconciles it, naming the campaign and its last state.
	o, err := run(t, "campaign", "resume", "w", "-n", ns, "--wait", "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "timed out after 2s waiting for campaign "+ns+"/w; last seen: w  install → r1  phase Paused") {
		t.Errorf("resume --wait with nothing reconciling it: %v\n%s", err, o)
	}

	// abort --wait returns once the campaign ended.
	out = &syncBuffer{}
	done = start(t, out, "--kubeconfig", kubeconfig, "campaign", "abort", "w", "-n", ns, "--wait", "--timeout", "60s")
	setStatus(4, func(c *fleetv1.Campaign) { c.Status.Phase = fleetv1.CampaignAborted })
	if err := <-done; err != nil || len(lines(out.String(), "phase Aborted")) != 1 {
		t.Errorf("abort --wait: %v\n%s", err, out)
	}

	if o, err := run(t, "campaign", "pause", "nope", "-n", ns); err == nil || err.Error() != `campaign "nope" not found in namespace "`+ns+`"` {
		t.Errorf("pause of a campaign that does not exist: %v\n%s", err, o)
	}
}

// TestCampaignVerbsSayWhenNothingChanged: a pause of a paused campaign says nothing changed
// rather than "pause requested", and a verb on a campaign that ended is refused, the campaign
// left as it was.
func TestCampaignVerbsSayWhenNothingChanged(t *testing.T) {
	ns := global.Namespace(t)
	if out, err := run(t, "campaign", "create", "n", "-n", ns, "--action", "install", "--release", "r1", "--sites", "a"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	out, err := run(t, "campaign", "pause", "n", "-n", ns)
	if err != nil || !strings.Contains(out, "campaign "+ns+"/n: pause requested") {
		t.Fatalf("first pause: %v\n%s", err, out)
	}
	out, err = run(t, "campaign", "pause", "n", "-n", ns)
	if err != nil || strings.Contains(out, "requested") || !strings.Contains(out, "campaign "+ns+"/n is paused already: nothing changed") {
		t.Errorf("second pause: %v\n%s", err, out)
	}

	c := &fleetv1.Campaign{}
	key := types.NamespacedName{Namespace: ns, Name: "n"}
	if err := global.Client.Get(t.Context(), key, c); err != nil {
		t.Fatal(err)
	}
	c.Status.Phase = fleetv1.CampaignSucceeded
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"abort", "resume"} {
		out, err = run(t, "campaign", verb, "n", "-n", ns)
		if err == nil || err.Error() != "campaign "+ns+"/n ended (phase Succeeded): nothing to "+verb || strings.Contains(out, "requested") {
			t.Errorf("%s of a campaign that succeeded: %v\n%s", verb, err, out)
		}
	}
	if err := global.Client.Get(t.Context(), key, c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Abort || !c.Spec.Paused {
		t.Errorf("the ended campaign changed: spec %+v", c.Spec)
	}
}
