package campaign

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
)

// Metrics are the campaign reconciler's Prometheus metrics.
type Metrics struct {
	sites        *prometheus.GaugeVec
	waveDuration prometheus.Histogram
	dispatches   *prometheus.CounterVec
	conflicts    prometheus.Counter
	reconcile    prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		sites: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgefleet_campaign_sites",
			Help: "Target sites of a campaign by state (pending, preCaching, inProgress, succeeded, failed, timedOut, skipped).",
		}, []string{"namespace", "campaign", "state"}),
		waveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "edgefleet_campaign_wave_duration_seconds",
			Help:    "Time from the first dispatch of a wave to the last completion of its sites, observed when the wave finishes.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
		}),
		dispatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgefleet_campaign_dispatches_total",
			Help: "Operations written to sites by campaigns, by stage (PreCache, Apply, Rollback).",
		}, []string{"namespace", "campaign", "stage"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgefleet_campaign_dispatch_conflicts_total",
			Help: "Dispatches refused because the Site changed since the cache saw it; retried on the next reconcile.",
		}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "edgefleet_campaign_reconcile_duration_seconds",
			Help:    "Time a campaign reconcile spent classifying its targets and deciding, dispatches excluded.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	for _, c := range []prometheus.Collector{m.sites, m.waveDuration, m.dispatches, m.conflicts, m.reconcile} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeCounts(key types.NamespacedName, c plan.Counts) {
	if m == nil {
		return
	}
	for state, n := range map[string]int{
		"pending": c.Pending, "preCaching": c.PreCaching, "inProgress": c.InProgress, "succeeded": c.Succeeded,
		"failed": c.Failed, "timedOut": c.TimedOut, "skipped": c.Skipped,
	} {
		m.sites.WithLabelValues(key.Namespace, key.Name, state).Set(float64(n))
	}
}

func (m *Metrics) observeWave(seconds float64) {
	if m != nil {
		m.waveDuration.Observe(seconds)
	}
}

func (m *Metrics) observeDispatches(key types.NamespacedName, stage string, n int) {
	if m != nil && n > 0 {
		m.dispatches.WithLabelValues(key.Namespace, key.Name, stage).Add(float64(n))
	}
}

func (m *Metrics) observeConflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

func (m *Metrics) observeReconcile(seconds float64) {
	if m != nil {
		m.reconcile.Observe(seconds)
	}
}

func (m *Metrics) forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.sites.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "campaign": key.Name})
	m.dispatches.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "campaign": key.Name})
}
