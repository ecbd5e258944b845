package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func window(schedule string, d time.Duration, tz string) fleetv1.MaintenanceWindow {
	return fleetv1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func TestWindowsOpen(t *testing.T) {
	sat := func(h, m int) time.Time { return time.Date(2026, 11, 21, h, m, 0, 0, time.UTC) } // a Saturday
	now := sat(3, 30)
	saturday2am := []fleetv1.MaintenanceWindow{window("0 2 * * 6", 4*time.Hour, "")}
	paris := []fleetv1.MaintenanceWindow{window("0 2 * * *", time.Hour, "Europe/Paris")}
	tests := []struct {
		name    string
		windows []fleetv1.MaintenanceWindow
		at      time.Time // now when zero
		open    bool
		next    time.Time
		err     string
	}{
		{name: "no windows: always open", open: true},
		{name: "just opened", windows: saturday2am, at: sat(2, 0), open: true},
		{name: "inside", windows: saturday2am, at: sat(5, 59), open: true},
		{name: "closed at the end", windows: saturday2am, at: sat(6, 0), next: sat(2, 0).AddDate(0, 0, 7)},
		{name: "before it opens", windows: saturday2am, at: sat(1, 0), next: sat(2, 0)},
		{name: "time zone: 02:00 Paris is 01:00 UTC in November", windows: paris, at: sat(1, 30), open: true},
		{name: "time zone: closed at 02:00 UTC", windows: paris, at: sat(2, 0), next: sat(1, 0).AddDate(0, 0, 1)},
		{name: "opened 90 minutes ago for 4h", windows: []fleetv1.MaintenanceWindow{window("0 2 * * 6", 4*time.Hour, "")}, open: true},
		{name: "opened 90 minutes ago for 1h: closed until next week",
			windows: []fleetv1.MaintenanceWindow{window("0 2 * * 6", time.Hour, "")}, next: time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)},
		{name: "in the window's time zone", windows: []fleetv1.MaintenanceWindow{window("0 4 * * *", time.Hour, "Europe/Paris")}, open: true},
		{name: "the earliest next of closed windows",
			windows: []fleetv1.MaintenanceWindow{window("0 5 * * *", time.Hour, ""), window("0 4 * * *", time.Hour, "")}, next: time.Date(2026, 11, 21, 4, 0, 0, 0, time.UTC)},
		{name: "30 February never fires", windows: []fleetv1.MaintenanceWindow{window("0 2 30 2 *", 168*time.Hour, "")}, err: "never fires"},
		{name: "31 April never fires, even beside an open window",
			windows: []fleetv1.MaintenanceWindow{window("0 2 * * 6", 4*time.Hour, ""), window("0 0 31 4 *", time.Hour, "")}, err: "maintenance window 1: schedule \"0 0 31 4 *\": never fires"},
		{name: "31 April first never fires",
			windows: []fleetv1.MaintenanceWindow{window("0 0 31 4 *", time.Hour, ""), window("0 2 * * 6", 4*time.Hour, "")}, err: "maintenance window 0: schedule \"0 0 31 4 *\": never fires"},
		{name: "29 February fires in leap years", windows: []fleetv1.MaintenanceWindow{window("0 0 29 2 *", time.Hour, "")}, next: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{name: "bad cron", windows: []fleetv1.MaintenanceWindow{window("0 2 * *", time.Hour, "")}, err: "schedule \"0 2 * *\""},
		{name: "minute 61", windows: []fleetv1.MaintenanceWindow{window("61 * * * *", time.Hour, "")}, err: "schedule \"61 * * * *\""},
		{name: "unknown time zone", windows: []fleetv1.MaintenanceWindow{window("0 2 * * *", time.Hour, "Mars/Olympus")}, err: "time zone \"Mars/Olympus\""},
		{name: "Local is not an IANA zone", windows: []fleetv1.MaintenanceWindow{window("0 2 * * *", time.Hour, "Local")}, err: "time zone \"Local\": \"Local\" is not an IANA time zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			if at.IsZero() {
				at = now
			}
			open, next, err := NewWindows().Open(tt.windows, at)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				if open {
					t.Fatal("a window that cannot be used is open")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if open != tt.open || !next.Equal(tt.next) {
				t.Fatalf("open %v next %v, want open %v next %v", open, next, tt.open, tt.next)
			}
		})
	}
}

func TestWindowsCheck(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.UTC)
	w := NewWindows()
	if err := w.Check(window("0 2 30 2 *", time.Hour, ""), now); !errors.Is(err, ErrNeverFires) {
		t.Fatalf("30 February: %v, want ErrNeverFires", err)
	}
	if err := w.Check(window("0 2 * * 6", time.Hour, "Europe/Paris"), now); err != nil {
		t.Fatalf("Saturdays in Paris: %v", err)
	}
}

func TestGate(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.UTC)
	campaignNext := now.Add(time.Hour)
	open := []fleetv1.MaintenanceWindow{window("0 2 * * 6", 4*time.Hour, "")}
	closed := []fleetv1.MaintenanceWindow{window("0 5 * * *", time.Hour, "")}
	never := []fleetv1.MaintenanceWindow{window("0 2 30 2 *", time.Hour, "")}
	tests := []struct {
		name         string
		state        State
		steps        []string
		campaignOpen bool
		own          []fleetv1.MaintenanceWindow
		want         Site
		next         time.Time
	}{
		{name: "open everywhere", campaignOpen: true, own: open, want: Site{}},
		{name: "campaign closed", own: open, want: Site{OutsideWindow: true}, next: campaignNext},
		{name: "own window closed", campaignOpen: true, own: closed, want: Site{OutsideWindow: true}, next: time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)},
		{name: "own window never fires: skipped, never dispatched", campaignOpen: true, own: never,
			want: Site{State: Skipped, Reason: `site's spec.maintenanceWindows: maintenance window 0: schedule "0 2 30 2 *": ` + ErrNeverFires.Error()}},
		{name: "pre-cached waits too", state: PreCached, campaignOpen: true, own: closed, want: Site{State: PreCached, OutsideWindow: true}, next: time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)},
		{name: "in flight: not gated", state: InProgress, own: never, want: Site{State: InProgress}},
		{name: "between steps: the next step waits", state: InProgress, steps: []string{"r138"}, campaignOpen: true, own: closed,
			want: Site{State: InProgress, Steps: []string{"r138"}, OutsideWindow: true}, next: time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)},
		{name: "between steps, own window never fires: failed, it moved already", state: InProgress, steps: []string{"r138"}, campaignOpen: true, own: never,
			want: Site{State: Failed, Steps: []string{"r138"}, Reason: `site's spec.maintenanceWindows: maintenance window 0: schedule "0 2 30 2 *": ` + ErrNeverFires.Error() + "; its next step (release r138) was not dispatched"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Site{State: tt.state, Steps: tt.steps}
			next := NewWindows().Gate(&s, tt.campaignOpen, campaignNext, tt.own, now)
			if !reflect.DeepEqual(s, tt.want) || !next.Equal(tt.next) {
				t.Fatalf("got %+v next %v, want %+v next %v", s, next, tt.want, tt.next)
			}
		})
	}
}
