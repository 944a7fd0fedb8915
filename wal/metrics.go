package wal

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Writer's. Each Writer has its own; they are registered
// only if a Registerer is given.
type metrics struct {
	fsyncs        prometheus.Counter
	fsyncDuration prometheus.Histogram
	records       prometheus.Counter
	bytesWritten  prometheus.Counter
	groupRecords  prometheus.Histogram
	failures      prometheus.Counter
	failed        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_wal_fsyncs_total",
			Help: "WAL file syncs that completed, failed ones included.",
		}),
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "apron_wal_fsync_duration_seconds",
			Help:    "Duration of WAL file syncs.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs .. ~3.3s
		}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_wal_records_total",
			Help: "Records written to the WAL and acknowledged.",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_wal_bytes_written_total",
			Help: "Bytes written to WAL files, record framing included.",
		}),
		groupRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "apron_wal_group_records",
			Help:    "Records written per group commit (one sync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 .. 2048
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_wal_failures_total",
			Help: "WAL write, sync or file creation failures (each one makes the WAL unusable until restart).",
		}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "apron_wal_failed",
			Help: "1 once the WAL has failed: writes are refused UNAVAILABLE until the server is restarted (which replays the WAL).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	if err := errors.Join(
		register(reg, &m.fsyncs), register(reg, &m.fsyncDuration),
		register(reg, &m.records), register(reg, &m.bytesWritten),
		register(reg, &m.groupRecords), register(reg, &m.failures), register(reg, &m.failed),
	); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers *c; if an equal collector is registered already (a
// Writer of an earlier life of the WAL in this process), *c becomes that one.
func register[T prometheus.Collector](reg prometheus.Registerer, c *T) error {
	err := reg.Register(*c)
	if err == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
			return nil
		}
	}
	return err
}
