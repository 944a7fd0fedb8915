package buffer

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// memSampler records the peak Go heap (live objects) and RSS while it runs.
type memSampler struct {
	stop     chan struct{}
	done     sync.WaitGroup
	peakHeap atomic.Uint64
	peakLive atomic.Uint64
	peakRSS  atomic.Uint64
}

func startSampler() *memSampler {
	s := &memSampler{stop: make(chan struct{})}
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	s.done.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(sample)
			if h := sample[0].Value.Uint64(); h > s.peakHeap.Load() {
				s.peakHeap.Store(h)
			}
			if h := sample[1].Value.Uint64(); h > s.peakLive.Load() {
				s.peakLive.Store(h)
			}
			if r := rss(); r > s.peakRSS.Load() {
				s.peakRSS.Store(r)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *memSampler) finish() (heap, rssPeak uint64) {
	close(s.stop)
	s.done.Wait()
	return s.peakHeap.Load(), s.peakRSS.Load()
}

// rss is the resident set size from /proc (0 elsewhere).
func rss() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// BenchmarkPersist persists one closed segment of APRON_BENCH_PERSIST_BYTES
// buffered bytes (default 1 GiB) of the bench table (1000 hosts, one day)
// to a Local store, and writes the same chunks with pqarrow straight to a
// file with the same writer properties. It reports MB/s of buffered bytes
// for both, and the peak heap and RSS during persist next to the buffered
// size. Targets: persist ≥ 80% of direct; peak ≤ 1.5× buffered.
func BenchmarkPersist(b *testing.B) {
	// As apron serve runs, unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(DefaultGOGC))
	}
	target := int64(1 << 30)
	if s := os.Getenv("APRON_BENCH_PERSIST_BYTES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		target = v
	}
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.MemLimit = 4 * target
	cfg.WALSync = wal.SyncNone
	wb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer wb.Close()
	mem := memory.NewGoAllocator()
	const batch = 20000
	rowsWritten := 0
	for wb.mu.open.size.Load() < target {
		rec := benchRecord(mem, rowsWritten, batch, 1000)
		if _, err := wb.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		rowsWritten += batch
	}
	wb.mu.Lock()
	seg := wb.mu.open
	if err := wb.rollLocked(time.Now(), "bench"); err != nil {
		b.Fatal(err)
	}
	wb.mu.Unlock()
	seg.seal()
	buffered := seg.size.Load()

	// Persistence by hand: the buffer was opened without a store so that
	// the persister does not run on its own.
	store, err := objstore.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	st, err := persist.Open(persist.Config{Objects: store, DataDir: cfg.DataDir})
	if err != nil {
		b.Fatal(err)
	}
	wb.persist.store = st
	b.Logf("segment: %d rows, %d bytes buffered (%.1f B/row)", rowsWritten, buffered, float64(buffered)/float64(rowsWritten))

	// Direct pqarrow, the chunks as they are.
	chunks := seg.tableBuffer(TableKey{"db", "cpu"}, false).partitionChunks()
	runtime.GC()
	start := time.Now()
	var directSize int64
	for _, cs := range chunks {
		props, arrProps := persist.WriterProperties(mem, nil, nil)
		f, err := os.Create(filepath.Join(dir, "direct.parquet"))
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		fw, err := pqarrow.NewFileWriter(cs[0].Rec.Schema(), bw, props, arrProps)
		if err != nil {
			b.Fatal(err)
		}
		var groupRows int64
		for _, c := range cs {
			if groupRows+c.Rec.NumRows() > persist.RowGroupRows {
				fw.NewBufferedRowGroup()
				groupRows = 0
			}
			if err := fw.WriteBuffered(c.Rec); err != nil {
				b.Fatal(err)
			}
			groupRows += c.Rec.NumRows()
		}
		if err := fw.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		directSize += st.Size()
		f.Close()
		for _, c := range cs {
			c.Rec.Release()
		}
	}
	direct := time.Since(start)
	_ = parquet.V2_6

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := rss()
	sampler := startSampler()
	b.ResetTimer()
	start = time.Now()
	if err := wb.persistSegment(context.Background(), seg); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	peakHeap, peakRSS := sampler.finish()
	var size int64
	for _, f := range wb.Persisted()[0].Files {
		size += f.Size
	}
	mb := float64(buffered) / 1e6
	b.ReportMetric(mb/elapsed.Seconds(), "persist_MB/s")
	b.ReportMetric(mb/direct.Seconds(), "direct_MB/s")
	b.ReportMetric(direct.Seconds()/elapsed.Seconds(), "persist/direct")
	b.ReportMetric(float64(peakHeap)/float64(buffered), "peak_heap/buffered")
	b.ReportMetric(float64(peakHeap-min(peakHeap, before.HeapAlloc))/float64(buffered), "extra_heap/buffered")
	b.ReportMetric(float64(peakRSS)/float64(buffered), "peak_rss/buffered")
	b.ReportMetric(float64(sampler.peakLive.Load())/float64(buffered), "peak_live_heap/buffered")
	b.Logf("persist %s (%d bytes of Parquet), direct pqarrow %s (%d bytes); heap before %d, peak %d (live after GC: peak %d); RSS before %d, peak %d",
		elapsed, size, direct, directSize, before.HeapAlloc, peakHeap, sampler.peakLive.Load(), rssBefore, peakRSS)
}
