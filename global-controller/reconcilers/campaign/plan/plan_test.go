package plan

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// tolerant is a failure budget the tables here never trip.
const tolerant = 1000

func ios(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		strategy fleetv1.CampaignStrategy
		eligible int
		want     Limits
	}{
		{"defaults", fleetv1.CampaignStrategy{}, 100, Limits{Initial: 10, Max: 10, Factor: 1, MinFinished: 1}},
		{"campaign-10k", fleetv1.CampaignStrategy{
			Canaries: ios("1%"), InitialConcurrency: ios("200"), MaxConcurrency: ios("2000"), RampFactor: 2,
			FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromString("2%"), MinFinished: 100},
		}, 10000, Limits{Canaries: 100, Initial: 200, Max: 2000, Factor: 2, MaxFailuresPercent: 2, FailuresPercent: true, MinFinished: 100, Budget: true}},
		{"percentages round up, windows at least 1", fleetv1.CampaignStrategy{Canaries: ios("1%"), MaxConcurrency: ios("1%")}, 50,
			Limits{Canaries: 1, Initial: 1, Max: 1, Factor: 1, MinFinished: 1}},
		{"initial capped at max", fleetv1.CampaignStrategy{InitialConcurrency: ios("50"), MaxConcurrency: ios("5")}, 100,
			Limits{Initial: 5, Max: 5, Factor: 1, MinFinished: 1}},
		{"count budget", fleetv1.CampaignStrategy{FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromInt(3)}}, 100,
			Limits{Initial: 10, Max: 10, Factor: 1, MaxFailures: 3, MinFinished: 1, Budget: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.strategy, tt.eligible)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWaves(t *testing.T) {
	sizes := func(ws []Wave) []int {
		var s []int
		for _, w := range ws {
			s = append(s, w.Size())
		}
		return s
	}
	tests := []struct {
		name string
		n    int
		l    Limits
		want []int
	}{
		{"campaign-10k: 1% canaries, 200 doubling up to 2000", 10000, Limits{Canaries: 100, Initial: 200, Max: 2000, Factor: 2}, []int{100, 200, 400, 800, 1600, 2000, 2000, 2000, 900}},
		{"no canaries, no ramp", 25, Limits{Initial: 10, Max: 10, Factor: 1}, []int{10, 10, 5}},
		{"more canaries than sites", 3, Limits{Canaries: 5, Initial: 1, Max: 1, Factor: 1}, []int{3}},
		{"nothing", 0, Limits{Canaries: 1, Initial: 1, Max: 1, Factor: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := Waves(tt.n, tt.l)
			if got := sizes(ws); !slices.Equal(got, tt.want) {
				t.Fatalf("sizes %v, want %v", got, tt.want)
			}
			if len(ws) > 0 && ws[len(ws)-1].End != tt.n {
				t.Fatalf("waves end at %d, want %d", ws[len(ws)-1].End, tt.n)
			}
		})
	}
}

// sites builds targets from a string of state letters: . pending, c pre-caching, C pre-cached,
// i in progress, s succeeded, f failed, t timed out, k skipped, b busy (pending), w outside its
// window (pending), r failed with a previous release, R rolling back.
func sites(states string) []Site {
	var out []Site
	for i, c := range states {
		s := Site{Name: string(rune('a' + i))}
		switch c {
		case '.':
		case 'c':
			s.State = PreCaching
		case 'C':
			s.State = PreCached
		case 'i':
			s.State = InProgress
		case 's':
			s.State = Succeeded
		case 'f':
			s.State = Failed
		case 't':
			s.State = TimedOut
		case 'k':
			s.State = Skipped
		case 'b':
			s.Busy = true
		case 'w':
			s.OutsideWindow = true
		case 'r':
			s.State, s.PreviousRelease = Failed, "old"
		case 'R':
			s.State, s.PreviousRelease, s.Rollback = Failed, "old", RollingBack
		}
		out = append(out, s)
	}
	return out
}

func TestDecide(t *testing.T) {
	// 2 canaries, then windows of 2, 4, 4...
	ramp := Limits{Canaries: 2, Initial: 2, Max: 4, Factor: 2, MaxFailures: tolerant, MinFinished: 1}
	flat := Limits{Initial: 3, Max: 3, Factor: 1, MaxFailures: tolerant, MinFinished: 1}
	budget := func(n, minFinished int) Limits { l := flat; l.MaxFailures, l.MinFinished = n, minFinished; return l }
	pct := flat
	pct.FailuresPercent, pct.MaxFailuresPercent, pct.MinFinished = true, 20, 5
	tests := []struct {
		name         string
		in           Input
		apply        []int
		preCache     []int
		rollback     []int
		window       int
		stop         Stop
		done         bool
		waitCanaries bool
	}{
		{name: "canaries go first, all at once", in: Input{Sites: sites(".........."), Limits: ramp}, apply: []int{0, 1}, window: 2, waitCanaries: true},
		{name: "the rest waits for every canary", in: Input{Sites: sites("si........"), Limits: ramp}, window: 2, waitCanaries: true},
		{name: "canaries succeeded: first wave in its window", in: Input{Sites: sites("ss........"), Limits: ramp}, apply: []int{2, 3}, window: 2},
		{name: "sliding window: a finished site frees its place", in: Input{Sites: sites("sssi......"), Limits: ramp}, apply: []int{4}, window: 2},
		{name: "ramp: the window doubles after a wave succeeded", in: Input{Sites: sites("ssss......"), Limits: ramp}, apply: []int{4, 5, 6, 7}, window: 4},
		{name: "a wave with a failure stops the ramp", in: Input{Sites: sites("ssfs......"), Limits: ramp}, apply: []int{4, 5}, window: 2},
		{name: "window never exceeded", in: Input{Sites: sites("iii......."), Limits: flat}, window: 3},
		{name: "canary failed stops the campaign", in: Input{Sites: sites("fi........"), Limits: ramp}, window: 2, stop: CanaryFailed, waitCanaries: true},
		{name: "canary failed, done once nothing is in flight", in: Input{Sites: sites("fs........"), Limits: ramp}, window: 2, stop: CanaryFailed, done: true, waitCanaries: true},
		{name: "budget holds at its count", in: Input{Sites: sites("fs....."), Limits: budget(1, 1)}, apply: []int{2, 3, 4}, window: 3},
		{name: "budget exceeded", in: Input{Sites: sites("fti...."), Limits: budget(1, 1)}, window: 3, stop: BudgetExceeded},
		{name: "budget waits for its minimum of finished sites", in: Input{Sites: sites("ft....."), Limits: budget(1, 3)}, apply: []int{2, 3, 4}, window: 3},
		{name: "percentage budget: 1 of 5 is 20%, holds", in: Input{Sites: sites("fssss...."), Limits: pct}, apply: []int{5, 6, 7}, window: 3},
		{name: "percentage budget: 2 of 5 is 40%, trips", in: Input{Sites: sites("ffsss...."), Limits: pct}, window: 3, stop: BudgetExceeded, done: true},
		{name: "stopped stays stopped", in: Input{Sites: sites("sssss"), Limits: flat, Stopped: BudgetExceeded}, window: 3, stop: BudgetExceeded, done: true},
		{name: "paused dispatches nothing", in: Input{Sites: sites("s...."), Limits: flat, Paused: true}, window: 3},
		{name: "abort: nothing new, done when drained", in: Input{Sites: sites("is..."), Limits: flat, Abort: true}, window: 3, stop: Aborted},
		{name: "abort drained", in: Input{Sites: sites("ss..."), Limits: flat, Abort: true}, window: 3, stop: Aborted, done: true},
		{name: "outside window: held, the next goes", in: Input{Sites: sites("w...."), Limits: flat}, apply: []int{1, 2, 3}, window: 3},
		{name: "busy sites wait", in: Input{Sites: sites("bb..."), Limits: flat}, apply: []int{2, 3, 4}, window: 3},
		{name: "skipped sites take no place", in: Input{Sites: sites("kk...."), Limits: flat}, apply: []int{2, 3, 4}, window: 3},
		{name: "all skipped is done", in: Input{Sites: sites("kkk"), Limits: flat}, done: true},
		{name: "pre-cache everything first", in: Input{Sites: sites("..b.k"), Limits: flat, PreCache: true}, preCache: []int{0, 1, 3}},
		{name: "pre-cache waits for the last", in: Input{Sites: sites("CCc.k"), Limits: flat, PreCache: true}, preCache: []int{3}},
		{name: "pre-cached: apply begins", in: Input{Sites: sites("CCfCk"), Limits: flat, PreCache: true}, apply: []int{0, 1, 3}, window: 3},
		{name: "pre-cache recorded done", in: Input{Sites: sites("iC.C"), Limits: flat, PreCache: true, PreCacheDone: true}, apply: []int{1, 2}, window: 3},
		{name: "rollback failed sites with a previous release", in: Input{Sites: sites("rfs"), Limits: flat, Rollback: true}, rollback: []int{0}, window: 3},
		{name: "done only once rollbacks finished", in: Input{Sites: sites("Rss"), Limits: flat, Rollback: true}, window: 3},
		{name: "all finished", in: Input{Sites: sites("sskf"), Limits: flat}, window: 3, done: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.in)
			if !slices.Equal(d.Apply, tt.apply) {
				t.Errorf("apply %v, want %v", d.Apply, tt.apply)
			}
			if !slices.Equal(d.PreCache, tt.preCache) {
				t.Errorf("pre-cache %v, want %v", d.PreCache, tt.preCache)
			}
			if !slices.Equal(d.Rollback, tt.rollback) {
				t.Errorf("rollback %v, want %v", d.Rollback, tt.rollback)
			}
			if d.Window != tt.window {
				t.Errorf("window %d, want %d", d.Window, tt.window)
			}
			if d.Stop != tt.stop {
				t.Errorf("stop %v, want %v", d.Stop, tt.stop)
			}
			if d.Done != tt.done {
				t.Errorf("done %v, want %v", d.Done, tt.done)
			}
			if d.WaitingForCanaries != tt.waitCanaries {
				t.Errorf("waiting for canaries %v, want %v", d.WaitingForCanaries, tt.waitCanaries)
			}
			if d.InFlight > max(d.Window, d.Counts.InProgress) {
				t.Errorf("%d in flight for a window of %d", d.InFlight, d.Window)
			}
		})
	}
}

// TestDecideNeverDispatchesTwice runs a campaign to the end by applying each decision to the
// sites (every site succeeds at once) and checks that each site is dispatched exactly once and
// that the window is never exceeded.
func TestDecideNeverDispatchesTwice(t *testing.T) {
	l := Limits{Canaries: 3, Initial: 5, Max: 40, Factor: 3, MaxFailures: tolerant, MinFinished: 1}
	ss := sites(strings.Repeat(".", 250))
	dispatched := make([]int, len(ss))
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatal("no end after 1000 rounds")
		}
		d := Decide(Input{Sites: ss, Limits: l})
		if d.InFlight > d.Window {
			t.Fatalf("round %d: %d in flight, window %d", round, d.InFlight, d.Window)
		}
		if d.Done {
			break
		}
		for i := range ss {
			if ss[i].State == InProgress {
				ss[i].State = Succeeded
			}
		}
		for _, i := range d.Apply {
			dispatched[i]++
			ss[i].State = InProgress
		}
	}
	for i, n := range dispatched {
		if n != 1 {
			t.Fatalf("site %d dispatched %d times", i, n)
		}
	}
}

// TestVerdictAndPhase checks that only a campaign each of whose targets succeeded (or already
// ran the release) ends Succeeded, and what the other ends are called.
func TestVerdictAndPhase(t *testing.T) {
	flat := Limits{Initial: 3, Max: 3, Factor: 1, MinFinished: 1}
	tolerate := flat
	tolerate.MaxFailures = tolerant
	upToDate := func(states string) []Site {
		ss := sites(states)
		for i := range ss {
			if ss[i].State == Skipped {
				ss[i].UpToDate = true
			}
		}
		return ss
	}
	tests := []struct {
		name    string
		in      Input
		verdict Verdict
		phase   fleetv1.CampaignPhase
	}{
		{"every site succeeded", Input{Sites: sites("sss"), Limits: flat}, AllSucceeded, fleetv1.CampaignSucceeded},
		{"succeeded or already at the release", Input{Sites: upToDate("sks"), Limits: flat}, AllSucceeded, fleetv1.CampaignSucceeded},
		{"all already at the release", Input{Sites: upToDate("kk"), Limits: flat}, AllSucceeded, fleetv1.CampaignSucceeded},
		{"the only site timed out, default budget", Input{Sites: sites("t"), Limits: flat}, StoppedEarly, fleetv1.CampaignFailed},
		{"the only site timed out, failures tolerated", Input{Sites: sites("t"), Limits: tolerate}, NoneSucceeded, fleetv1.CampaignFailed},
		{"one failed within the budget", Input{Sites: sites("sfs"), Limits: tolerate}, PartlySucceeded, fleetv1.CampaignPartiallySucceeded},
		{"one skipped (not found, no cluster)", Input{Sites: sites("ssk"), Limits: flat}, PartlySucceeded, fleetv1.CampaignPartiallySucceeded},
		{"all skipped", Input{Sites: sites("kk"), Limits: flat}, NoneSucceeded, fleetv1.CampaignFailed},
		{"no targets", Input{Limits: flat}, NoneSucceeded, fleetv1.CampaignFailed},
		{"aborted", Input{Sites: sites("ss."), Limits: flat, Abort: true}, StoppedEarly, fleetv1.CampaignAborted},
		{"aborting", Input{Sites: sites("si."), Limits: flat, Abort: true}, Unfinished, fleetv1.CampaignAborting},
		{"running", Input{Sites: sites("si."), Limits: flat}, Unfinished, fleetv1.CampaignRunning},
		{"paused", Input{Sites: sites("si."), Limits: flat, Paused: true}, Unfinished, fleetv1.CampaignPaused},
		{"pre-caching", Input{Sites: sites("c.."), Limits: flat, PreCache: true}, Unfinished, fleetv1.CampaignPreCaching},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.in)
			if v := d.Verdict(); v != tt.verdict {
				t.Errorf("verdict %v, want %v", v, tt.verdict)
			}
			if p := d.Phase(tt.in.Paused); p != tt.phase {
				t.Errorf("phase %s, want %s", p, tt.phase)
			}
		})
	}
}
