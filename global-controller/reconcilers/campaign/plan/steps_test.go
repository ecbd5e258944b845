package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/versionskew"
)

// TestStepsProperties draws a control plane's version, a campaign release's and the other
// releases of the namespace, and checks Steps against the simulation's own rule (allows): when
// the release is more than one minor version ahead and every minor version between has a
// release, the steps go one minor version at a time, each a move the policy allows from the
// version before, each the newest release of its minor, the campaign's release last; when a
// minor version between has none, a *NoStepError names the first; every other move is the
// policy's answer, in one step or refused.
func TestStepsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current := drawVersion(t, "current")
		target := drawVersion(t, "target")
		versions := map[string]string{"r-target": target.String()}
		byName := map[string]kubeVersion{"r-target": target}
		for i := range rapid.IntRange(0, 12).Draw(t, "releases") {
			v := drawVersion(t, fmt.Sprintf("release %d", i))
			name := fmt.Sprintf("r-%02d", rapid.IntRange(0, 20).Draw(t, fmt.Sprintf("release %d name", i)))
			versions[name], byName[name] = v.String(), v
		}
		steps, err := Steps(current.String(), "r-target", versions)

		if current.allows(target) {
			if err != nil || !slices.Equal(steps, []string{"r-target"}) {
				t.Fatalf("%s to %s: steps %v, %v; want the release alone", current, target, steps, err)
			}
			return
		}
		if target.minor <= current.minor+1 || target.major != current.major {
			// A downgrade: no steps help.
			var skew *versionskew.Error
			if !errors.As(err, &skew) || skew.Rule == versionskew.OneMinorPerStep {
				t.Fatalf("%s to %s: steps %v, %v; want the policy's refusal", current, target, steps, err)
			}
			return
		}
		missing := -1
		for minor := current.minor + 1; minor < target.minor && missing < 0; minor++ {
			found := false
			for _, v := range byName {
				found = found || v.minor == minor
			}
			if !found {
				missing = minor
			}
		}
		if missing >= 0 {
			var noStep *NoStepError
			if !errors.As(err, &noStep) || int(noStep.Minor) != missing || !strings.Contains(err.Error(), fmt.Sprintf("no Release of this namespace is at v1.%d", missing)) {
				t.Fatalf("%s to %s, no release at minor %d: steps %v, %v; want a *NoStepError naming it", current, target, missing, steps, err)
			}
			return
		}
		if err != nil || len(steps) != target.minor-current.minor || steps[len(steps)-1] != "r-target" {
			t.Fatalf("%s to %s: steps %v, %v; want %d steps ending with r-target", current, target, steps, err, target.minor-current.minor)
		}
		at := current
		for i, name := range steps {
			v := byName[name]
			if !at.allows(v) || v.minor != at.minor+1 {
				t.Fatalf("step %d of %v: %s (%s) from %s is not one minor version up", i+1, steps, name, v, at)
			}
			if name != "r-target" {
				for other, ov := range byName {
					if ov.minor == v.minor && (v.less(ov) || ov == v && other < name) {
						t.Fatalf("step %d: %s (%s), but %s (%s) is the newest of its minor", i+1, name, v, other, ov)
					}
				}
			}
			at = v
		}
	})
}

func (v kubeVersion) less(o kubeVersion) bool {
	return v.minor < o.minor || v.minor == o.minor && v.patch < o.patch
}

// TestClassifyWalksTheSteps moves a site through random steps as the reconciler sees it: a
// Pending site gets its first step; each step that succeeded, once the site reports the step's
// version, gives the next one, numbered on, the campaign's release last (the apply); a step
// that succeeded while the site still reports the version before waits until the step's
// deadline, then fails saying so; and a failed step fails the site, naming the step.
func TestClassifyWalksTheSteps(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	deadline := metav1.NewTime(now.Add(time.Hour))
	versions := map[string]string{"r37": "v1.37.2", "r37-old": "v1.37.1", "r38": "v1.38.0", "r39": "v1.39.4"}
	c := Campaign{ID: "uid", Release: "r39", Versions: versions}
	site := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	site.Spec.Cluster = &fleetv1.SiteCluster{Release: "r36"}
	site.Status.Cluster = &fleetv1.ClusterSummary{KubernetesVersion: "v1.36.3"}

	s, _ := Classify(site, c, now)
	if s.State != Pending || !slices.Equal(s.Steps, []string{"r37", "r38", "r39"}) || s.Step != 1 {
		t.Fatalf("pending: %s, steps %v from %d; want Pending, r37 r38 r39 from 1", s.State, s.Steps, s.Step)
	}
	for n, step := range []struct{ release, reached string }{{"r37", "v1.37.2"}, {"r38", "v1.38.0"}} {
		op := &fleetv1.SiteOperation{ID: c.StepID(n + 1), Release: step.release, Target: "r39", Deadline: &deadline}
		site.Spec.Operation = op
		site.Status.LastOperation = &fleetv1.SiteOperationStatus{ID: op.ID, Phase: fleetv1.OperationSucceeded}
		// Not reported yet: wait, then fail at the deadline.
		if s, recheck := Classify(site, c, now); s.State != InProgress || s.NextStep() || !recheck.Equal(deadline.Time) {
			t.Fatalf("step %d succeeded, version not reported: %s (next step %v, recheck %v); want InProgress, waiting until the deadline", n+1, s.State, s.NextStep(), recheck)
		}
		if s, _ := Classify(site, c, deadline.Time); s.State != Failed || !strings.Contains(s.Reason, fmt.Sprintf("step %d (release %s) succeeded, but by its deadline the site reported its control plane at", n+1, step.release)) {
			t.Fatalf("step %d past its deadline: %s %q; want Failed, saying the version did not move", n+1, s.State, s.Reason)
		}
		site.Status.Cluster.KubernetesVersion = step.reached
		s, _ := Classify(site, c, now)
		if !s.NextStep() || s.Step != n+2 || s.Steps[0] != []string{"r38", "r39"}[n] {
			t.Fatalf("after step %d: %s, steps %v from %d", n+1, s.State, s.Steps, s.Step)
		}
	}
	site.Spec.Operation = &fleetv1.SiteOperation{ID: c.StepID(2), Release: "r38", Target: "r39", PreviousRelease: "r37", Deadline: &deadline}
	site.Status.LastOperation = &fleetv1.SiteOperationStatus{ID: c.StepID(2), Phase: fleetv1.OperationFailed, Message: "kubelet did not come back"}
	site.Status.Cluster.KubernetesVersion = "v1.37.2"
	if s, _ := Classify(site, c, now); s.State != Failed || s.Reason != "step 2 (release r38): kubelet did not come back" || s.PreviousRelease != "r37" {
		t.Fatalf("failed step: %s %q from %q", s.State, s.Reason, s.PreviousRelease)
	}
	if got := c.StepOf(c.StepID(12)); got != 12 {
		t.Errorf("StepOf(StepID(12)) = %d", got)
	}
	for _, id := range []string{"uid", "uid-rollback", "uid-step-", "uid-step-0", "uid-step-x", "other-step-1"} {
		if got := c.StepOf(id); got != 0 {
			t.Errorf("StepOf(%q) = %d, want 0", id, got)
		}
	}
}

// TestDecideStepsAndStops checks what Decide does with sites between steps: their next step
// goes at once, beside the window (they are in flight already), unless a maintenance window
// holds them or the campaign is paused; once stopped, they get no next step and the campaign
// ends without waiting for them.
func TestDecideStepsAndStops(t *testing.T) {
	between := Site{Name: "a", State: InProgress, Steps: []string{"r39"}, Step: 3}
	running := Site{Name: "b", State: InProgress}
	pending := Site{Name: "c", State: Pending}
	limits := Limits{Initial: 2, Max: 2, Factor: 1}
	d := Decide(Input{Sites: []Site{between, running, pending}, Limits: limits})
	if !slices.Equal(d.Step, []int{0}) || len(d.Apply) != 0 || d.Counts.BetweenSteps != 1 || d.Counts.InProgress != 2 {
		t.Fatalf("step %v, apply %v, counts %+v; want site a's next step, nothing applied (the window of 2 is full)", d.Step, d.Apply, d.Counts)
	}
	held := between
	held.OutsideWindow = true
	if d := Decide(Input{Sites: []Site{held}, Limits: limits}); len(d.Step) != 0 || !d.HeldByWindows {
		t.Fatalf("outside its window: step %v, held %v", d.Step, d.HeldByWindows)
	}
	if d := Decide(Input{Sites: []Site{between}, Limits: limits, Paused: true}); len(d.Step) != 0 || d.Done {
		t.Fatalf("paused: step %v, done %v", d.Step, d.Done)
	}
	d = Decide(Input{Sites: []Site{between, {Name: "d", State: Failed}}, Limits: limits, Abort: true})
	if len(d.Step) != 0 || !d.Done || d.Verdict() != StoppedEarly {
		t.Fatalf("aborted: step %v, done %v, verdict %v; want no step, done, stopped early", d.Step, d.Done, d.Verdict())
	}
	if d := Decide(Input{Sites: []Site{between, running}, Limits: limits, Abort: true}); d.Done {
		t.Fatal("aborted with a site's operation running: done, want waiting for it")
	}
}
