package applicationcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/pki"
)

// TestCARotationStatus: what a run's CA roll-over becomes in status.bootstrap — nothing when
// none was ever asked for; the phase with the time it began (kept while the phase lasts) and
// what it waits for; the message saying so; another pass asked for while a roll-over is not
// done; an event naming the workloads restarted.
func TestCARotationStatus(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	began := metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	const waiting = "restarting Deployment default/app so that their pods read the new cluster CA (0 of 1 rolled out)"
	for _, tc := range []struct {
		name    string
		was     *sitev1.CARotationStatus
		run     cluster.CAStep
		asked   int64
		want    *sitev1.CARotationStatus // Since checked apart
		since   string                   // "none", "kept", "new" or "began" (the run's)
		again   bool
		message string
		events  int
	}{
		{name: "never asked", run: cluster.CAStep{}, since: "none"},
		{name: "asked, not started yet", run: cluster.CAStep{}, asked: 1,
			want: &sitev1.CARotationStatus{}, since: "none", again: true, message: "(0 of 1 roll-overs done): the next roll-over starts"},
		{name: "trusting both, pods restarted", run: cluster.CAStep{CARotation: pki.CARotation{Phase: pki.RotationAddNew}, Waiting: waiting, Restarted: []string{"Deployment default/app"}}, asked: 1,
			want: &sitev1.CARotationStatus{Phase: sitev1.RotationAddNew, Waiting: waiting}, since: "new", again: true,
			message: "every host trusts the new CAs beside the old (one host at a time); waiting: " + waiting, events: 1},
		{name: "phase goes on", was: &sitev1.CARotationStatus{Phase: sitev1.RotationUseNew, Since: &earlier}, run: cluster.CAStep{CARotation: pki.CARotation{Phase: pki.RotationUseNew}}, asked: 1,
			want: &sitev1.CARotationStatus{Phase: sitev1.RotationUseNew}, since: "kept", again: true, message: "every certificate is issued again by the new CAs"},
		{name: "the PKI says when the phase began", was: &sitev1.CARotationStatus{Phase: sitev1.RotationAddNew, Since: &earlier}, run: cluster.CAStep{CARotation: pki.CARotation{Phase: pki.RotationUseNew, Since: began.Time}}, asked: 1,
			want: &sitev1.CARotationStatus{Phase: sitev1.RotationUseNew}, since: "began", again: true, message: "every certificate is issued again by the new CAs"},
		{name: "roll-over done", was: &sitev1.CARotationStatus{Phase: sitev1.RotationDropOld, Since: &earlier}, run: cluster.CAStep{CARotation: pki.CARotation{Generation: 1}}, asked: 1,
			want: &sitev1.CARotationStatus{Rotations: 1}, since: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			w := &work{r: &Reconciler{Recorder: rec}, ac: &sitev1.ApplicationCluster{}, st: &sitev1.BootstrapStatus{Message: "5 nodes run it", CertificateAuthorities: tc.was}}
			if again := w.caRotation(&cluster.Result{CAs: tc.run}, tc.asked); again != tc.again {
				t.Errorf("another pass asked for: %v, want %v", again, tc.again)
			}
			got := w.st.CertificateAuthorities
			var since *metav1.Time
			if got != nil {
				c := *got
				since, c.Since = c.Since, nil
				got = &c
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("status %+v, want %+v", got, tc.want)
			}
			switch {
			case tc.since == "none" && since != nil:
				t.Errorf("since %v, want none outside a phase", since)
			case tc.since == "kept" && (since == nil || !since.Equal(&earlier)):
				t.Errorf("since %v, want the phase's start kept (%v)", since, earlier)
			case tc.since == "new" && (since == nil || time.Since(since.Time) > time.Minute):
				t.Errorf("since %v, want now", since)
			case tc.since == "began" && (since == nil || !since.Equal(&began)):
				t.Errorf("since %v, want when the PKI says the phase began (%v)", since, began)
			}
			if tc.message == "" && w.st.Message != "5 nodes run it" {
				t.Errorf("message %q, want it unchanged", w.st.Message)
			}
			if tc.message != "" && (!strings.HasPrefix(w.st.Message, "5 nodes run it; rolling the CAs over") || !strings.Contains(w.st.Message, tc.message)) {
				t.Errorf("message %q, want the roll-over said after the nodes: %q", w.st.Message, tc.message)
			}
			if len(rec.Events) != tc.events {
				t.Errorf("%d events, want %d", len(rec.Events), tc.events)
			}
		})
	}
}

// TestNextRotationPass: a phase to roll out comes a second later; a CA roll-over waiting hours
// for cluster users' kubeconfigs to expire does not run a pass over every host each second, but
// at the wait's end or a resync before.
func TestNextRotationPass(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		rotating bool
		until    time.Time
		want     time.Duration
	}{
		{"a phase to roll out", false, time.Time{}, time.Second},
		{"waiting hours", false, now.Add(12 * time.Hour), 10 * time.Minute},
		{"waiting less than a resync", false, now.Add(3 * time.Minute), 3 * time.Minute},
		{"the wait just ended", false, now.Add(-time.Minute), time.Second},
		{"a key rotation beside it", true, now.Add(12 * time.Hour), time.Second},
	} {
		if got := nextRotationPass(c.rotating, c.until, now, 10*time.Minute); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
