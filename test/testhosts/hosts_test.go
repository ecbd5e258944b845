package testhosts

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The key only has to look like an authorized_keys line: these tests never log in.
const testAuthorizedKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBjL0yQ5n8vXH1bXwJ5xq9a0y7m3p0bq5g6kqkq3X8aV test"

// TestHosts boots two real hosts (needs root) and checks what the harness promises: systemd
// and sshd run, each host has its own hostname, host keys and address; user data lands in the
// overlay; Cut makes a host unreachable and Restore brings it back; a reboot keeps the disk;
// Close leaves no link, cgroup or mount behind.
func TestHosts(t *testing.T) {
	dir := t.TempDir()
	hn := StartHosts(t, 2, testAuthorizedKey, HostOptions{Dir: dir})
	ctx := t.Context()
	a, b := hn.Hosts[0], hn.Hosts[1]

	keys := map[string]bool{}
	for _, h := range hn.Hosts {
		out, err := h.Exec(ctx, "hostname")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != h.Name {
			t.Errorf("%s: hostname %q", h.Name, got)
		}
		out, err = h.Exec(ctx, "systemctl", "is-active", "ssh.service")
		if err != nil || strings.TrimSpace(string(out)) != "active" {
			t.Errorf("%s: ssh.service is %q (%v)", h.Name, out, err)
		}
		out, err = h.Exec(ctx, "cat", "/root/.ssh/authorized_keys")
		if err != nil || strings.TrimSpace(string(out)) != testAuthorizedKey {
			t.Errorf("%s: authorized_keys %q (%v)", h.Name, out, err)
		}
		out, err = h.Exec(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
		if err != nil {
			t.Fatal(err)
		}
		keys[string(out)] = true

		// Each host has the machine's cgroup layout rooted at its own cgroup: systemd puts
		// sshd into its own subtree (pids is a v1 hierarchy on hybrid machines), the host's
		// cgroup on the machine holds it, and no host sees the hosts' parent cgroup.
		out, err = h.Exec(ctx, "sh", "-c", "cat /sys/fs/cgroup/pids/system.slice/ssh.service/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup/system.slice/ssh.service/cgroup.procs")
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Errorf("%s: no process in ssh.service's cgroup: %q (%v)", h.Name, out, err)
		}
		if out, err := h.Exec(ctx, "sh", "-c", "ls -d /sys/fs/cgroup/*/"+hostCgroupParent+" /sys/fs/cgroup/"+hostCgroupParent+" 2>/dev/null || true"); err != nil || len(out) != 0 {
			t.Errorf("%s sees the hosts' parent cgroup: %q (%v)", h.Name, out, err)
		}
		found := false
		for _, d := range h.cgroupDirs() {
			if _, err := os.Stat(filepath.Join(d, "system.slice", "ssh.service")); err == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: ssh.service's cgroup is in none of %v", h.Name, h.cgroupDirs())
		}
		// Its cgroups account what it ran since it booted: systemd, sshd.
		if cpu, err := h.CPU(); err != nil || cpu <= 0 {
			t.Errorf("%s: CPU %s (%v), want the time its boot took", h.Name, cpu, err)
		}
		if usage, rss, err := h.Memory(); err != nil || usage <= 0 || rss <= 0 {
			t.Errorf("%s: memory %d, resident %d (%v), want what systemd and sshd hold", h.Name, usage, rss, err)
		}
	}
	if len(keys) != 2 {
		t.Errorf("the two hosts share a host key")
	}
	// The hosts' parent cgroup weighs one process per host against the harness's processes,
	// not one for all (hostcgroups.go, weighHosts): at least the two of this test, in the
	// hierarchy that has the cpu controller (cpu.shares of v1, cpu.weight of cgroup2).
	weighed := 0
	for _, d := range hn.cgroups.dirs(hostCgroupParent) {
		for file, per := range map[string]int{"cpu.shares": hostCPUShares, "cpu.weight": hostCPUWeight} {
			raw, err := os.ReadFile(filepath.Join(d, file))
			if errors.Is(err, os.ErrNotExist) {
				continue // not the cpu controller's hierarchy
			}
			weighed++
			if weight, err2 := strconv.Atoi(strings.TrimSpace(string(raw))); err != nil || err2 != nil || weight < 2*per {
				t.Errorf("%s/%s: %q (%v), want %d or more: the hosts would starve beside the test harness", d, file, raw, err, 2*per)
			}
		}
	}
	if weighed == 0 {
		t.Errorf("no cpu.shares or cpu.weight in the hosts' parent cgroups %v: the hosts' CPU weight is not set", hn.cgroups.dirs(hostCgroupParent))
	}
	// AuthorizeKey adds a key once, keeping the others.
	second := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0m5Xk1c7Vx0Zc2N8pYyq2mXwT8y0a3b4c5d6e7f8g second"
	for range 2 {
		if err := b.AuthorizeKey(second); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := b.Exec(ctx, "cat", "/root/.ssh/authorized_keys"); err != nil || string(out) != testAuthorizedKey+"\n"+second+"\n" {
		t.Errorf("%s: authorized_keys after AuthorizeKey: %q (%v)", b.Name, out, err)
	}
	if out, err := b.Exec(ctx, "cat", "/etc/hostname"); err != nil || string(out) != b.Name+"\n" {
		t.Errorf("%s: /etc/hostname after AuthorizeKey: %q (%v)", b.Name, out, err)
	}

	// Hosts reach each other over the bridge.
	if out, err := a.Exec(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+b.IP.String()+"/22 && head -c 8 <&3"); err != nil || string(out) != "SSH-2.0-" {
		t.Errorf("%s to %s:22: %q (%v)", a.Name, b.IP, out, err)
	}

	// Cut: no banner from a while b still answers; Restore: a answers again.
	if err := a.Cut(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := sshBanner(cctx, a.SSHAddr())
	cancel()
	if err == nil {
		t.Errorf("%s answered SSH while cut", a.Name)
	}
	if _, err := b.WaitSSH(ctx); err != nil {
		t.Errorf("%s, not cut: %v", b.Name, err)
	}
	if err := a.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitSSH(ctx); err != nil {
		t.Errorf("%s after Restore: %v", a.Name, err)
	}

	// Reboot: same host key (the overlay's upper layer is the host's disk).
	before, err := a.Exec(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if a.Running() {
		t.Fatalf("%s runs after Stop", a.Name)
	}
	if err := a.Boot(); err != nil {
		t.Fatal(err)
	}
	took, err := a.WaitSSH(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: SSH answers %s after reboot", a.Name, took.Round(time.Millisecond))
	after, err := a.Exec(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("%s: host key changed across a reboot", a.Name)
	}

	if err := hn.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "link", "show", hn.uplink).CombinedOutput(); err == nil {
		t.Errorf("uplink %s left after Close: %s", hn.uplink, out)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), dir) {
		t.Errorf("mounts under %s left after Close (%v)", dir, err)
	}
	for _, h := range hn.Hosts {
		for _, d := range h.cgroupDirs() {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("cgroup %s left after Close (%v)", d, err)
			}
		}
	}
}
