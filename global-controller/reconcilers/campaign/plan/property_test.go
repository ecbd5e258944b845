package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"pgregory.net/rapid"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// windowSets are the maintenance windows the simulated campaigns and sites draw from: none,
// ones that open often or rarely, in other time zones, and ones whose schedule never fires.
var windowSets = [][]fleetv1.MaintenanceWindow{
	nil,
	{window("0 2 * * *", 4*time.Hour, "")},
	{window("30 */3 * * *", 45*time.Minute, "")},
	{window("0 22 * * 1-5", 2*time.Hour, "America/New_York")},
	{window("0 2 30 2 *", 6*time.Hour, "")},
	{window("0 0 31 4 *", time.Hour, ""), window("0 12 * * 6", 3*time.Hour, "Asia/Kolkata")},
	{window("15 1 * * 0", 5*time.Hour, "Europe/Paris"), window("0 2 30 2 *", time.Hour, "")},
}

// simSite is a simulated target: how it answers and when it is free.
type simSite struct {
	kind      int // 0 a site to roll out to, 1 already at the release, 2 skipped (not found, no cluster)
	outcome   State
	took      time.Duration // from dispatch to the site's answer
	busyUntil time.Time     // another campaign's operation holds it until then
	windows   []fleetv1.MaintenanceWindow
	version   kubeVersion // the Kubernetes version its cluster runs (zero: not known)
	// where the simulation has it
	state      State
	answerAt   time.Time
	dispatches int
}

// kubeVersion is a Kubernetes version the simulation draws; the zero value is "not known".
type kubeVersion struct{ major, minor, patch int }

func (v kubeVersion) String() string {
	if v == (kubeVersion{}) {
		return ""
	}
	return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch)
}

// allows is the version-skew policy, written out for the simulation: a cluster on v may move
// to t when t keeps the major version, is not older and is at most one minor version ahead.
func (v kubeVersion) allows(t kubeVersion) bool {
	if v == (kubeVersion{}) {
		return true
	}
	older := t.minor < v.minor || t.minor == v.minor && t.patch < v.patch
	return t.major == v.major && !older && t.minor <= v.minor+1
}

func drawVersion(t *rapid.T, label string) kubeVersion {
	return kubeVersion{1, rapid.IntRange(33, 38).Draw(t, label+" minor"), rapid.IntRange(0, 4).Draw(t, label+" patch")}
}

// TestCampaignProperties runs random campaigns (fleets, site outcomes and durations, busy
// sites, maintenance windows including schedules that never fire, the Kubernetes versions the
// sites run and the release's, strategies, pre-cache, pauses and aborts) to their end,
// classifying each undispatched site with Classify, deciding with Decide and gating with
// Windows.Gate as the reconciler does, and checks at every step: no site is dispatched while
// the campaign's or its own windows are closed (judged minute by minute from the cron
// schedules, not by Windows.Open); no site is dispatched whose cluster the version-skew
// policy forbids to move to the release's version (judged by the simulation's own rule); the
// sites in flight never exceed the window; no site is dispatched twice; every site the policy
// refuses ends Skipped with the policy in its reason; and the campaign ends, in phase
// Succeeded only when every targeted site succeeded or already ran the release.
func TestCampaignProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 24).Draw(t, "sites")
		sites := make([]*simSite, n)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 365*24*60).Draw(t, "start minute")) * time.Minute)
		for i := range sites {
			sites[i] = &simSite{
				kind:    rapid.SampledFrom([]int{0, 0, 0, 1, 2}).Draw(t, fmt.Sprintf("site %d kind", i)),
				outcome: rapid.SampledFrom([]State{Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Failed, TimedOut}).Draw(t, fmt.Sprintf("site %d outcome", i)),
				took:    time.Duration(rapid.IntRange(1, 600).Draw(t, fmt.Sprintf("site %d minutes", i))) * time.Minute,
				windows: windowSets[rapid.IntRange(0, len(windowSets)-1).Draw(t, fmt.Sprintf("site %d windows", i))],
			}
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("site %d version known", i)) > 0 {
				sites[i].version = drawVersion(t, fmt.Sprintf("site %d version", i))
			}
			if rapid.Bool().Draw(t, fmt.Sprintf("site %d busy", i)) {
				sites[i].busyUntil = start.Add(time.Duration(rapid.IntRange(1, 3000).Draw(t, fmt.Sprintf("site %d busy minutes", i))) * time.Minute)
			}
		}
		var strategy fleetv1.CampaignStrategy
		if c := rapid.IntRange(0, 3).Draw(t, "canaries"); c > 0 {
			strategy.Canaries = ptr(intstr.FromInt(c))
		}
		strategy.InitialConcurrency = ptr(intstr.FromInt(rapid.IntRange(1, 5).Draw(t, "initial")))
		strategy.MaxConcurrency = ptr(intstr.FromInt(rapid.IntRange(1, 10).Draw(t, "max")))
		strategy.RampFactor = int32(rapid.IntRange(1, 3).Draw(t, "ramp"))
		switch rapid.IntRange(0, 2).Draw(t, "budget kind") {
		case 1:
			strategy.FailureBudget = &fleetv1.FailureBudget{MaxFailures: intstr.FromInt(rapid.IntRange(0, 5).Draw(t, "max failures"))}
		case 2:
			strategy.FailureBudget = &fleetv1.FailureBudget{
				MaxFailures: intstr.FromString(fmt.Sprintf("%d%%", rapid.IntRange(0, 100).Draw(t, "max failures %"))),
				MinFinished: int32(rapid.IntRange(1, 5).Draw(t, "min finished")),
			}
		}
		// Campaign windows that never fire are refused, so draw them less often.
		campaignWindows := windowSets[rapid.SampledFrom([]int{0, 0, 1, 2, 3, 5, 6, 4}).Draw(t, "campaign windows")]
		siteWindows := rapid.Bool().Draw(t, "patch (sites' own windows apply)")
		preCache := rapid.Bool().Draw(t, "pre-cache")
		timeout := 8 * time.Hour
		target := drawVersion(t, "release version")
		pc := Campaign{ID: "uid", Release: "r-new", Versions: map[string]string{"r-new": target.String()}}

		windows := NewWindows()
		if _, _, err := windows.Open(campaignWindows, start); err != nil {
			// The reconciler refuses such a spec (InvalidSpec) and dispatches nothing; the
			// webhook refuses it at admission. Nothing to simulate.
			if !neverFires(campaignWindows) {
				t.Fatalf("campaign windows refused: %v", err)
			}
			return
		}

		// Pauses and an abort, at steps drawn up front (-1: never).
		abortStep := -1
		if rapid.IntRange(0, 3).Draw(t, "abort") == 0 {
			abortStep = rapid.IntRange(0, 300).Draw(t, "abort step")
		}
		togglePause := map[int]bool{}
		for _, step := range rapid.SliceOfN(rapid.IntRange(0, 300), 0, 4).Draw(t, "pause toggle steps") {
			togglePause[step] = !togglePause[step]
		}

		now, stopped, paused, preCacheDone := start, NotStopped, false, false
		for step := 0; ; step++ {
			if step == 10000 {
				t.Fatalf("no end after %d steps (%s simulated)", step, now.Sub(start))
			}
			// The sites answer.
			for _, s := range sites {
				if (s.state == InProgress || s.state == PreCaching) && !now.Before(s.answerAt) {
					switch {
					case s.state == PreCaching:
						s.state = PreCached
					case s.outcome == TimedOut || s.took > timeout:
						s.state = TimedOut
					default:
						s.state = s.outcome
					}
				}
			}
			// What the reconciler reads.
			campaignOpen, campaignNext, err := windows.Open(campaignWindows, now)
			if err != nil {
				t.Fatalf("campaign windows at %s: %v", now, err)
			}
			in := Input{PreCache: preCache, PreCacheDone: preCacheDone, Paused: paused, Stopped: stopped}
			for i, s := range sites {
				site := Site{Name: fmt.Sprint(i), State: s.state}
				switch s.kind {
				case 1:
					site.State, site.Reason, site.UpToDate = Skipped, ReasonAlreadyAtRelease, true
				case 2:
					site.State, site.Reason = Skipped, ReasonNotFound
				case 0:
					if s.state == Pending {
						// Not dispatched: the reconciler classifies it from the Site.
						obj := &fleetv1.Site{ObjectMeta: metav1.ObjectMeta{Name: site.Name}}
						obj.Spec.Cluster = &fleetv1.SiteCluster{Release: "r-old"}
						obj.Status.Cluster = &fleetv1.ClusterSummary{KubernetesVersion: s.version.String()}
						c, _ := Classify(obj, pc, now)
						if c.State != Pending && c.State != Skipped {
							t.Fatalf("site %d, never dispatched, classified %s", i, c.State)
						}
						site.State, site.Reason = c.State, c.Reason
					}
				}
				site.Busy = (site.State == Pending || site.State == PreCached) && now.Before(s.busyUntil)
				var own []fleetv1.MaintenanceWindow
				if siteWindows {
					own = s.windows
				}
				windows.Gate(&site, campaignOpen, campaignNext, own, now)
				if site.State == Skipped && s.kind == 0 && !neverFires(own) && !strings.HasPrefix(site.Reason, ReasonVersionSkew) {
					t.Fatalf("site %d skipped with usable windows: %s", i, site.Reason)
				}
				in.Sites = append(in.Sites, site)
			}
			// The reconciler resolves the strategy against the sites not skipped.
			eligible := 0
			for _, site := range in.Sites {
				if site.State != Skipped {
					eligible++
				}
			}
			if in.Limits, err = Resolve(strategy, eligible); err != nil {
				t.Fatal(err)
			}
			in.Abort = abortStep >= 0 && step >= abortStep
			d := Decide(in)

			// The properties.
			for _, i := range d.Apply {
				s := sites[i]
				if !openAt(t, campaignWindows, now) {
					t.Fatalf("step %d: site %d dispatched at %s outside the campaign's windows %v", step, i, now, campaignWindows)
				}
				if siteWindows && !openAt(t, s.windows, now) {
					t.Fatalf("step %d: site %d dispatched at %s outside its windows %v", step, i, now, s.windows)
				}
				if now.Before(s.busyUntil) {
					t.Fatalf("step %d: site %d dispatched while another operation holds it", step, i)
				}
				if !s.version.allows(target) {
					t.Fatalf("step %d: site %d on %s dispatched to %s", step, i, s.version, target)
				}
				if s.dispatches++; s.dispatches > 1 {
					t.Fatalf("step %d: site %d dispatched twice", step, i)
				}
				s.state, s.answerAt = InProgress, now.Add(min(s.took, timeout))
			}
			if len(d.Apply) > 0 && d.InFlight > d.Window {
				t.Fatalf("step %d: %d sites in flight, window %d", step, d.InFlight, d.Window)
			}
			for _, i := range d.PreCache {
				if !sites[i].version.allows(target) {
					t.Fatalf("step %d: site %d on %s pre-cached for %s", step, i, sites[i].version, target)
				}
				sites[i].state, sites[i].answerAt = PreCaching, now.Add(time.Duration(1+i)*time.Minute)
			}
			if d.Done {
				for i, s := range sites {
					if r := in.Sites[i].Reason; s.kind == 0 && !s.version.allows(target) && (in.Sites[i].State != Skipped || !strings.HasPrefix(r, ReasonVersionSkew)) {
						t.Fatalf("site %d on %s, release at %s: ended %s (%q), want Skipped by the version-skew policy", i, s.version, target, in.Sites[i].State, r)
					}
				}
				phase := d.Phase(paused)
				if !phase.Final() {
					t.Fatalf("done in phase %s", phase)
				}
				if phase == fleetv1.CampaignSucceeded {
					if n == 0 {
						t.Fatal("a campaign with no target Succeeded")
					}
					for i, s := range sites {
						if s.kind == 2 || s.kind == 0 && s.state != Succeeded {
							t.Fatalf("Succeeded, but site %d (kind %d) is %s", i, s.kind, s.state)
						}
					}
				}
				return
			}
			stopped, preCacheDone = d.Stop, d.PreCacheDone
			if togglePause[step] {
				paused = !paused
			}
			if step > 300 {
				paused = false
			}
			now = now.Add(time.Duration(rapid.IntRange(1, 180).Draw(t, fmt.Sprintf("minutes after step %d", step))) * time.Minute)
		}
	})
}

// openAt tells, from the schedules alone, whether one of windows is open at now: some minute
// in (now-duration, now] matches its cron schedule. No windows: open.
func openAt(t *rapid.T, windows []fleetv1.MaintenanceWindow, now time.Time) bool {
	if len(windows) == 0 {
		return true
	}
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	for _, w := range windows {
		sched, err := parser.Parse(w.Schedule)
		if err != nil {
			t.Fatal(err)
		}
		loc := time.UTC
		if w.TimeZone != "" {
			if loc, err = time.LoadLocation(w.TimeZone); err != nil {
				t.Fatal(err)
			}
		}
		minute := now.In(loc).Truncate(time.Minute)
		for m := time.Duration(0); m < w.Duration.Duration; m += time.Minute {
			at := minute.Add(-m)
			if sched.Next(at.Add(-time.Minute)).Equal(at) {
				return true
			}
		}
	}
	return false
}

// neverFires reports whether one of windows has a schedule that names no real date.
func neverFires(windows []fleetv1.MaintenanceWindow) bool {
	for _, w := range windows {
		if w.Schedule == "0 2 30 2 *" || w.Schedule == "0 0 31 4 *" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
