package recorder

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgefleet/edgefleet/test/controlplane"
)

// fakeRecorder keeps the notes it is given (a fake: the real recorder sends them to the API
// server, whose limit MaxNote is).
type fakeRecorder struct{ notes []string }

func (f *fakeRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	if note != "%s" || len(args) != 1 {
		panic("the note must reach the recorder formatted: " + note)
	}
	f.notes = append(f.notes, args[0].(string))
}

func TestBounded(t *testing.T) {
	tests := []struct {
		name, note string
		args       []any
		want       string // the note recorded; empty: cut, checked below
	}{
		{name: "short", note: "host %s joined", args: []any{"h-1"}, want: "host h-1 joined"},
		{name: "exactly the limit", note: strings.Repeat("a", MaxNote), want: strings.Repeat("a", MaxNote)},
		{name: "over the limit", note: "%s", args: []any{strings.Repeat("b", 5000)}},
		{name: "over the limit, cut inside a character", note: strings.Repeat("é", 700)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRecorder{}
			Bounded(f).Eventf(&corev1.Pod{}, nil, corev1.EventTypeWarning, "Reason", "Action", tt.note, tt.args...)
			got := f.notes[0]
			if len(got) > MaxNote || !utf8.ValidString(got) {
				t.Fatalf("note of %d bytes (valid UTF-8: %v), the limit is %d", len(got), utf8.ValidString(got), MaxNote)
			}
			if tt.want != "" {
				if got != tt.want {
					t.Errorf("note %q, want %q", got, tt.want)
				}
				return
			}
			if !strings.HasSuffix(got, cut) || len(got) < MaxNote-len(cut)-3 {
				t.Errorf("a cut note must keep what fits and say it was cut: %d bytes, ends %q", len(got), got[len(got)-20:])
			}
		})
	}
}

// TestNoteFitsTheAPIServer checks MaxNote against a real API server: an Event whose note Note
// cut from a longer one is stored, and one byte more than MaxNote is refused, naming the limit.
func TestNoteFitsTheAPIServer(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "recorder"})
	ns := cp.Namespace(t)
	long := strings.Repeat("é", MaxNote) // 2 bytes each
	event := func(name, note string) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
			EventTime:           metav1.NowMicro(),
			ReportingController: "edgefleet.io/test",
			ReportingInstance:   "test",
			Action:              "Test",
			Reason:              "Test",
			Type:                corev1.EventTypeNormal,
			Regarding:           corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "regarded", APIVersion: "v1"},
			Note:                note,
		}
	}
	cutNote := Note(long)
	if err := cp.Client.Create(t.Context(), event("cut", cutNote)); err != nil {
		t.Errorf("an Event with a note of %d bytes that Note cut: %v", len(cutNote), err)
	}
	err := cp.Client.Create(t.Context(), event("over", strings.Repeat("x", MaxNote+1)))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d characters", MaxNote)) {
		t.Errorf("an Event with a note of %d bytes: %v, want refused as invalid, naming the limit", MaxNote+1, err)
	}
}
