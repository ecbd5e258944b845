package site

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are the site reconciler's Prometheus metrics.
type Metrics struct {
	reachable     *prometheus.GaugeVec
	lastProbe     *prometheus.GaugeVec
	probeDuration prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgefleet_site_reachable",
			Help: "1 when the site's API server answered the last probe, 0 when it did not.",
		}, []string{"namespace", "site"}),
		lastProbe: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgefleet_site_last_probe_timestamp_seconds",
			Help: "Unix time of the site's last probe, answered or not (the Site's status.lastCheckTime is written only when its status changes or every --site-status-report-interval).",
		}, []string{"namespace", "site"}),
		probeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "edgefleet_site_probe_duration_seconds",
			Help:    "Time a probe of a site's API server took, failed probes included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	for _, c := range []prometheus.Collector{m.reachable, m.lastProbe, m.probeDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeProbe(site types.NamespacedName, at time.Time, took time.Duration, ok bool) {
	if m == nil {
		return
	}
	m.probeDuration.Observe(took.Seconds())
	m.lastProbe.WithLabelValues(site.Namespace, site.Name).Set(float64(at.UnixNano()) / 1e9)
	v := 0.0
	if ok {
		v = 1
	}
	m.reachable.WithLabelValues(site.Namespace, site.Name).Set(v)
}

func (m *Metrics) forget(site types.NamespacedName) {
	if m == nil {
		return
	}
	m.reachable.DeleteLabelValues(site.Namespace, site.Name)
	m.lastProbe.DeleteLabelValues(site.Namespace, site.Name)
}
