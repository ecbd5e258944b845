package cmd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestWaitForTimeout(t *testing.T) {
	p := &progress{w: io.Discard}
	refused := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")

	// A check that fails once the deadline has passed is the timeout, naming the last state;
	// the check here waits for the deadline itself, not for the context to say it is done.
	calls := 0
	err := waitFor(t.Context(), p, 200*time.Millisecond, 50*time.Millisecond, "release x to be Ready", func(ctx context.Context) (bool, string, error) {
		calls++
		if calls == 1 {
			return false, "Ready=False ArtifactsMissing", nil
		}
		d, _ := ctx.Deadline()
		time.Sleep(time.Until(d))
		return false, "", refused
	})
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms waiting for release x to be Ready; last seen: Ready=False ArtifactsMissing") {
		t.Errorf("a check failing at the deadline: %v", err)
	}

	// An error well before the deadline is the error.
	err = waitFor(t.Context(), p, time.Minute, 50*time.Millisecond, "x", func(context.Context) (bool, string, error) {
		return false, "", refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("an error before the deadline: %v", err)
	}
}
