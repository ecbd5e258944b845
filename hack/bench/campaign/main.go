package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testfleet"
)

func main() {
	var (
		sizes   = flag.String("sites", "100,1000,10000", "Comma-separated numbers of sites, one campaign each, smallest first.")
		timeout = flag.Duration("timeout", 20*time.Minute, "Give up on a campaign that takes longer.")
		dir     = flag.String("dir", "", "Directory of the kubeconfigs and the controller's log (a temporary one, removed at the end, when empty).")
		profDir = flag.String("profile-dir", "", "Save CPU profiles of the controller and both API servers, taken from each campaign's start, in this directory (none when empty).")
		profDur = flag.Duration("profile-duration", 30*time.Second, "Length of each CPU profile (-profile-dir).")
		extra   = flag.String("controller-flags", "", "Extra flags of the global controller, space-separated (e.g. \"--concurrency 64\"), to compare settings.")
	)
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "campaign: bad -sites entry %q\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, ns, *timeout, *dir, strings.Fields(*extra), profiling{dir: *profDir, d: *profDur}); err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		os.Exit(1)
	}
}

// result is one campaign's measurements.
type result struct {
	sites                  int
	wall                   time.Duration
	waves                  int
	waveP50, waveP99       time.Duration
	siteP50, siteP99       time.Duration
	peakRSS                int64
	cpu                    time.Duration
	dispatches, duplicates int
	phase                  fleetv1.CampaignPhase
	// reconciles, their mean time and the dispatch conflicts, from the controller's metrics.
	reconciles, conflicts float64
	reconcileMean         time.Duration
	// anchor is how long the same API server took, just before the campaign, to write each
	// Site's status once (anchorWorkers at a time): the unit the overhead is reported in.
	anchor time.Duration
}

// anchorWorkers writes the anchor's Site status patches in parallel, as many as the global
// controller's default site workers.
const anchorWorkers = 16

// profiling says where CPU profiles go (dir empty: none) and how long each is.
type profiling struct {
	dir string
	d   time.Duration
	// controller is the controller's pprof URL.
	controller string
}

func run(ctx context.Context, sizes []int, timeout time.Duration, dir string, extra []string, prof profiling) (err error) {
	logf("starting a global control plane, one site control plane for every simulated site, and bin/global-controller (artifact API off: releases are not checked)")
	// One replica, no leader election: on an overloaded machine a lease renewal that times out
	// would stop the controller mid-campaign (seen at load average 20).
	// Heartbeats as a 10,000-site fleet would set them: every site's probes go to the one site
	// API server here, and unchanged probes reach the Sites every 15m.
	args := append([]string{"--api-bind-address", "0", "--leader-elect=false", "--site-heartbeat-interval", "5m",
		"--site-status-report-interval", "15m", "--site-operation-poll-interval", "1s"}, extra...)
	if prof.dir != "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		prof.controller = "http://127.0.0.1:" + strconv.Itoa(port)
		args = append(args, "--pprof-bind-address", "127.0.0.1:"+strconv.Itoa(port))
	}
	fleet, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{Dir: dir, Sites: []string{"sim"}, ControllerArgs: args})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the global controller and the control plane")
		err = errors.Join(err, fleet.Stop())
	}()
	proc := &proc{pid: fleet.ControllerPID()}
	idle, err := proc.status("VmRSS")
	if err != nil {
		return err
	}
	var results []result
	for _, n := range sizes {
		res, err := runOnce(ctx, fleet, proc, n, timeout, prof)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	printTable(results, idle)
	return nil
}

func runOnce(ctx context.Context, fleet *testfleet.Fleet, proc *proc, n int, timeout time.Duration, prof profiling) (result, error) {
	res := result{sites: n}
	c := fleet.Global.Client
	ns := fmt.Sprintf("bench-%d", n)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	for name, version := range map[string]string{"r0": "v1.36.2", "r1": "v1.36.3"} {
		rel := &fleetv1.Release{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       fleetv1.ReleaseSpec{KubernetesVersion: version, OSImage: sitev1.OSImage{SHA256: strings.Repeat("a", 64)}},
		}
		if err := c.Create(ctx, rel); err != nil {
			return res, fmt.Errorf("create release %s: %w", name, err)
		}
	}
	logf("%d sites: starting the cluster simulator (the sites' local controllers, work time 0)", n)
	simCtx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	sim := &sitesim.ClusterSimulator{Concurrency: 32}
	if err := sim.Start(simCtx, fleet.Sites["sim"].Config); err != nil {
		return res, err
	}
	logf("%d sites: registering them (Site, Host, BMC Secret each), all behind site control plane sim", n)
	start := time.Now()
	names, err := fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "site", n, "r0", map[string]string{"bench": "campaign"})
	if err != nil {
		return res, err
	}
	// Registration is not what is measured: wait until every site's cluster (release r0) is
	// pushed. (Its status is read back at the next heartbeat, 5m, or while an operation runs.)
	if err := waitSites(ctx, c, ns, n, timeout, func(s *fleetv1.Site) bool {
		return apimeta.IsStatusConditionTrue(s.Status.Conditions, fleetv1.SiteClusterSyncedCondition)
	}); err != nil {
		return res, err
	}
	logf("%d sites: registered and taken in after %s", n, time.Since(start).Round(time.Millisecond))

	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	camp := &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "campaign-10k"},
		Spec: fleetv1.CampaignSpec{
			Action:  fleetv1.ActionPatch,
			Release: "r1",
			Targets: fleetv1.CampaignTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "campaign"}}},
			Strategy: fleetv1.CampaignStrategy{
				Canaries: pct("1%"), InitialConcurrency: pct("2%"), MaxConcurrency: pct("20%"), RampFactor: 2,
				FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromString("2%"), MinFinished: int32(max(n/100, 1))},
				SiteTimeout:   &metav1.Duration{Duration: time.Hour},
			},
		},
	}
	logf("%d sites: anchor: writing each Site's status once, %d at a time", n, anchorWorkers)
	if res.anchor, err = anchor(ctx, c, ns); err != nil {
		return res, err
	}
	logf("%d sites: anchor took %s", n, res.anchor.Round(time.Millisecond))
	if err := proc.resetPeak(); err != nil {
		return res, err
	}
	cpu0, err := proc.cpu()
	if err != nil {
		return res, err
	}
	m0, err := scrape(ctx, fleet.MetricsURL)
	if err != nil {
		return res, err
	}
	planes := []*controlplane.ControlPlane{fleet.Global, fleet.Sites["sim"]}
	var req0 []controlplane.RequestCounts
	for _, cp := range planes {
		r, err := cp.Requests(ctx)
		if err != nil {
			return res, err
		}
		req0 = append(req0, r)
	}
	profiles := startProfiles(ctx, prof, planes, n)
	logf("%d sites: campaign started", n)
	start = time.Now()
	if err := c.Create(ctx, camp); err != nil {
		return res, fmt.Errorf("create campaign: %w", err)
	}
	// Poll the status: when each wave is recorded finished.
	finishedAt := map[int]time.Time{}
	deadline := start.Add(timeout)
	for {
		got := &fleetv1.Campaign{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(camp), got); err != nil {
			return res, fmt.Errorf("get campaign: %w", err)
		}
		now := time.Now()
		for w := 0; w < int(got.Status.FinishedWaves); w++ {
			if _, ok := finishedAt[w]; !ok {
				finishedAt[w] = now
			}
		}
		if p := got.Status.Phase; p.Final() {
			res.wall, res.phase, res.waves = now.Sub(start), p, int(got.Status.Waves)
			break
		}
		if now.After(deadline) {
			return res, fmt.Errorf("%d sites: campaign not finished after %s: %s %s", n, timeout, got.Status.Phase, got.Status.Progress)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m1, err := scrape(ctx, fleet.MetricsURL)
	if err != nil {
		return res, err
	}
	cpu1, err := proc.cpu()
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	for i, cp := range planes {
		r, err := cp.Requests(ctx)
		if err != nil {
			return res, err
		}
		d := r.Sub(req0[i])
		logf("%d sites: API server %s served %.0f requests during the campaign (%.2f per site; the harness's own polling of the campaign included):\n%s",
			n, cp.Name, d.Total(), d.Total()/float64(n), format(d, n))
	}
	if err := profiles(); err != nil {
		return res, err
	}
	res.reconciles = m1[reconcileCount] - m0[reconcileCount]
	res.conflicts = m1[conflictsTotal] - m0[conflictsTotal]
	if res.reconciles > 0 {
		res.reconcileMean = time.Duration((m1[reconcileSum] - m0[reconcileSum]) / res.reconciles * float64(time.Second))
	}
	if res.peakRSS, err = proc.status("VmHWM"); err != nil {
		return res, err
	}
	logf("%d sites: %s in %s", n, res.phase, res.wall.Round(time.Millisecond))

	// Latencies from the Sites: each dispatch's time, and when the global controller recorded
	// the site's verdict. Duplicates: an operation the simulated sites took in twice.
	got := &fleetv1.Campaign{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(camp), got); err != nil {
		return res, err
	}
	id := string(got.UID)
	sites := &fleetv1.SiteList{}
	if err := c.List(ctx, sites, client.InNamespace(ns)); err != nil {
		return res, err
	}
	dispatched := map[string]time.Time{}
	var siteLat []time.Duration
	for _, s := range sites.Items {
		op, last := s.Spec.Operation, s.Status.LastOperation
		if op == nil || op.ID != id {
			continue
		}
		dispatched[s.Name] = op.DispatchTime.Time
		if last != nil && last.ID == id && last.CompletionTime != nil {
			siteLat = append(siteLat, last.CompletionTime.Sub(op.DispatchTime.Time))
		}
	}
	for _, name := range names {
		ops := sim.Dispatches()[name]
		for i, op := range ops {
			if op == id {
				res.dispatches++
				if slices.Contains(ops[:i], id) {
					res.duplicates++
				}
			}
		}
	}
	res.siteP50, res.siteP99 = quantile(siteLat, 0.5), quantile(siteLat, 0.99)
	var waveLat []time.Duration
	for w, wave := range planWaves(n) {
		first := time.Time{}
		for _, site := range wave {
			if at, ok := dispatched[site]; ok && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if end, ok := finishedAt[w]; ok && !first.IsZero() {
			waveLat = append(waveLat, end.Sub(first))
		}
	}
	res.waveP50, res.waveP99 = quantile(waveLat, 0.5), quantile(waveLat, 0.99)
	stopSim()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return res, nil
}

// anchor moves every Site's status.lastCheckTime one second back, anchorWorkers at a time, and
// reports how long that took: one write of the object a campaign writes for each site, through
// the same API server, in the same run. (Harmless: the controller schedules its probes from
// memory and no controller reacts to a status-only change of that field; setting it to now
// would hold back the probes' next status writes.)
func anchor(ctx context.Context, c client.Client, ns string) (time.Duration, error) {
	sites := &fleetv1.SiteList{}
	if err := c.List(ctx, sites, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("anchor: list sites: %w", err)
	}
	start := time.Now()
	next := make(chan *fleetv1.Site)
	errs := make(chan error, anchorWorkers)
	for range anchorWorkers {
		go func() {
			var err error
			for site := range next {
				if err != nil || site.Status.LastCheckTime == nil {
					continue
				}
				earlier := site.Status.LastCheckTime.Add(-time.Second).UTC().Format(time.RFC3339)
				patch := fmt.Sprintf(`{"status":{"lastCheckTime":%q}}`, earlier)
				if e := c.Status().Patch(ctx, site, client.RawPatch(types.MergePatchType, []byte(patch))); e != nil {
					err = fmt.Errorf("anchor: patch status of site %s: %w", site.Name, e)
				}
			}
			errs <- err
		}()
	}
	for i := range sites.Items {
		next <- &sites.Items[i]
	}
	close(next)
	var all []error
	for range anchorWorkers {
		all = append(all, <-errs)
	}
	return time.Since(start), errors.Join(all...)
}

// waitSites waits until n Sites of ns pass ok.
func waitSites(ctx context.Context, c client.Client, ns string, n int, timeout time.Duration, ok func(*fleetv1.Site) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		list := &fleetv1.SiteList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				done++
			}
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sites ready after %s", done, n, timeout)
		}
		time.Sleep(time.Second)
	}
}

// planWaves cuts the sites as the campaign does: 1% canaries, then 2% doubling up to 20%
// (percentages rounded up), sites in name order.
func planWaves(n int) [][]string {
	ceilPct := func(p int) int { return max((n*p+99)/100, 1) }
	canaries, size, maxSize := (n+99)/100, ceilPct(2), ceilPct(20)
	var waves [][]string
	pos := 0
	take := func(k int) {
		var w []string
		for ; k > 0 && pos < n; k-- {
			w = append(w, fmt.Sprintf("site-%05d", pos))
			pos++
		}
		waves = append(waves, w)
	}
	take(canaries)
	for pos < n {
		take(size)
		size = min(size*2, maxSize)
	}
	return waves
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(int(q*float64(len(d))), len(d)-1)]
}

func printTable(results []result, idle int64) {
	fmt.Printf("\nCampaign-10k harness, %s; global controller idle RSS %d MiB\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), idle>>20)
	fmt.Println("| sites | phase | waves | orchestration overhead (wall) | anchor: one Site status write per site (overhead ÷ anchor) | wave dispatch→recorded finished p50 / p99 | site dispatch→answer p50 / p99 | controller peak RSS | controller CPU (avg cores) | dispatches (duplicates) | reconciles (mean decide time) | dispatch conflicts |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %d | %s | %d | %s | %s (%.1f) | %s / %s | %s / %s | %d MiB | %s (%.2f) | %d (%d) | %.0f (%s) | %.0f |\n",
			r.sites, r.phase, r.waves, r.wall.Round(10*time.Millisecond), r.anchor.Round(10*time.Millisecond), r.wall.Seconds()/r.anchor.Seconds(),
			r.waveP50.Round(10*time.Millisecond), r.waveP99.Round(10*time.Millisecond),
			r.siteP50.Round(time.Millisecond), r.siteP99.Round(time.Millisecond), r.peakRSS>>20, r.cpu.Round(10*time.Millisecond), r.cpu.Seconds()/r.wall.Seconds(), r.dispatches, r.duplicates, r.reconciles, r.reconcileMean.Round(100*time.Microsecond), r.conflicts)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// Metrics the harness reads from the controller.
const (
	reconcileCount = "edgefleet_campaign_reconcile_duration_seconds_count"
	reconcileSum   = "edgefleet_campaign_reconcile_duration_seconds_sum"
	conflictsTotal = "edgefleet_campaign_dispatch_conflicts_total"
)

// scrape reads the controller's metrics endpoint and sums each of the harness's metrics over
// its label sets.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(fields[0], "{")
		switch name {
		case reconcileCount, reconcileSum, conflictsTotal:
			if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
				out[name] += v
			}
		}
	}
	return out, nil
}
