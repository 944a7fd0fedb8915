package buffer

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/acklat"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
)

// BenchmarkAckWhilePersisting measures the acknowledgement latency of one
// writer of 1,000-row batches (WAL fsync on, as apron serve runs) first
// with nothing else running, then while a closed segment of
// APRON_BENCH_ACK_BYTES buffered bytes (default 512 MiB; the 1 GB
// needs more memory than a shared 2-core machine has to spare) persists
// to a Local store. The buffer limit is four times the segment (so that
// the idle phase's writes do not roll it over), and the GC runs as apron
// serve sets it (unless GOGC or GOMEMLIMIT say otherwise). Writes are
// paced at one every 2 ms at most. It reports p50, p99, p99.9 and max of both
// phases, in ms, and for each phase what of it is the process's own: the
// GC's assist CPU time, the longest stop-the-world pause and the p99 of
// goroutine scheduling latency (runtime/metrics). APRON_BENCH_ACK_SYNC=none
// turns the WAL fsync off, to see those without the disk's latency;
// APRON_BENCH_ACK_PERSIST_CONCURRENCY sets Config.PersistConcurrency.
// Target: p99 ≤ 5 ms while persisting.
func BenchmarkAckWhilePersisting(b *testing.B) {
	target := int64(512 << 20)
	if s := os.Getenv("APRON_BENCH_ACK_BYTES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		target = v
	}

	dir := b.TempDir()
	store, err := objstore.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.MemLimit = 4 * target
	restore := serveGC(cfg.MemLimit)
	defer restore()
	cfg.Store = store
	cfg.ReleasePersisted = true
	cfg.CompactionInterval = 0
	if v, err := strconv.Atoi(os.Getenv("APRON_BENCH_ACK_PERSIST_CONCURRENCY")); err == nil {
		cfg.PersistConcurrency = v
	}
	if os.Getenv("APRON_BENCH_ACK_SYNC") == "none" {
		cfg.WALSync = wal.SyncNone
	}
	wb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer wb.Close()

	mem := memory.NewGoAllocator()
	ctx := context.Background()
	rows := 0
	for wb.mu.open.size.Load() < target {
		rec := benchRecord(mem, rows, 20000, 1000)
		if _, err := wb.Write(ctx, "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		rows += 20000
	}
	// The writer's batches: built once, as a server decodes each one
	// into fresh memory anyway.
	batches := make([]arrow.RecordBatch, 64)
	for i := range batches {
		batches[i] = benchRecord(mem, rows+i*1000, 1000, 200)
	}
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	// A batch every 2 ms at most (500k rows/s), as a client sends them:
	// without fsync, an unpaced writer would fill the buffer.
	pace := acklat.Paced{Every: 2 * time.Millisecond}
	write := func(i int) time.Duration {
		if i == 0 {
			pace.Restart()
		}
		return pace.Time(func() {
			if _, err := wb.Write(ctx, "db", "cpu", batches[i%len(batches)], catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
		})
	}
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		// Nothing persisting.
		rt := readRuntime()
		idle := make([]time.Duration, 0, 2000)
		for i := range cap(idle) {
			idle = append(idle, write(i))
		}
		rt = rt.report(b, "idle")
		// Roll the big segment over: the persister takes it at once.
		wb.mu.Lock()
		if err := wb.rollLocked(time.Now(), "bench"); err != nil {
			wb.mu.Unlock()
			b.Fatal(err)
		}
		wb.mu.Unlock()
		start := time.Now()
		var busy []time.Duration
		// Until the persist is over: the segment file written, the WAL
		// file removed and the segment out of memory.
		done := func() bool {
			wb.mu.Lock()
			defer wb.mu.Unlock()
			return len(wb.mu.closed) == 0
		}
		for i := 0; !done(); i++ {
			busy = append(busy, write(i))
		}
		b.Logf("segment of %d rows (%d MiB buffered) persisted in %s, %d writes meanwhile", rows, target>>20, time.Since(start).Round(time.Millisecond), len(busy))
		rt.report(b, "persisting")
		acklat.Report(b, "idle", idle)
		acklat.Report(b, "persisting", busy)
	}
}

// serveGC sets the GC as apron serve does for a buffer of memLimit bytes
// (cmd/apron/gc.go), unless GOGC or GOMEMLIMIT are set, and returns what
// restores the previous settings.
func serveGC(memLimit int64) func() {
	oldPercent, oldLimit := -2, int64(-1)
	if os.Getenv("GOGC") == "" {
		oldPercent = debug.SetGCPercent(DefaultGOGC)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if l := DefaultGCMemoryLimit(memLimit); l > 0 {
			oldLimit = debug.SetMemoryLimit(l)
		}
	}
	return func() {
		if oldPercent != -2 {
			debug.SetGCPercent(oldPercent)
		}
		if oldLimit >= 0 {
			debug.SetMemoryLimit(oldLimit)
		}
	}
}

// runtimeSample is what runtime/metrics says of GC assists, pauses and
// scheduling latency so far.
type runtimeSample struct {
	assist float64
	cycles uint64
	pauses *rtmetrics.Float64Histogram
	sched  *rtmetrics.Float64Histogram
}

func readRuntime() runtimeSample {
	s := []rtmetrics.Sample{{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}, {Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/latencies:seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	rtmetrics.Read(s)
	return runtimeSample{assist: s[0].Value.Float64(), pauses: s[1].Value.Float64Histogram(), sched: s[2].Value.Float64Histogram(), cycles: s[3].Value.Uint64()}
}

// report reports what happened since r under name and returns a sample of
// now.
func (r runtimeSample) report(b *testing.B, name string) runtimeSample {
	now := readRuntime()
	maxPause := 0.0
	for i, c := range now.pauses.Counts {
		if c > r.pauses.Counts[i] {
			maxPause = now.pauses.Buckets[i+1]
		}
	}
	var total, seen uint64
	for i, c := range now.sched.Counts {
		total += c - r.sched.Counts[i]
	}
	p99 := 0.0
	for i, c := range now.sched.Counts {
		seen += c - r.sched.Counts[i]
		if seen >= total-total/100 {
			p99 = now.sched.Buckets[i+1]
			break
		}
	}
	b.ReportMetric((now.assist-r.assist)*1e3, name+"_gc_assist_ms")
	b.ReportMetric(maxPause*1e3, name+"_max_stw_ms")
	b.ReportMetric(float64(now.cycles-r.cycles), name+"_gc_cycles")
	b.ReportMetric(p99*1e3, name+"_sched_p99_ms")
	b.Logf("%s: %d GC cycles, assist %.1f ms CPU, longest stop-the-world pause ≤ %.2f ms, goroutine scheduling latency p99 ≤ %.2f ms", name, now.cycles-r.cycles, (now.assist-r.assist)*1e3, maxPause*1e3, p99*1e3)
	return now
}
