package plan

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

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
// when the next one opens.
func (w *Windows) Open(windows []fleetv1.MaintenanceWindow, now time.Time) (open bool, next time.Time, err error) {
	if len(windows) == 0 {
		return true, time.Time{}, nil
	}
	for i, mw := range windows {
		sched, loc, err := w.parse(mw)
		if err != nil {
			return false, time.Time{}, fmt.Errorf("maintenance window %d: %w", i, err)
		}
		local := now.In(loc)
		// The window is open when it opened less than Duration ago: the first opening after
		// now-Duration is not later than now.
		if opened := sched.Next(local.Add(-mw.Duration.Duration)); !opened.After(local) {
			return true, time.Time{}, nil
		}
		if n := sched.Next(local); next.IsZero() || n.Before(next) {
			next = n
		}
	}
	return false, next, nil
}

func (w *Windows) parse(mw fleetv1.MaintenanceWindow) (cron.Schedule, *time.Location, error) {
	sched, ok := w.schedules[mw.Schedule]
	if !ok {
		var err error
		if sched, err = w.parser.Parse(mw.Schedule); err != nil {
			return nil, nil, fmt.Errorf("schedule %q: %w", mw.Schedule, err)
		}
		w.schedules[mw.Schedule] = sched
	}
	tz := mw.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, ok := w.locations[tz]
	if !ok {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, nil, fmt.Errorf("time zone %q: %w", tz, err)
		}
		w.locations[tz] = loc
	}
	return sched, loc, nil
}
