package plan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// Defaults of the strategy. Without a failure budget the first site that fails or times out
// stops new dispatches: a campaign tolerates failures only when told how many.
const (
	DefaultMaxConcurrency = 10
	DefaultMinFinished    = 1
	DefaultMaxFailures    = 0
)

// Limits are the strategy's numbers, resolved against the number of eligible (not skipped)
// targets.
type Limits struct {
	// Canaries go first, all at once.
	Canaries int
	// Initial is the window of the first wave after the canaries.
	Initial int
	// Max caps the window.
	Max int
	// Factor multiplies the window after each wave that succeeded.
	Factor int
	// MaxFailures, or MaxFailuresPercent of the finished sites when FailuresPercent is set,
	// may fail before the budget trips.
	MaxFailures        int
	MaxFailuresPercent int
	FailuresPercent    bool
	// MinFinished sites must have finished before the budget can trip.
	MinFinished int
	// Budget is set when the strategy gives a failure budget (DefaultMaxFailures otherwise).
	Budget bool
}

// Resolve turns the strategy's counts and percentages into Limits for eligible targets.
// Percentages round up, and a window is at least 1.
func Resolve(s fleetv1.CampaignStrategy, eligible int) (Limits, error) {
	scaled := func(field string, v *intstr.IntOrString, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, eligible, true)
		if err != nil {
			return 0, fmt.Errorf("spec.strategy.%s: %w", field, err)
		}
		return n, nil
	}
	l := Limits{Factor: 1, MaxFailures: DefaultMaxFailures, MinFinished: DefaultMinFinished}
	var err error
	if l.Canaries, err = scaled("canaries", s.Canaries, 0); err != nil {
		return Limits{}, err
	}
	if l.Max, err = scaled("maxConcurrency", s.MaxConcurrency, DefaultMaxConcurrency); err != nil {
		return Limits{}, err
	}
	l.Max = max(l.Max, 1)
	if l.Initial, err = scaled("initialConcurrency", s.InitialConcurrency, l.Max); err != nil {
		return Limits{}, err
	}
	l.Initial = min(max(l.Initial, 1), l.Max)
	if s.RampFactor > 1 {
		l.Factor = int(s.RampFactor)
	}
	if b := s.FailureBudget; b != nil {
		l.Budget = true
		if b.MaxFailures.Type == intstr.String {
			n, err := intstr.GetScaledValueFromIntOrPercent(&b.MaxFailures, 100, false)
			if err != nil {
				return Limits{}, fmt.Errorf("spec.strategy.failureBudget.maxFailures: %w", err)
			}
			l.FailuresPercent, l.MaxFailuresPercent = true, n
		} else {
			l.MaxFailures = b.MaxFailures.IntValue()
		}
		if b.MinFinished > 0 {
			l.MinFinished = int(b.MinFinished)
		}
	}
	return l, nil
}

// budgetExceeded reports whether failed of finished sites is over the budget.
func (l Limits) budgetExceeded(failed, finished int) bool {
	if finished < l.MinFinished || finished == 0 {
		return false
	}
	if l.FailuresPercent {
		return failed*100 > l.MaxFailuresPercent*finished
	}
	return failed > l.MaxFailures
}

// Wave is a slice [Start, End) of the eligible targets, in dispatch order.
type Wave struct {
	Start, End int
	// Window is how many sites may be in flight while this wave is the current one.
	Window int
	// Canary is set on the canaries' wave.
	Canary bool
}

// Size of the wave.
func (w Wave) Size() int { return w.End - w.Start }

// Waves cuts n eligible targets into waves: the canaries (if any), then waves whose size is
// the window, starting at Initial and multiplied by Factor after each wave, capped at Max.
func Waves(n int, l Limits) []Wave {
	var waves []Wave
	pos := 0
	if c := min(l.Canaries, n); c > 0 {
		waves = append(waves, Wave{Start: 0, End: c, Window: c, Canary: true})
		pos = c
	}
	size := l.Initial
	for pos < n {
		end := min(pos+size, n)
		waves = append(waves, Wave{Start: pos, End: end, Window: size})
		pos = end
		size = min(size*l.Factor, l.Max)
	}
	return waves
}

// Stop says why a campaign dispatches nothing new any more.
type Stop int

// Stop reasons, in the order Decide checks them.
const (
	// NotStopped: the campaign goes on.
	NotStopped Stop = iota
	// Aborted: spec.abort.
	Aborted
	// CanaryFailed: a canary failed or timed out.
	CanaryFailed
	// BudgetExceeded: more sites failed than the failure budget allows.
	BudgetExceeded
)

// Input is everything Decide looks at.
type Input struct {
	// Sites are the targets in dispatch order (skipped ones included).
	Sites []Site
	// Limits of the strategy (Resolve with the number of sites not skipped).
	Limits Limits
	// PreCache is strategy.preCache; PreCacheDone is set once the campaign recorded that
	// pre-caching finished.
	PreCache, PreCacheDone bool
	// Rollback is strategy.rollbackOnFailure.
	Rollback bool
	// Paused is spec.paused; Abort is spec.abort.
	Paused, Abort bool
	// Stopped is the stop the campaign recorded before: once stopped, it stays stopped.
	Stopped Stop
}

// Counts of sites by state.
type Counts struct {
	Pending, PreCaching, InProgress, Succeeded, Failed, TimedOut, Skipped int
	RollingBack, RolledBack                                               int
	// UpToDate counts the skipped sites that already ran the release.
	UpToDate int
	// BetweenSteps counts the sites InProgress whose last step succeeded and whose next one
	// is due (Site.NextStep).
	BetweenSteps int
}

// Total is how many sites the campaign targets.
func (c Counts) Total() int {
	return c.Pending + c.PreCaching + c.InProgress + c.Succeeded + c.Failed + c.TimedOut + c.Skipped
}

// Done is how many sites finished (skipped ones included).
func (c Counts) Done() int { return c.Succeeded + c.Failed + c.TimedOut + c.Skipped }

// Decision is what to do now.
type Decision struct {
	// PreCache, Apply and Rollback are indexes into Input.Sites of the sites to dispatch each
	// to now, in dispatch order; Apply starts a site's move (its first step when it has
	// Steps). Step are the sites between two steps whose next step goes now: they are in
	// flight already.
	PreCache, Apply, Rollback, Step []int
	// Waves of the eligible targets; Eligible maps a position in the waves to an index into
	// Input.Sites.
	Waves    []Wave
	Eligible []int
	// CurrentWave is the highest wave with an applied site (-1 before any).
	CurrentWave int
	// FinishedWaves counts the waves, from the first, whose sites all finished.
	FinishedWaves int
	// Window is how many sites may be in flight now.
	Window int
	// InFlight counts sites applied and not finished (after this decision's dispatches).
	InFlight int
	// Counts of sites by state (before this decision's dispatches).
	Counts Counts
	// Stop says whether, and why, nothing new is dispatched.
	Stop Stop
	// PreCacheDone is set once every eligible site finished pre-caching (or pre-cache is off).
	PreCacheDone bool
	// WaitingForCanaries is set while canaries run and the rest waits.
	WaitingForCanaries bool
	// HeldByWindows is set when a site could have been dispatched but for a closed
	// maintenance window.
	HeldByWindows bool
	// HeldByBusy is set when a site could have been dispatched but for another campaign's
	// operation that runs on it.
	HeldByBusy bool
	// Done is set when the campaign has nothing left to do or wait for.
	Done bool
}

// Decide tells what the campaign does now. It dispatches each site at most once: a site leaves
// Pending (or PreCached) as soon as its dispatch is written, and Decide only ever picks sites in
// those states.
func Decide(in Input) Decision {
	d := Decision{CurrentWave: -1, Stop: in.Stopped}
	for i, s := range in.Sites {
		switch s.State {
		case Pending:
			d.Counts.Pending++
		case PreCaching, PreCached:
			d.Counts.PreCaching++
		case InProgress:
			d.Counts.InProgress++
			if s.NextStep() {
				d.Counts.BetweenSteps++
			}
		case Succeeded:
			d.Counts.Succeeded++
		case Failed:
			d.Counts.Failed++
		case TimedOut:
			d.Counts.TimedOut++
		case Skipped:
			d.Counts.Skipped++
			if s.UpToDate {
				d.Counts.UpToDate++
			}
			continue
		}
		switch s.Rollback {
		case RollingBack:
			d.Counts.RollingBack++
		case RolledBack:
			d.Counts.RolledBack++
		}
		d.Eligible = append(d.Eligible, i)
	}
	d.InFlight = d.Counts.InProgress
	d.Waves = Waves(len(d.Eligible), in.Limits)
	site := func(pos int) Site { return in.Sites[d.Eligible[pos]] }

	// Where the waves stand.
	succeededWaves, leading := 0, true
	for w, wave := range d.Waves {
		finished, succeeded, applied := true, true, false
		for pos := wave.Start; pos < wave.End; pos++ {
			st := site(pos).State
			finished = finished && st.Final()
			succeeded = succeeded && st == Succeeded
			applied = applied || st.applyDispatched() && st != Skipped
		}
		if applied {
			d.CurrentWave = w
		}
		if leading && finished {
			d.FinishedWaves++
		} else {
			leading = false
		}
		if !wave.Canary && succeeded && succeededWaves == w-canaryWaves(d.Waves) {
			succeededWaves++
		}
	}

	// Stop: once stopped, stay stopped.
	if d.Stop == NotStopped {
		failed := d.Counts.Failed + d.Counts.TimedOut
		switch {
		case in.Abort:
			d.Stop = Aborted
		case canaryFailed(d.Waves, site):
			d.Stop = CanaryFailed
		case in.Limits.budgetExceeded(failed, d.Counts.Succeeded+failed):
			d.Stop = BudgetExceeded
		}
	}

	// Rollbacks go out whatever else happens: they restore service.
	if in.Rollback {
		for _, i := range d.Eligible {
			s := in.Sites[i]
			if s.State.failed() && s.Rollback == NoRollback && s.PreviousRelease != "" && s.NoRollback == "" {
				d.Rollback = append(d.Rollback, i)
			}
		}
	}
	rollbacksLeft := d.Counts.RollingBack > 0 || len(d.Rollback) > 0

	// Pre-cache every eligible site before the first apply.
	d.PreCacheDone = !in.PreCache || in.PreCacheDone
	if !d.PreCacheDone {
		done := true
		for _, i := range d.Eligible {
			if st := in.Sites[i].State; st == Pending || st == PreCaching {
				done = false
				break
			}
		}
		d.PreCacheDone = done
	}
	if !d.PreCacheDone {
		if d.Stop == NotStopped && !in.Paused {
			for _, i := range d.Eligible {
				if s := in.Sites[i]; s.State == Pending && !s.Busy {
					d.PreCache = append(d.PreCache, i)
				}
			}
		}
		d.Done = d.Stop != NotStopped && d.InFlight == 0 && !rollbacksLeft
		return d
	}

	// The window: the canaries all at once, then the window of the first wave that has not
	// succeeded yet.
	canaries := canaryWaves(d.Waves)
	if canaries == 1 {
		d.Window = d.Waves[0].Window
		for pos := d.Waves[0].Start; pos < d.Waves[0].End; pos++ {
			if site(pos).State != Succeeded {
				d.WaitingForCanaries = true
				break
			}
		}
	}
	if !d.WaitingForCanaries && len(d.Waves) > canaries {
		next := min(canaries+succeededWaves, len(d.Waves)-1)
		d.Window = d.Waves[next].Window
		if succeededWaves > 0 && canaries+succeededWaves >= len(d.Waves) {
			d.Window = in.Limits.Max
		}
	}

	if d.Stop == NotStopped && !in.Paused {
		// The next steps of sites between steps, held only by their maintenance windows.
		for _, i := range d.Eligible {
			switch s := in.Sites[i]; {
			case !s.NextStep():
			case s.OutsideWindow:
				d.HeldByWindows = true
			default:
				d.Step = append(d.Step, i)
			}
		}
		end := len(d.Eligible)
		if d.WaitingForCanaries {
			end = d.Waves[0].End
		}
		for pos := 0; pos < end && d.InFlight < d.Window; pos++ {
			s := site(pos)
			if s.State != Pending && s.State != PreCached {
				continue
			}
			if s.Busy {
				d.HeldByBusy = true
				continue
			}
			if s.OutsideWindow {
				d.HeldByWindows = true
				continue
			}
			d.Apply = append(d.Apply, d.Eligible[pos])
			d.InFlight++
		}
	}

	allFinal := true
	for _, i := range d.Eligible {
		if !in.Sites[i].State.Final() {
			allFinal = false
			break
		}
	}
	switch {
	case rollbacksLeft:
	case d.Stop != NotStopped:
		// A site between steps gets no next step once stopped: it stays at the release of
		// its last step.
		d.Done = d.Counts.InProgress == d.Counts.BetweenSteps
	default:
		d.Done = allFinal
	}
	return d
}

func canaryWaves(waves []Wave) int {
	if len(waves) > 0 && waves[0].Canary {
		return 1
	}
	return 0
}

func canaryFailed(waves []Wave, site func(int) Site) bool {
	if canaryWaves(waves) == 0 {
		return false
	}
	for pos := waves[0].Start; pos < waves[0].End; pos++ {
		if site(pos).State.failed() {
			return true
		}
	}
	return false
}

// Verdict is how a campaign ended.
type Verdict int

// Verdicts, from Decision.Verdict.
const (
	// Unfinished: the campaign is not Done.
	Unfinished Verdict = iota
	// AllSucceeded: every target succeeded or already ran the release.
	AllSucceeded
	// PartlySucceeded: the campaign ran to its end within the failure budget; some targets
	// succeeded (or already ran the release), the others failed, timed out or were skipped.
	PartlySucceeded
	// NoneSucceeded: the campaign ran to its end and no target succeeded, or it had none.
	NoneSucceeded
	// StoppedEarly: a stop (abort, failed canary, failure budget) ended the campaign.
	StoppedEarly
)

// Verdict tells how the campaign ended; Unfinished until it is Done. Only a campaign each of
// whose targets succeeded (or already ran the release) has AllSucceeded.
func (d Decision) Verdict() Verdict {
	good := d.Counts.Succeeded + d.Counts.UpToDate
	switch {
	case !d.Done:
		return Unfinished
	case d.Stop != NotStopped:
		return StoppedEarly
	case good == 0:
		return NoneSucceeded
	case good < d.Counts.Total():
		return PartlySucceeded
	}
	return AllSucceeded
}

// Phase is the campaign's phase after this decision; paused is spec.paused.
func (d Decision) Phase(paused bool) fleetv1.CampaignPhase {
	switch d.Verdict() {
	case AllSucceeded:
		return fleetv1.CampaignSucceeded
	case PartlySucceeded:
		return fleetv1.CampaignPartiallySucceeded
	case NoneSucceeded:
		return fleetv1.CampaignFailed
	case StoppedEarly:
		if d.Stop == Aborted {
			return fleetv1.CampaignAborted
		}
		return fleetv1.CampaignFailed
	}
	switch {
	case d.Stop != NotStopped:
		return fleetv1.CampaignAborting
	case paused:
		return fleetv1.CampaignPaused
	case !d.PreCacheDone:
		return fleetv1.CampaignPreCaching
	}
	return fleetv1.CampaignRunning
}
