package sshexec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
)

func targets(hn *testhosts.HostNet) []sshexec.Target {
	var ts []sshexec.Target
	for _, h := range hn.Hosts {
		ts = append(ts, sshexec.Target{Name: h.Name, Addr: h.SSHAddr()})
	}
	return ts
}

// TestOnRealHosts runs steps on two real hosts (needs root): output, exit status, timeouts,
// bounded output, Check, stdin, a cut host not holding up the other, and host key pinning — a
// changed host key is refused.
func TestOnRealHosts(t *testing.T) {
	signer, authorized := testhosts.SSHKey(t)
	hn := testhosts.StartHosts(t, 2, authorized, testhosts.HostOptions{})
	keys := &sshexec.MemoryHostKeys{}
	e := sshexec.New(signer, keys, sshexec.Options{MaxOutput: 1024, Parallelism: 2})
	t.Cleanup(e.Close)
	ctx := t.Context()
	ts := targets(hn)
	h0, t0 := hn.Hosts[0], ts[0]

	t.Run("echo on every host pins its key", func(t *testing.T) {
		for _, r := range e.RunAll(ctx, ts, sshexec.Step{Name: "hello", Command: "echo hello from $(hostname)", Timeout: 30 * time.Second}) {
			if r.Err != nil {
				t.Fatalf("%s: %v", r.Host, r.Err)
			}
			if got, want := string(r.Stdout), "hello from "+r.Host+"\n"; got != want {
				t.Errorf("%s: stdout %q, want %q", r.Host, got, want)
			}
			if r.Duration <= 0 {
				t.Errorf("%s: no duration", r.Host)
			}
		}
		for i, h := range hn.Hosts {
			pinned, _ := keys.Get(ctx, ts[i].Name)
			if pinned == nil {
				t.Fatalf("%s: no key pinned", h.Name)
			}
			// The pinned key is one of the host's own, read from its disk.
			pub, err := h.Exec(ctx, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(pub), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pinned)))) {
				t.Errorf("%s: pinned key %s is not one of the host's keys", h.Name, ssh.FingerprintSHA256(pinned))
			}
		}
	})

	t.Run("exit status and stderr", func(t *testing.T) {
		r, err := e.Run(ctx, t0, sshexec.Step{Name: "fail", Command: "echo out; echo broken >&2; exit 3", Timeout: 30 * time.Second})
		var exit *sshexec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("err %v, want an *ExitError", err)
		}
		if exit.Status != 3 || r.ExitStatus != 3 || string(r.Stdout) != "out\n" || string(r.Stderr) != "broken\n" {
			t.Errorf("status %d/%d stdout %q stderr %q", exit.Status, r.ExitStatus, r.Stdout, r.Stderr)
		}
		if !strings.Contains(err.Error(), h0.Name) || !strings.Contains(err.Error(), "broken") {
			t.Errorf("error %q names neither host nor stderr", err)
		}
	})

	t.Run("timeout ends the command", func(t *testing.T) {
		_, err := e.Run(ctx, t0, sshexec.Step{Name: "sleep", Command: "exec sleep 1000", Timeout: time.Second})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want a timeout", err)
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			if out, err := h0.Exec(ctx, "pgrep", "-x", "sleep"); err == nil {
				j, _ := h0.Exec(ctx, "journalctl", "-u", "ssh", "--no-pager", "-n", "30")
				return fmt.Errorf("sleep still runs: %s\n%s", out, j)
			}
			return nil
		})
	})

	t.Run("output is bounded", func(t *testing.T) {
		r, err := e.Run(ctx, t0, sshexec.Step{Name: "big", Command: "head -c 5000 /dev/zero | tr '\\0' a; printf end", Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Stdout) != 1024 || r.StdoutDropped != 5003-1024 || !bytes.HasSuffix(r.Stdout, []byte("aend")) {
			t.Errorf("kept %d bytes ending %q, dropped %d", len(r.Stdout), r.Stdout[max(0, len(r.Stdout)-8):], r.StdoutDropped)
		}
	})

	t.Run("check skips a step done already; stdin", func(t *testing.T) {
		step := sshexec.Step{Name: "write", Check: "test -f /etc/edgefleet-step", Command: "cat >/etc/edgefleet-step; echo wrote", Stdin: sshexec.Bytes([]byte("payload")), Timeout: 30 * time.Second}
		r, err := e.Run(ctx, t0, step)
		if err != nil || r.Skipped || string(r.Stdout) != "wrote\n" {
			t.Fatalf("first run: skipped %v stdout %q err %v", r.Skipped, r.Stdout, err)
		}
		if out, err := h0.Exec(ctx, "cat", "/etc/edgefleet-step"); err != nil || string(out) != "payload" {
			t.Errorf("file holds %q (%v)", out, err)
		}
		r, err = e.Run(ctx, t0, step)
		if err != nil || !r.Skipped || len(r.Stdout) != 0 {
			t.Errorf("second run: skipped %v stdout %q err %v", r.Skipped, r.Stdout, err)
		}
	})

	t.Run("a cut host does not hold up the others", func(t *testing.T) {
		if err := h0.Cut(); err != nil {
			t.Fatal(err)
		}
		rs := e.RunAll(ctx, ts, sshexec.Step{Name: "uptime", Command: "cat /proc/uptime", Timeout: 3 * time.Second})
		if err := h0.Restore(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(rs[0].Err, context.DeadlineExceeded) {
			t.Errorf("cut %s: %v, want a timeout", rs[0].Host, rs[0].Err)
		}
		if rs[1].Err != nil || len(rs[1].Stdout) == 0 {
			t.Errorf("%s: %v, stdout %q", rs[1].Host, rs[1].Err, rs[1].Stdout)
		}
	})

	t.Run("a changed host key is refused", func(t *testing.T) {
		before, _ := keys.Get(ctx, t0.Name)
		// Reprovisioned behind our back: new host keys, sshd restarted, and its connections
		// ended, as the reboot of a reprovision ends them (the connection processes are killed;
		// the listener, "sshd: /usr/sbin/sshd ...", is restarted).
		if _, err := h0.Exec(ctx, "sh", "-c", "rm /etc/ssh/ssh_host_* && pkill -KILL -f '^sshd: [^/]'; systemctl restart ssh.service"); err != nil {
			t.Fatal(err)
		}
		if _, err := h0.WaitSSH(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := e.Run(ctx, t0, sshexec.Step{Name: "marker", Command: "touch /root/must-not-exist", Timeout: 30 * time.Second})
		var hk *sshexec.HostKeyError
		if !errors.As(err, &hk) {
			t.Fatalf("err %v (stdout %q), want a *HostKeyError", err, r.Stdout)
		}
		if hk.Host != t0.Name || hk.Pinned != ssh.FingerprintSHA256(before) || hk.Offered == hk.Pinned {
			t.Errorf("error %+v; pinned before %s", hk, ssh.FingerprintSHA256(before))
		}
		if out, err := h0.Exec(ctx, "ls", "/root"); err != nil || strings.Contains(string(out), "must-not-exist") {
			t.Errorf("the command ran on the host with the changed key: %q (%v)", out, err)
		}
		if after, _ := keys.Get(ctx, t0.Name); !bytes.Equal(after.Marshal(), before.Marshal()) {
			t.Errorf("the pin changed")
		}
		// Once the operator forgets the pin, the new key is pinned on the next contact.
		keys.Forget(t0.Name)
		if _, err := e.Run(ctx, t0, sshexec.Step{Name: "again", Command: "true", Timeout: 30 * time.Second}); err != nil {
			t.Fatalf("after Forget: %v", err)
		}
		if after, _ := keys.Get(ctx, t0.Name); after == nil || bytes.Equal(after.Marshal(), before.Marshal()) {
			t.Errorf("the new key was not pinned")
		}
	})
}
