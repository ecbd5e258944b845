package artifacts

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsTimeout bounds the database query a scrape makes.
const metricsTimeout = 10 * time.Second

// collector exports the transfer memory budget and the store's sizes, read at each scrape.
type collector struct {
	store *Store
	disk  func() (int64, error)

	limit, inUse, waiting, live, diskBytes *prometheus.Desc
}

// RegisterMetrics registers the store's metrics with reg: the transfer memory budget (limit,
// bytes leased, transfers waiting), the live size (the sum of the blobs' lengths) and, when disk
// is not nil, the database's size on disk as disk tells it.
func RegisterMetrics(reg prometheus.Registerer, s *Store, disk func() (int64, error)) error {
	return reg.Register(&collector{
		store: s,
		disk:  disk,
		limit: prometheus.NewDesc("edgefleet_artifact_transfer_memory_limit_bytes",
			"Memory budget of artifact transfers' buffers (--api-transfer-memory).", nil, nil),
		inUse: prometheus.NewDesc("edgefleet_artifact_transfer_memory_in_use_bytes",
			"Bytes of the transfer memory budget that uploads and downloads hold now (their buffers and the database's copies of them, estimated).", nil, nil),
		waiting: prometheus.NewDesc("edgefleet_artifact_transfers_waiting",
			"Uploads and downloads waiting for transfer memory.", nil, nil),
		live: prometheus.NewDesc("edgefleet_artifact_store_live_bytes",
			"Sum of the stored blobs' lengths.", nil, nil),
		diskBytes: prometheus.NewDesc("edgefleet_artifact_store_disk_bytes",
			"Size of the embedded database's files on disk.", nil, nil),
	})
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inUse
	ch <- c.waiting
	ch <- c.live
	if c.disk != nil {
		ch <- c.diskBytes
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	b := c.store.budget
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(b.Limit()))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(b.InUse()))
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(b.Waiting()))
	ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
	defer cancel()
	if n, err := c.store.LiveBytes(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.live, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(n))
	}
	if c.disk == nil {
		return
	}
	if n, err := c.disk(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.diskBytes, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(n))
	}
}
