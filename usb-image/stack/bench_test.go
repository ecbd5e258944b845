package stack_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/testhosts"
)

// BenchmarkFirstBoot measures a bootstrap machine's first boot on a test host (root): the
// anchor is the same host booted bare, to the end of systemd's start-up; then, with the site
// stack installed and a site identity on its disk, the boot to the stack ready
// (EDGEFLEET-SITE-READY) and to its Site Ready on a real global controller (enrolled with no
// hand-written credential). Reported in seconds and as ratios to the anchor.
func BenchmarkFirstBoot(b *testing.B) {
	var bare, stack, site time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		hn := testhosts.NewHosts(b, 1, testhosts.HostOptions{Names: []string{"site-0"}})
		h := hn.Hosts[0]
		if err := h.Provision(testhosts.UserData{}); err != nil {
			b.Fatal(err)
		}
		// The anchor: the bare host, to the end of its start-up.
		start := time.Now()
		if err := h.Boot(); err != nil {
			b.Fatal(err)
		}
		waitStartedUp(b, h)
		bare += time.Since(start)
		if err := h.Stop(); err != nil {
			b.Fatal(err)
		}

		fleet := installWithIdentity(b, hn, filepath.Join(h.Dir, "upper"))
		b.StartTimer()
		start = time.Now()
		if err := h.Boot(); err != nil {
			b.Fatal(err)
		}
		waitReady(b, h)
		stack += time.Since(start)
		if err := fleet.WaitSitesReady(b.Context(), siteNamespace, siteName); err != nil {
			b.Fatal(err)
		}
		site += time.Since(start)
		b.StopTimer() // the host and the fleet stop in the cleanup
	}
	n := float64(b.N)
	b.ReportMetric(bare.Seconds()/n, "s-bare-boot")
	b.ReportMetric(stack.Seconds()/n, "s-to-stack-ready")
	b.ReportMetric(site.Seconds()/n, "s-to-site-ready")
	b.ReportMetric(stack.Seconds()/bare.Seconds(), "stack/bare")
	b.ReportMetric(site.Seconds()/bare.Seconds(), "site/bare")
}

// waitStartedUp waits until systemd on the host has finished starting up: `systemctl
// is-system-running --wait` says running or degraded (its exit status differs, start-up is over
// either way). Before systemd's bus is up the command fails at once, so it is asked again.
func waitStartedUp(b *testing.B, h *testhosts.Host) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := h.Exec(b.Context(), "systemctl", "is-system-running", "--wait")
		if state := strings.TrimSpace(string(out)); state == "running" || state == "degraded" {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("host %s did not finish starting up: %q", h.Name, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
