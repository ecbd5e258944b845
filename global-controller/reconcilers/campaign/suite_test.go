package campaign_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/sitesim"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// global is the global cluster. Each test starts its own controller (startController) so a
// test can stop and restart it, and its own site simulator over its namespace.
var global *controlplane.ControlPlane

const wait = 60 * time.Second

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "global", InstallCRDs: true}, func(_ context.Context, cp *controlplane.ControlPlane) error {
		global = cp
		return nil
	}))
}

// controllerOptions tune startController.
type controllerOptions struct {
	clock clock.PassiveClock
	// registry receives the controller's metrics; a new one when nil.
	registry *prometheus.Registry
}

// startController runs the campaign and release reconcilers (the release one without an
// artifact store: every release is Ready) in a manager of their own until the returned stop is
// called or the test ends.
func startController(t *testing.T, opts controllerOptions) (stop func()) {
	t.Helper()
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	mgr, err := ctrl.NewManager(global.Config, ctrl.Options{
		Scheme:                 controlplane.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if opts.registry == nil {
		opts.registry = prometheus.NewRegistry()
	}
	metrics, err := campaign.NewMetrics(opts.registry)
	if err != nil {
		t.Fatal(err)
	}
	copts := controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: ptr.To(true)}
	r := &campaign.Reconciler{
		Client:              mgr.GetClient(),
		Recorder:            mgr.GetEventRecorder("campaign-controller"),
		Metrics:             metrics,
		Clock:               opts.clock,
		DispatchConcurrency: 8,
		ResyncInterval:      500 * time.Millisecond,
	}
	if err := r.SetupWithManager(mgr, copts); err != nil {
		t.Fatal(err)
	}
	rel := &release.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("release-controller"), RecheckInterval: time.Second}
	if err := rel.SetupWithManager(mgr, copts); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// gate decides the outcome of each simulated site: a site hangs until the test finishes it.
type gate struct {
	mu       sync.Mutex
	outcomes map[string]fleetv1.OperationPhase
	sim      *sitesim.FakeSiteReconciler
}

func (g *gate) outcome(site string, _ *fleetv1.SiteOperation) (fleetv1.OperationPhase, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.outcomes[site]
	if p == fleetv1.OperationFailed {
		return p, "simulated failure"
	}
	return p, ""
}

// finish lets sites end with phase (Succeeded or Failed).
func (g *gate) finish(phase fleetv1.OperationPhase, sites ...string) {
	g.mu.Lock()
	for _, s := range sites {
		g.outcomes[s] = phase
	}
	g.mu.Unlock()
	for _, s := range sites {
		g.sim.Poke(s)
	}
}

// startSimulator simulates the sites of ns; with gated, every site hangs until finished through
// the returned gate, otherwise outcome decides (nil: every site succeeds at once).
func startSimulator(t *testing.T, ns string, gated bool, outcome func(string, *fleetv1.SiteOperation) (fleetv1.OperationPhase, string)) (*sitesim.FakeSiteReconciler, *gate) {
	t.Helper()
	g := &gate{outcomes: map[string]fleetv1.OperationPhase{}}
	if gated {
		outcome = g.outcome
	}
	sim, err := sitesim.NewFakeSiteReconciler(global.Config, sitesim.FakeSiteReconcilerOptions{Namespace: ns, Outcome: outcome})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.sim = sim
	return sim, g
}

// createRelease creates a Release (Ready once the release reconciler saw it).
func createRelease(t *testing.T, ns, name string) {
	t.Helper()
	rel := &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: fmt.Sprintf("%064x", len(name))}},
	}
	if err := global.Client.Create(t.Context(), rel); err != nil {
		t.Fatal(err)
	}
}

// createSites creates n sites at release from, labelled role=store.
func createSites(t *testing.T, ns string, n int, from string) []string {
	t.Helper()
	names, err := sitesim.CreateFakeSites(t.Context(), global.Client, ns, "site", n, from, map[string]string{"role": "store"})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func newCampaign(ns, name, release string, strategy fleetv1.CampaignStrategy) *fleetv1.Campaign {
	return &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1.CampaignSpec{
			Action:   fleetv1.ActionPatch,
			Release:  release,
			Targets:  fleetv1.CampaignTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "store"}}},
			Strategy: strategy,
		},
	}
}

func count(n int) *intstr.IntOrString { v := intstr.FromInt(n); return &v }

func getCampaign(t *testing.T, c *fleetv1.Campaign) *fleetv1.Campaign {
	t.Helper()
	got := &fleetv1.Campaign{}
	if err := global.Client.Get(t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitPhase waits for the campaign to reach phase and returns it.
func waitPhase(t *testing.T, c *fleetv1.Campaign, phase fleetv1.CampaignPhase) *fleetv1.Campaign {
	t.Helper()
	var got *fleetv1.Campaign
	// A campaign over many sites takes as long as the machine makes it: it fails when it stops
	// moving for wait, not when it is slow.
	testutil.WaitProgress(t, wait, 10*time.Minute, "campaign "+c.Name+" to be "+string(phase), func() (bool, string) {
		got = getCampaign(t, c)
		return got.Status.Phase == phase, fmt.Sprintf("%q (%s), counts %+v", got.Status.Phase, got.Status.Progress, got.Status.Counts)
	})
	return got
}

// waitDispatched waits until exactly want sites were dispatched operation id, then checks
// that it stays so for a while (the controller had every chance to dispatch more).
func waitDispatched(t *testing.T, sim *sitesim.FakeSiteReconciler, id string, want []string) {
	t.Helper()
	slices.Sort(want)
	check := func() error {
		if got := sim.DispatchedSites(id); !slices.Equal(got, want) {
			return fmt.Errorf("dispatched %v, want %v", got, want)
		}
		return nil
	}
	testutil.Eventually(t, wait, check)
	testutil.Consistently(t, 1500*time.Millisecond, func() error {
		if err := check(); err != nil {
			return fmt.Errorf("after settling: %w", err)
		}
		return nil
	})
}

// staysUndispatched checks, for the time a wrong controller would take to dispatch, that the
// simulated sites got no operation and that campaign c stays in phase; what names the case.
func staysUndispatched(t *testing.T, sim *sitesim.FakeSiteReconciler, c *fleetv1.Campaign, phase fleetv1.CampaignPhase, what string) {
	t.Helper()
	testutil.Consistently(t, time.Second, func() error {
		if n := len(sim.Log()); n != 0 {
			return fmt.Errorf("%s: %d operations dispatched: %v", what, n, sim.Log())
		}
		if p := getCampaign(t, c).Status.Phase; p != phase {
			return fmt.Errorf("%s: phase went from %s to %s", what, phase, p)
		}
		return nil
	})
}

// update changes the campaign's spec, retrying on conflicts.
func update(t *testing.T, c *fleetv1.Campaign, change func(*fleetv1.Campaign)) {
	t.Helper()
	controlplane.Update(t, global.Client, c.DeepCopy(), change)
}

// dispatchedOnce checks that every site the simulator saw was dispatched each ID at most once.
func dispatchedOnce(t *testing.T, sim *sitesim.FakeSiteReconciler) {
	t.Helper()
	for site, ids := range sim.Dispatches() {
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("site %s dispatched %s twice: %v", site, id, ids)
			}
			seen[id] = true
		}
	}
}

// hasEvents checks that the campaign has an event with each of reasons.
func hasEvents(t *testing.T, c *fleetv1.Campaign, reasons ...string) error {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := global.Client.List(t.Context(), list, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Campaign" && e.Regarding.Name == c.Name {
			seen[e.Reason] = true
		}
	}
	for _, r := range reasons {
		if !seen[r] {
			return fmt.Errorf("no event with reason %s for campaign %s (have %v)", r, c.Name, seen)
		}
	}
	return nil
}

// gauge returns the value of a gauge of reg with these labels.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}
