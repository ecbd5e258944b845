package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitProgress runs WaitProgress on a recorder and returns what it failed with ("" when done).
func waitProgress(t *testing.T, stall, limit time.Duration, check func() (bool, string)) string {
	r := &fatalRecorder{TB: t}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		WaitProgress(r, stall, limit, "the work", check)
	}()
	<-ended
	return r.msg
}

func TestWaitProgress(t *testing.T) {
	t.Run("slow work that keeps moving passes, past the stall time", func(t *testing.T) {
		n := 0
		if msg := waitProgress(t, 500*time.Millisecond, time.Minute, func() (bool, string) {
			n++
			return n == 8, fmt.Sprint(n) // 8 polls: 1.4 s, more than twice the stall time
		}); msg != "" {
			t.Fatalf("failed: %s", msg)
		}
	})
	t.Run("work that stops moving fails after the stall time, saying where it stood", func(t *testing.T) {
		n := 0
		msg := waitProgress(t, 500*time.Millisecond, time.Minute, func() (bool, string) {
			n = min(n+1, 3)
			return false, fmt.Sprintf("%d of 10", n)
		})
		if !strings.Contains(msg, "no progress for 500ms") || !strings.Contains(msg, "3 of 10") {
			t.Fatalf("failed with %q, want the stall and the last progress", msg)
		}
	})
	t.Run("work that moves forever fails at the limit", func(t *testing.T) {
		n := 0
		msg := waitProgress(t, time.Minute, time.Second, func() (bool, string) {
			n++
			return false, fmt.Sprint(n)
		})
		if !strings.Contains(msg, "not after 1s, still moving") {
			t.Fatalf("failed with %q, want the limit", msg)
		}
	})
}
