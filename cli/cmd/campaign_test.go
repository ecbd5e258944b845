package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// global is a real API server with the CRDs; no controller runs: the tests check what the
// commands write and how they print what a controller would have written.
var global *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Name: "global", InstallCRDs: true}, func(_ context.Context, cp *testenv.ControlPlane) error {
		global = cp
		return nil
	}))
}

// run runs the CLI with args against the test API server and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runOn(t, global, args...)
}

// runOn runs the CLI with args against cp as an admin and returns its output.
func runOn(t *testing.T, cp *testenv.ControlPlane, args ...string) (string, error) {
	t.Helper()
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--kubeconfig", path}, args...))
	err = root.ExecuteContext(t.Context())
	return out.String(), err
}

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
		Truncated: true,
	}
	if err := global.Client.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "campaign", "plan", "p", "-n", ns)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"0 (canaries)", "b,… (1 more)", "d: site has no spec.cluster"} {
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
