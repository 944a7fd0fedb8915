package buffer

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// hourRecord is n rows of the bench table (200 hosts) spread over the
// hour from base.
func hourRecord(mem memory.Allocator, base time.Time, start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	step := int64(time.Hour) / int64(n)
	for i := range n {
		k := start + i
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base.UnixNano() + int64(i)*step))
		b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(k%200))
		b.Field(2).(*array.StringBuilder).Append(regions[k%len(regions)])
		b.Field(3).(*array.Float64Builder).Append(float64(k%100) / 3)
		b.Field(4).(*array.Float64Builder).Append(float64(k%50) / 7)
		b.Field(5).(*array.Float64Builder).Append(float64(k%10) * 1.5)
		b.Field(6).(*array.Int64Builder).Append(int64(k))
		b.Field(7).(*array.BooleanBuilder).Append(k%3 != 0)
	}
	return b.NewRecordBatch()
}

func benchEnvInt(b *testing.B, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return def
}

// BenchmarkCompaction persists APRON_BENCH_COMPACT_DAYS (30) days × 24
// one-hour segments of one table (APRON_BENCH_COMPACT_ROWS rows each,
// default 7,000: 720 files, 5M rows) to a local store, then compacts them
// (one file a day), and, as the reference, rewrites each day's files with
// pqarrow directly (read all, write one file, same writer properties, no
// sort). It reports MB/s of input Parquet for both, their ratio (target
// ≥ 0.8), the files before and after, and the peak heap while compacting.
func BenchmarkCompaction(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(DefaultGOGC))
	}
	wb, store, dir := persistedDays(b)
	mem := memory.NewGoAllocator()
	days := benchEnvInt(b, "APRON_BENCH_COMPACT_DAYS", 30)
	rowsPer := benchEnvInt(b, "APRON_BENCH_COMPACT_ROWS", 7000)
	byDay := map[string][]persist.File{}
	var inBytes int64
	filesBefore := 0
	for _, s := range wb.Persisted() {
		for _, f := range s.Files {
			byDay[f.Partition] = append(byDay[f.Partition], f)
			inBytes += f.Size
			filesBefore++
		}
	}
	b.Logf("%d files, %d rows, %d bytes of Parquet", filesBefore, days*24*rowsPer, inBytes)

	// The reference: pqarrow, each day's files read whole and written as
	// one.
	runtime.GC()
	start := time.Now()
	for _, files := range byDay {
		var recs []arrow.RecordBatch
		for _, f := range files {
			recs = append(recs, readAll(b, store, f.Path, mem)...)
		}
		props, arrProps := persist.WriterProperties(mem, nil, nil)
		out, err := os.Create(filepath.Join(dir, "direct.parquet"))
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(out, 1<<20)
		fw, err := pqarrow.NewFileWriter(recs[0].Schema(), bw, props, arrProps)
		if err != nil {
			b.Fatal(err)
		}
		var groupRows int64
		for _, r := range recs {
			if groupRows+r.NumRows() > persist.RowGroupRows {
				fw.NewBufferedRowGroup()
				groupRows = 0
			}
			if err := fw.WriteBuffered(r); err != nil {
				b.Fatal(err)
			}
			groupRows += r.NumRows()
			r.Release()
		}
		if err := fw.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			b.Fatal(err)
		}
		out.Close()
	}
	direct := time.Since(start)

	runtime.GC()
	sampler := startSampler()
	b.ResetTimer()
	start = time.Now()
	if err := wb.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	peakHeap, peakRSS := sampler.finish()
	filesAfter := 0
	for _, s := range wb.Persisted() {
		filesAfter += len(s.Files)
	}
	mb := float64(inBytes) / 1e6
	b.ReportMetric(mb/elapsed.Seconds(), "compact_MB/s")
	b.ReportMetric(mb/direct.Seconds(), "direct_MB/s")
	b.ReportMetric(direct.Seconds()/elapsed.Seconds(), "compact/direct")
	b.ReportMetric(float64(filesBefore), "files_before")
	b.ReportMetric(float64(filesAfter), "files_after")
	b.ReportMetric(float64(peakHeap)/1e6, "peak_heap_MB")
	b.ReportMetric(float64(sampler.peakLive.Load())/1e6, "peak_live_heap_MB")
	b.ReportMetric(float64(peakRSS)/1e6, "peak_rss_MB")
	b.Logf("compaction %s, direct pqarrow %s; %d files → %d", elapsed, direct, filesBefore, filesAfter)
}

// readAll reads a Parquet object whole as record batches.
func readAll(b *testing.B, store objstore.Store, name string, mem memory.Allocator) []arrow.RecordBatch {
	r, err := store.Get(context.Background(), name)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		b.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		b.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	return out
}

// persistedDays opens a buffer on a local store holding
// APRON_BENCH_COMPACT_DAYS (30) days × 24 one-hour segments of the bench
// table, APRON_BENCH_COMPACT_ROWS (7,000) rows each, all persisted and out
// of memory.
func persistedDays(b *testing.B) (*WriteBuffer, objstore.Store, string) {
	days := benchEnvInt(b, "APRON_BENCH_COMPACT_DAYS", 30)
	rowsPer := benchEnvInt(b, "APRON_BENCH_COMPACT_ROWS", 7000)
	dir := b.TempDir()
	store, err := objstore.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.WALSync = wal.SyncNone
	cfg.Store = store
	cfg.ReleasePersisted = true
	cfg.CompactionInterval = 0
	cfg.SegmentDuration = 24 * time.Hour
	wb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wb.Close() })
	mem := memory.NewGoAllocator()
	base := t0.Truncate(24 * time.Hour)
	for d := range days {
		for h := range 24 {
			rec := hourRecord(mem, base.Add(time.Duration(d*24+h)*time.Hour), (d*24+h)*rowsPer, rowsPer)
			if _, err := wb.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			rec.Release()
			wb.mu.Lock()
			if err := wb.rollLocked(time.Now(), "bench"); err != nil {
				b.Fatal(err)
			}
			wb.mu.Unlock()
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		wb.mu.Lock()
		n := len(wb.mu.closed)
		wb.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("segments not persisted after 10 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return wb, store, dir
}

// BenchmarkIngestWhileCompacting: the rate of bulk ingest (writes of
// 20k-row batches, as persistedDays opens the buffer: WAL not fsynced, so
// that the disk does not decide) while the persisted files of
// persistedDays compact, and of as many rows with no compaction running. Target (issue 13): with
// compaction ≥ 0.8 of without.
func BenchmarkIngestWhileCompacting(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(DefaultGOGC))
	}
	wb, _, _ := persistedDays(b)
	mem := memory.NewGoAllocator()
	const batch = 20000
	next := 0
	ingest := func(until func() bool, most int) (rows int, d time.Duration) {
		start := time.Now()
		for rows < most && !until() {
			rec := benchRecord(mem, next, batch, 1000)
			if _, err := wb.Write(context.Background(), "db", "load", rec, catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			rec.Release()
			next += batch
			rows += batch
		}
		return rows, time.Since(start)
	}
	never := func() bool { return false }
	ingest(never, 200_000) // warm up
	b.ResetTimer()
	// While compacting first, up to 3M rows (or until the compaction
	// ends), then as many rows without: both phases persist what they
	// write alike.
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- wb.Compact(context.Background()) }()
	finished := false
	onRows, onTime := ingest(func() bool {
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
			finished = true
			return true
		default:
			return false
		}
	}, 3_000_000)
	if !finished {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	offRows, offTime := ingest(never, onRows)
	b.StopTimer()
	off := float64(offRows) / offTime.Seconds()
	on := float64(onRows) / onTime.Seconds()
	b.ReportMetric(off, "rows/s_no_compaction")
	b.ReportMetric(on, "rows/s_compacting")
	b.ReportMetric(on/off, "compacting/none")
	b.Logf("%d rows in %s without compaction; %d rows in %s while a compaction ran (%s in all)", offRows, offTime, onRows, onTime, time.Since(start))
}
