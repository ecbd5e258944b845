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

// consistently runs Consistently on a recorder and returns what it failed with ("" when it held).
func consistently(t *testing.T, d time.Duration, check func() error) string {
	r := &fatalRecorder{TB: t}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		Consistently(r, d, check)
	}()
	<-ended
	return r.msg
}

func TestConsistently(t *testing.T) {
	t.Run("a check that holds the whole time passes, after the whole time", func(t *testing.T) {
		n := 0
		start := time.Now()
		if msg := consistently(t, time.Second, func() error {
			n++
			return nil
		}); msg != "" {
			t.Fatalf("failed: %s", msg)
		}
		if took := time.Since(start); took < time.Second || n < 5 {
			t.Fatalf("returned after %s and %d checks, want a second of checks every 100ms", took, n)
		}
	})
	t.Run("a check that fails mid-way fails at once, with its error", func(t *testing.T) {
		n := 0
		start := time.Now()
		msg := consistently(t, time.Minute, func() error {
			n++
			if n == 4 {
				return fmt.Errorf("dispatched %d operations", 1)
			}
			return nil
		})
		if !strings.Contains(msg, "dispatched 1 operations") || !strings.Contains(msg, "into 1m0s") {
			t.Fatalf("failed with %q, want the check's error and the duration", msg)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("failed after %s, want at the failing check", took)
		}
	})
	t.Run("a check that fails only at the end fails", func(t *testing.T) {
		start := time.Now()
		msg := consistently(t, 500*time.Millisecond, func() error {
			if time.Since(start) >= 500*time.Millisecond {
				return fmt.Errorf("changed at the end")
			}
			return nil
		})
		if !strings.Contains(msg, "changed at the end") {
			t.Fatalf("failed with %q, want the check's error at the end of the time", msg)
		}
	})
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
