package buffer

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
	writes     *prometheus.CounterVec
	rows       prometheus.Counter
	writeTime  prometheus.Histogram
	rollovers  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, b *WriteBuffer) *metrics {
	m := &metrics{
		reg: reg,
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_buffer_writes_total", Help: "Writes by result: ok, invalid, full, wal, closed.",
		}, []string{"result"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_buffer_rows_written_total", Help: "Rows durably written.",
		}),
		writeTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "apron_buffer_write_duration_seconds", Help: "Time from a write's arrival to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		rollovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apron_buffer_rollovers_total", Help: "Segments closed.",
		}),
	}
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "apron_buffer_bytes", Help: "Bytes held by buffered segments, open and closed.",
	}, func() float64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.mu.open == nil {
			return 0
		}
		return float64(b.bufferedLocked())
	})
	segs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "apron_buffer_segments", Help: "Buffered segments, open and closed.",
	}, func() float64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		return float64(len(b.mu.closed) + 1)
	})
	m.collectors = []prometheus.Collector{m.writes, m.rows, m.writeTime, m.rollovers, bytes, segs}
	if reg != nil {
		for _, c := range m.collectors {
			reg.MustRegister(c)
		}
	}
	return m
}

func (m *metrics) observeWrite(res WriteResult, err error, d time.Duration) {
	result := "ok"
	switch {
	case err == nil:
		m.rows.Add(float64(res.Rows))
		m.writeTime.Observe(d.Seconds())
	case errors.Is(err, ErrBufferFull):
		result = "full"
	case errors.Is(err, ErrWAL):
		result = "wal"
	case errors.Is(err, ErrClosed):
		result = "closed"
	default:
		result = "invalid"
	}
	m.writes.WithLabelValues(result).Inc()
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
