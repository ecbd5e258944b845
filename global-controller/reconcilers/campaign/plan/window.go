package plan

import (
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// ErrNeverFires is the error of a schedule that names no date that exists (30 February,
// 31 April): a window with it would never open.
var ErrNeverFires = errors.New("never fires: no date matches it (check the day of the month against the month)")

// errLocalZone refuses "Local", which is not an IANA zone.
var errLocalZone = errors.New(`"Local" is not an IANA time zone: name the site's zone, e.g. "Europe/Paris", or leave it empty for UTC`)

// TimeZoneError is the error of a window whose time zone is not in the time zone database.
type TimeZoneError struct {
	Zone string
	Err  error
}

func (e *TimeZoneError) Error() string { return fmt.Sprintf("time zone %q: %v", e.Zone, e.Err) }

func (e *TimeZoneError) Unwrap() error { return e.Err }

// Windows tells whether maintenance windows are open. It remembers parsed schedules, so make
// one per reconcile (or keep it: it holds no time) rather than parsing each site's windows anew.
type Windows struct {
	parser    cron.Parser
	schedules map[string]cron.Schedule
	locations map[string]*time.Location
}

// NewWindows returns a Windows with empty caches.
func NewWindows() *Windows {
	return &Windows{
		parser:    cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow),
		schedules: map[string]cron.Schedule{},
		locations: map[string]*time.Location{},
	}
}

// Open reports whether one of windows is open at now (no windows: always open), and otherwise
// when the next one opens. A window is open only when its schedule opened it less than its
// duration ago. A window that cannot be read, or whose schedule never fires, is an error naming
// it, whatever the others and the time: nothing is open then.
func (w *Windows) Open(windows []fleetv1.MaintenanceWindow, now time.Time) (open bool, next time.Time, err error) {
	if len(windows) == 0 {
		return true, time.Time{}, nil
	}
	scheds := make([]cron.Schedule, len(windows))
	locs := make([]*time.Location, len(windows))
	for i, mw := range windows {
		if scheds[i], locs[i], err = w.parse(mw, now); err != nil {
			return false, time.Time{}, fmt.Errorf("maintenance window %d: %w", i, err)
		}
	}
	for i, mw := range windows {
		sched, local := scheds[i], now.In(locs[i])
		// The window is open when it opened less than Duration ago: the first opening after
		// now-Duration is not later than now. cron's zero time means "no opening".
		if opened := sched.Next(local.Add(-mw.Duration.Duration)); !opened.IsZero() && !opened.After(local) {
			return true, time.Time{}, nil
		}
		if n := sched.Next(local); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return false, next, nil
}

// Check tells whether a window can be used: its schedule parses and fires, its time zone
// exists. The error says which.
func (w *Windows) Check(mw fleetv1.MaintenanceWindow, now time.Time) error {
	_, _, err := w.parse(mw, now)
	return err
}

// Gate marks a site that is about to be dispatched (Pending or PreCached, or between two steps)
// OutsideWindow while the campaign's windows are closed (campaignOpen false) or, when own
// applies, while none of the site's own windows is open at now. A site whose own windows cannot
// be used is Skipped with the reason (Failed when between steps: it moved already). It returns
// when the site may start next (zero when unknown or not held).
func (w *Windows) Gate(site *Site, campaignOpen bool, campaignNext time.Time, own []fleetv1.MaintenanceWindow, now time.Time) time.Time {
	if site.State != Pending && site.State != PreCached && !site.NextStep() {
		return time.Time{}
	}
	if !campaignOpen {
		site.OutsideWindow = true
		return campaignNext
	}
	open, next, err := w.Open(own, now)
	switch {
	case err != nil && site.NextStep():
		site.State, site.Reason = Failed, fmt.Sprintf("site's spec.maintenanceWindows: %v; its next step (release %s) was not dispatched", err, site.Steps[0])
		return time.Time{}
	case err != nil:
		site.State, site.Reason = Skipped, fmt.Sprintf("site's spec.maintenanceWindows: %v", err)
		return time.Time{}
	case !open:
		site.OutsideWindow = true
		return next
	}
	return time.Time{}
}

// parse reads a window's schedule and time zone; a schedule that does not fire within the
// five years after now (cron's horizon: every date that exists comes back within them) never
// fires.
func (w *Windows) parse(mw fleetv1.MaintenanceWindow, now time.Time) (cron.Schedule, *time.Location, error) {
	sched, ok := w.schedules[mw.Schedule]
	if !ok {
		var err error
		if sched, err = w.parser.Parse(mw.Schedule); err != nil {
			return nil, nil, fmt.Errorf("schedule %q: %w", mw.Schedule, err)
		}
		if sched.Next(now).IsZero() {
			return nil, nil, fmt.Errorf("schedule %q: %w", mw.Schedule, ErrNeverFires)
		}
		w.schedules[mw.Schedule] = sched
	}
	tz := mw.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, ok := w.locations[tz]
	if !ok {
		if tz == "Local" {
			// Go's name for the zone of the machine that reads it: each replica of the
			// controller could read the window differently.
			return nil, nil, &TimeZoneError{Zone: tz, Err: errLocalZone}
		}
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, nil, &TimeZoneError{Zone: tz, Err: err}
		}
		w.locations[tz] = loc
	}
	return sched, loc, nil
}
