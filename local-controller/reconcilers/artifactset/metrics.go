package artifactset

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the site cache's Prometheus metrics.
type Metrics struct {
	fetchedBytes prometheus.Counter
	fetches      prometheus.Counter
	corrupt      prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		fetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgefleet_site_cache_fetched_bytes_total",
			Help: "Bytes of artifacts fetched from the global artifact API and published in the site cache.",
		}),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgefleet_site_cache_fetches_total",
			Help: "Artifacts fetched from the global artifact API and published in the site cache.",
		}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgefleet_site_cache_corrupted_total",
			Help: "Cached artifacts found not to match their sha256, removed and fetched again.",
		}),
	}
	for _, c := range []prometheus.Collector{m.fetchedBytes, m.fetches, m.corrupt} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) fetched(size int64) {
	if m == nil {
		return
	}
	m.fetches.Inc()
	m.fetchedBytes.Add(float64(size))
}

func (m *Metrics) corrupted() {
	if m == nil {
		return
	}
	m.corrupt.Inc()
}
