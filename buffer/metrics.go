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

	fullWaits       prometheus.Counter
	fullWaitSeconds prometheus.Counter
	slowdowns       prometheus.Counter
	slowdownSeconds prometheus.Counter

	persistedSegments prometheus.Counter
	persistedRows     prometheus.Counter
	persistedBytes    prometheus.Counter
	persistedFiles    prometheus.Counter
	persistFailures   prometheus.Counter
	persistTime       prometheus.Histogram
	storeFailures     *prometheus.CounterVec
	filesDeleted      *prometheus.CounterVec
	bytesDeleted      *prometheus.CounterVec

	compactions        *prometheus.CounterVec
	compactionFilesIn  prometheus.Counter
	compactionFilesOut prometheus.Counter
	compactionBytesIn  prometheus.Counter
	compactionBytesOut prometheus.Counter
	compactionTime     prometheus.Histogram
	compactionPaced    prometheus.Counter
	compactionBacklog  prometheus.GaugeFunc
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
	m.persistedSegments = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_persist_segments_total", Help: "Segments persisted to the object store.",
	})
	m.persistedRows = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_persist_rows_total", Help: "Rows persisted to the object store.",
	})
	m.persistedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_persist_bytes_total", Help: "Bytes of Parquet files persisted.",
	})
	m.persistedFiles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_persist_files_total", Help: "Parquet files persisted.",
	})
	m.persistFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_persist_failures_total", Help: "Failed attempts of a persist step (each is retried).",
	})
	m.storeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apron_objstore_failures_total",
		Help: "Failed object store requests, by operation and error class, those the storage client retries by itself included.",
	}, []string{"op", "class"})
	m.persistTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "apron_persist_duration_seconds", Help: "Time to persist one closed segment, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
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
	unlisted := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "apron_persist_unlisted_objects", Help: "Parquet files in the data dir's journal of unlisted objects: being uploaded, or out of their listing and not yet deleted; a count that stays high means deletes are failing.",
	}, func() float64 {
		if st := b.persist.store; st != nil {
			return float64(st.UnlistedCount())
		}
		return 0
	})
	m.compactionBacklog = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "apron_compaction_backlog_files",
		Help: "Persisted files due for compaction (of a table's day with --compaction-min-files or more) at the last round's look, less those merged since; one that keeps growing means compaction does not keep up with the writes (see --compaction-cpu-share).",
	}, func() float64 { return float64(b.compactBacklog.Load()) })
	m.filesDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apron_persist_files_deleted_total", Help: "Parquet files deleted from the object store, by reason: dropped (their table or database), expired (retention) or compacted (merged into another).",
	}, []string{"reason"})
	m.bytesDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apron_persist_bytes_deleted_total", Help: "Bytes of the Parquet files deleted, by reason.",
	}, []string{"reason"})
	m.compactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apron_compactions_total", Help: "Compactions of persisted files, by result: ok, failed (a failed one is retried).",
	}, []string{"result"})
	m.compactionFilesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_compaction_files_in_total", Help: "Parquet files merged by compactions.",
	})
	m.compactionFilesOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_compaction_files_out_total", Help: "Parquet files compactions made.",
	})
	m.compactionBytesIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_compaction_bytes_in_total", Help: "Bytes of the Parquet files compactions merged.",
	})
	m.compactionBytesOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_compaction_bytes_out_total", Help: "Bytes of the Parquet files compactions made.",
	})
	m.compactionTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "apron_compaction_duration_seconds", Help: "Time of one compaction, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
	m.compactionPaced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_compaction_paced_seconds_total", Help: "Time compactions held back to leave the CPU to writes (--compaction-cpu-share).",
	})
	m.fullWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_buffer_full_waits_total", Help: "Writes that found the buffer at --buffer-mem-limit while segments were being persisted and waited for room (--buffer-full-wait).",
	})
	m.fullWaitSeconds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_buffer_full_wait_seconds_total", Help: "Time writes waited for room in a full buffer.",
	})
	m.slowdowns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_buffer_slowdowns_total", Help: "Writes paced before the buffer was full: seven eighths of --buffer-mem-limit buffered while a segment was being persisted (--buffer-slowdown).",
	})
	m.slowdownSeconds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apron_buffer_slowdown_seconds_total", Help: "Time writes were paced before the buffer was full (--buffer-slowdown).",
	})
	m.collectors = []prometheus.Collector{m.fullWaits, m.fullWaitSeconds, m.slowdowns, m.slowdownSeconds, m.compactions, m.compactionFilesIn, m.compactionFilesOut, m.compactionBytesIn,
		m.compactionBytesOut, m.compactionTime, m.compactionPaced, m.writes, m.rows, m.writeTime, m.rollovers, bytes, segs,
		m.persistedSegments, m.persistedRows, m.persistedBytes, m.persistedFiles, m.persistFailures, m.persistTime, m.storeFailures,
		m.filesDeleted, m.bytesDeleted, unlisted, m.compactionBacklog}
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

func (m *metrics) persisted(rows, bytes int64, files int, d time.Duration) {
	m.persistedSegments.Inc()
	m.persistedRows.Add(float64(rows))
	m.persistedBytes.Add(float64(bytes))
	m.persistedFiles.Add(float64(files))
	m.persistTime.Observe(d.Seconds())
}
