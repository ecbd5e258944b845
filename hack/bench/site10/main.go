package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The site's shape.
const (
	siteName      = "site10"
	siteNamespace = "bench"
	controlPlanes = 3
	workers       = 7
)

// hostNames are the site's hosts, control plane first.
func hostNames() []string {
	var names []string
	for i := range controlPlanes {
		names = append(names, fmt.Sprintf("%s-cp-%d", siteName, i))
	}
	for i := range workers {
		names = append(names, fmt.Sprintf("%s-worker-%d", siteName, i))
	}
	return names
}

func main() {
	var (
		timeout = flag.Duration("timeout", 20*time.Minute, "Give up on each install, the site's (from setting spec.cluster to the application serving) and the anchor's, after this long, naming what did not come up.")
		dir     = flag.String("dir", "", "Directory of the built stack, the kubeconfigs, the logs and the hosts' disks (a temporary one, removed at the end, when empty).")
		anchor  = flag.Bool("anchor", true, "Also run the anchor: the same install steps one at a time on ten fresh hosts.")
	)
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "site10: needs root (the test hosts: namespaces, overlayfs, veth links)")
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *timeout, *anchor); err != nil {
		fmt.Fprintln(os.Stderr, "site10:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, timeout time.Duration, withAnchor bool) (err error) {
	if dir == "" {
		if dir, err = os.MkdirTemp("", "edgefleet-site10-"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	machine := describeMachine()
	load := []string{loadAverage()}
	site, err := runSite(ctx, dir, timeout)
	if err != nil {
		return err
	}
	load = append(load, loadAverage())
	var anc *anchorResult
	if withAnchor {
		if anc, err = runAnchor(ctx, dir, site.stack, timeout); err != nil {
			return err
		}
		load = append(load, loadAverage())
	}
	report(os.Stdout, site, anc, machine, load)
	return nil
}

// describeMachine says what the run ran on: CPUs, memory, kernel.
func describeMachine() string {
	cpus, model := 0, ""
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			k, v, ok := strings.Cut(l, ":")
			switch k = strings.TrimSpace(k); {
			case ok && k == "processor":
				cpus++
			case ok && k == "model name" && model == "":
				model = strings.TrimSpace(v)
			}
		}
	}
	mem := ""
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		if _, err := fmt.Sscanf(string(raw), "MemTotal: %d kB", &kib); err == nil {
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kib)/(1<<20))
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs (%s)%s, Linux %s", cpus, model, mem, strings.TrimSpace(string(kernel)))
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, with the time.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s/%s/%s", time.Now().Format("15:04"), f[0], f[1], f[2])
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
