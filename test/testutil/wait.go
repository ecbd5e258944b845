package testutil

import (
	"fmt"
	"testing"
	"time"
)

// WaitFor calls check every 200ms until it reports done, and fails the test with what and
// check's last word when timeout passes first or the test's context ends.
func WaitFor(t testing.TB, timeout time.Duration, what string, check func() (done bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, last := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last: %s", what, timeout, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v; last: %s", what, t.Context().Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Eventually is WaitFor of a check that returns nil when done, its error otherwise.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	WaitFor(t, timeout, "still not true", func() (bool, string) {
		err := check()
		return err == nil, fmt.Sprint(err)
	})
}

// WaitProgress calls check every 200ms until it reports done. It fails the test when check's
// progress word stays the same for stall (the work stopped moving), when limit passes, or when
// the test's context ends. It is for long work on a shared machine, whose speed is not what a
// test asserts: a slow run that keeps moving passes, a stuck one fails after stall. progress
// must change only with the work (counts, phases, sizes), never with the clock.
func WaitProgress(t testing.TB, stall, limit time.Duration, what string, check func() (done bool, progress string)) {
	t.Helper()
	start := time.Now()
	var last string
	moved := start
	for {
		done, progress := check()
		if done {
			return
		}
		now := time.Now()
		if progress != last {
			last, moved = progress, now
		}
		switch {
		case now.Sub(moved) > stall:
			t.Fatalf("%s: no progress for %s (after %s); last: %s", what, stall, now.Sub(start).Round(time.Second), last)
		case now.Sub(start) > limit:
			t.Fatalf("%s: not after %s, still moving; last: %s", what, limit, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v; last: %s", what, t.Context().Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Consistently calls check every 100ms for d, from the start to the end of d, and fails the test
// with check's error the first time it returns one, or when the test's context ends. It is the
// wait before asserting that something did NOT happen (a wrong controller given time to act):
// the test checks the whole time, not once at the end, and fails at the moment it happens.
func Consistently(t testing.TB, d time.Duration, check func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		if err := check(); err != nil {
			t.Fatalf("not true %s into %s: %v", time.Since(start).Round(time.Millisecond), d, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%v %s into %s", t.Context().Err(), time.Since(start).Round(time.Millisecond), d)
		case <-time.After(min(100*time.Millisecond, left)):
		}
	}
}
