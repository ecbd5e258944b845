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
