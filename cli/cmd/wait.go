package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// waitFlags are --wait and --timeout of a verb that changes something.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

// addWaitFlags adds --wait, saying what it waits for, and --timeout with its default.
func addWaitFlags(c *cobra.Command, until string, timeout time.Duration) *waitFlags {
	w := &waitFlags{}
	c.Flags().BoolVar(&w.wait, "wait", false, "Wait until "+until+", showing progress")
	c.Flags().DurationVar(&w.timeout, "timeout", timeout, "How long --wait waits (0: no limit)")
	return w
}

// progress shows the states a wait goes through, each once; on a terminal each state
// replaces the one before.
type progress struct {
	w      io.Writer
	redraw bool
	// lines and last are what was shown last.
	lines int
	last  string
}

// waitProgress is where --wait shows progress: on w (stderr: the result goes to stdout),
// nowhere with --quiet.
func (g *globals) waitProgress(w io.Writer) *progress {
	if g.quiet {
		return &progress{w: io.Discard}
	}
	return &progress{w: w, redraw: isTerminal(w)}
}

func (p *progress) show(state string) {
	if state == p.last {
		return
	}
	if !strings.HasSuffix(state, "\n") {
		state += "\n"
	}
	if p.redraw && p.lines > 0 {
		fmt.Fprintf(p.w, "\033[%dA\033[J", p.lines)
	}
	fmt.Fprint(p.w, state)
	p.lines, p.last = strings.Count(state, "\n"), state
}

// waitFor calls check every interval until it reports done or fails, showing each state it
// reports. Past timeout (0: no limit but ctx) it fails, naming what it waited for and the
// last state seen.
func waitFor(ctx context.Context, p *progress, timeout, interval time.Duration, what string, check func(context.Context) (done bool, state string, err error)) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	last := "nothing"
	for {
		done, state, err := check(ctx)
		if err == nil {
			p.show(state)
			if done {
				return nil
			}
			last = state
		}
		// A check failing as the deadline passes (a client's rate limiter refuses a wait that
		// would end after it, before the context says it is done) is the timeout, not its error.
		if err != nil && ctx.Err() == nil && !pastDeadline(ctx) {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, strings.TrimSpace(last))
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// pastDeadline reports whether ctx has a deadline and it has passed.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
