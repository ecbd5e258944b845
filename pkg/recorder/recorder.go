package recorder

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxNote is the API server's limit on an Event's note, in bytes (events.k8s.io/v1 Event.note).
const MaxNote = 1024

// cut ends a note that was shortened.
const cut = " …(cut)"

// Bounded returns r recording each Event with its note cut to MaxNote bytes.
func Bounded(r events.EventRecorder) events.EventRecorder {
	return bounded{r}
}

type bounded struct{ events.EventRecorder }

func (b bounded) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Note(fmt.Sprintf(note, args...)))
}

// Note is note cut to MaxNote bytes on a character boundary, ending with a mark when cut.
func Note(note string) string {
	if len(note) <= MaxNote {
		return note
	}
	end := MaxNote - len(cut)
	for end > 0 && !utf8.RuneStart(note[end]) {
		end--
	}
	return note[:end] + cut
}
