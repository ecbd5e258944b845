package sshexec_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// clientPort runs a step that prints the source port of its SSH connection ($SSH_CLIENT is
// "address port 22"): steps that print the same port ran on the same connection.
func clientPort(ctx context.Context, t *testing.T, e *sshexec.Executor, target sshexec.Target, then string) string {
	t.Helper()
	r, err := e.Run(ctx, target, sshexec.Step{Name: "port", Command: "echo ${SSH_CLIENT#* }" + then, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(r.Stdout))[0]
}

// oneHost starts a real test host (needs root) that authorizes the returned signer.
func oneHost(tb testing.TB) (ssh.Signer, *testhosts.Host, sshexec.Target) {
	signer, authorized := testhosts.SSHKey(tb)
	h := testhosts.StartHosts(tb, 1, authorized, testhosts.HostOptions{}).Hosts[0]
	return signer, h, sshexec.Target{Name: h.Name, Addr: h.SSHAddr()}
}

// established counts the SSH connections the host's sshd holds.
func established(ctx context.Context, h *testhosts.Host) (int, error) {
	out, err := h.Exec(ctx, "ss", "-Htn", "state", "established", "( sport = :22 )")
	if err != nil {
		return 0, err
	}
	return len(strings.Fields(string(out))) / 4, nil // Recv-Q Send-Q Local Peer
}

// TestConnectionReuse checks on a real host (needs root) that steps share kept connections:
// one connection for steps one after the other, at most StepsPerConnection steps at once on
// one; the pinned host key checked at every step; a connection that stops answering redialed;
// a timed-out step ending its command but not the connection its neighbours run on; a host
// that does not answer losing it; idle connections and Close ending them on the host.
func TestConnectionReuse(t *testing.T) {
	signer, h, target := oneHost(t)
	keys := &sshexec.MemoryHostKeys{}
	e := sshexec.New(signer, keys, sshexec.Options{DialTimeout: 3 * time.Second, Parallelism: 8})
	t.Cleanup(e.Close)
	ctx := t.Context()

	first := clientPort(ctx, t, e, target, "")
	t.Run("steps one after the other share one connection", func(t *testing.T) {
		for i := range 5 {
			if got := clientPort(ctx, t, e, target, ""); got != first {
				t.Fatalf("step %d ran on the connection from port %s, the first on %s", i, got, first)
			}
		}
		r, err := e.Run(ctx, target, sshexec.Step{Name: "checked", Check: "test -f /nonexistent", Command: "echo ${SSH_CLIENT#* }", Timeout: 30 * time.Second})
		if err != nil || strings.Fields(string(r.Stdout))[0] != first {
			t.Fatalf("a step with a check: %q, %v", r.Stdout, err)
		}
		if n, err := established(ctx, h); err != nil || n != 1 {
			t.Errorf("the host holds %d connections (%v), want 1", n, err)
		}
	})

	t.Run("at most 4 steps at once on a connection", func(t *testing.T) {
		targets := make([]sshexec.Target, 8)
		for i := range targets {
			targets[i] = target
		}
		perPort := map[string]int{}
		for _, r := range e.RunAll(ctx, targets, sshexec.Step{Name: "busy", Command: "echo ${SSH_CLIENT#* }; sleep 2", Timeout: 30 * time.Second}) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			perPort[strings.Fields(string(r.Stdout))[0]]++
		}
		for port, n := range perPort {
			if n > 4 {
				t.Errorf("%d steps at once on the connection from port %s", n, port)
			}
		}
		if perPort[first] != 4 || len(perPort) == 8 {
			t.Errorf("steps per connection %v: the kept connection (port %s) should have taken 4", perPort, first)
		}
	})

	t.Run("the pin is checked at every step", func(t *testing.T) {
		pinned, _ := keys.Get(ctx, target.Name)
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		other, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Pin(ctx, target.Name, other); err != nil {
			t.Fatal(err)
		}
		_, err = e.Run(ctx, target, sshexec.Step{Name: "repinned", Command: "true", Timeout: 30 * time.Second})
		var hk *sshexec.HostKeyError
		if !errors.As(err, &hk) {
			t.Fatalf("with another key pinned: %v, want a *HostKeyError", err)
		}
		if err := keys.Pin(ctx, target.Name, pinned); err != nil {
			t.Fatal(err)
		}
		first = clientPort(ctx, t, e, target, "")
	})

	t.Run("a connection that stops answering is redialed", func(t *testing.T) {
		// Freeze the sshd processes serving the kept connection: it stays open, but opens no
		// session any more.
		out, err := h.Exec(ctx, "ss", "-Htnp", "state", "established", "( sport = :22 and dport = :"+first+" )")
		if err != nil {
			t.Fatal(err)
		}
		pids := regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(string(out), -1)
		if len(pids) == 0 {
			t.Fatalf("no sshd process holds the connection from port %s: %s", first, out)
		}
		for _, m := range pids {
			if _, err := h.Exec(ctx, "kill", "-STOP", m[1]); err != nil {
				t.Fatal(err)
			}
		}
		got := clientPort(ctx, t, e, target, "")
		for _, m := range pids {
			if _, err := h.Exec(ctx, "kill", "-KILL", m[1]); err != nil {
				t.Fatal(err)
			}
		}
		if got == first {
			t.Fatalf("the step ran on the frozen connection")
		}
		first = clientPort(ctx, t, e, target, "")
	})

	t.Run("a timed-out step keeps the connection of its neighbour", func(t *testing.T) {
		var wg sync.WaitGroup
		var slow sshexec.Result
		var slowErr, stuckErr error
		wg.Go(func() {
			slow, slowErr = e.Run(ctx, target, sshexec.Step{Name: "slow", Command: "sleep 3; echo ${SSH_CLIENT#* }", Timeout: 30 * time.Second})
		})
		wg.Go(func() {
			_, stuckErr = e.Run(ctx, target, sshexec.Step{Name: "stuck", Command: "exec sleep 1000", Timeout: time.Second})
		})
		wg.Wait()
		if slowErr != nil || strings.Fields(string(slow.Stdout))[0] != first {
			t.Errorf("the neighbour: %q, %v (want port %s)", slow.Stdout, slowErr, first)
		}
		if !errors.Is(stuckErr, context.DeadlineExceeded) {
			t.Errorf("the stuck step: %v, want a timeout", stuckErr)
		}
		if out, err := h.Exec(ctx, "pgrep", "-x", "sleep"); err == nil {
			t.Errorf("the timed-out command still runs: %s", out)
		}
		if got := clientPort(ctx, t, e, target, ""); got != first {
			t.Errorf("the next step ran from port %s, not on the kept connection (%s)", got, first)
		}
	})

	t.Run("a host that does not answer loses the connection", func(t *testing.T) {
		r := make(chan error, 1)
		go func() {
			_, err := e.Run(ctx, target, sshexec.Step{Name: "cut", Command: "touch /tmp/started; exec sleep 1000", Timeout: 3 * time.Second})
			r <- err
		}()
		testutil.Eventually(t, 20*time.Second, func() error {
			_, err := h.Exec(ctx, "test", "-f", "/tmp/started")
			return err
		})
		if err := h.Cut(); err != nil {
			t.Fatal(err)
		}
		err := <-r
		if err := h.Restore(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v, want a timeout", err)
		}
		if got := clientPort(ctx, t, e, target, ""); got == first {
			t.Errorf("the next step ran on the connection the host did not answer on")
		}
		_, _ = h.Exec(ctx, "pkill", "-x", "sleep")
	})

	t.Run("idle connections end", func(t *testing.T) {
		idle := sshexec.New(signer, keys, sshexec.Options{MaxIdle: time.Second})
		defer idle.Close()
		before, err := established(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		clientPort(ctx, t, idle, target, "")
		if n, err := established(ctx, h); err != nil || n != before+1 {
			t.Fatalf("%d connections (%v) after a step, want %d", n, err, before+1)
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			if n, err := established(ctx, h); err != nil || n != before {
				return fmt.Errorf("%d connections (%w), want %d once the idle one ends", n, err, before)
			}
			return nil
		})
	})

	t.Run("without keeping, each step dials", func(t *testing.T) {
		each := sshexec.New(signer, keys, sshexec.Options{MaxIdle: -1})
		defer each.Close()
		seen := map[string]bool{}
		for range 3 {
			seen[clientPort(ctx, t, each, target, "")] = true
		}
		if len(seen) != 3 {
			t.Errorf("3 steps ran on %d connections, want 3", len(seen))
		}
	})

	t.Run("Close ends the kept connections", func(t *testing.T) {
		e.Close()
		testutil.Eventually(t, 20*time.Second, func() error {
			if n, err := established(ctx, h); err != nil || n != 0 {
				return fmt.Errorf("%d connections (%w) after Close", n, err)
			}
			return nil
		})
		if _, err := e.Run(ctx, target, sshexec.Step{Name: "late", Command: "true"}); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a step after Close: %v, want an error saying the executor is closed", err)
		}
	})
}

// BenchmarkStepsOnOneHost runs short steps one after the other on a real host (needs root), on
// kept connections and with a connection each (MaxIdle < 0, the anchor): the ratio is what
// keeping connections saves a step.
func BenchmarkStepsOnOneHost(b *testing.B) {
	signer, _, target := oneHost(b)
	keys := &sshexec.MemoryHostKeys{}
	for _, bc := range []struct {
		name    string
		maxIdle time.Duration
	}{{"kept", 0}, {"dial-each", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			e := sshexec.New(signer, keys, sshexec.Options{MaxIdle: bc.maxIdle})
			defer e.Close()
			for b.Loop() {
				if _, err := e.Run(b.Context(), target, sshexec.Step{Name: "true", Command: "true"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
