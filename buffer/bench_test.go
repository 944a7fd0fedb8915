package buffer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/cputime"
	"github.com/apron-db/apron/wal"
)

// benchSchema is a typical metrics table: two tags, five fields, time.
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
	{Name: "host", Type: arrow.BinaryTypes.String},
	{Name: "region", Type: arrow.BinaryTypes.String},
	{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_system", Type: arrow.PrimitiveTypes.Float64},
	{Name: "usage_idle", Type: arrow.PrimitiveTypes.Float64},
	{Name: "requests", Type: arrow.PrimitiveTypes.Int64},
	{Name: "healthy", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

// benchRecord builds n rows starting at row start; hosts is the number of
// distinct hosts (0: every host name distinct).
func benchRecord(mem memory.Allocator, start, n, hosts int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.UnixNano() + int64(i)*1000))
		h := i
		if hosts > 0 {
			h = i % hosts
		}
		b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(h))
		b.Field(2).(*array.StringBuilder).Append(regions[i%len(regions)])
		b.Field(3).(*array.Float64Builder).Append(float64(i%100) / 3)
		b.Field(4).(*array.Float64Builder).Append(float64(i%50) / 7)
		b.Field(5).(*array.Float64Builder).Append(float64(i%10) * 1.5)
		b.Field(6).(*array.Int64Builder).Append(int64(i))
		b.Field(7).(*array.BooleanBuilder).Append(i%3 != 0)
	}
	return b.NewRecordBatch()
}

func ipcSize(t testing.TB, rec arrow.RecordBatch) int64 {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return int64(buf.Len())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkBufferMemory buffers 2M rows, in writes of 50k rows and of 1k
// rows (issue 14: small batches must cost no more per row), and reports
// the heap bytes each buffered row costs next to its plain (no
// dictionary) Arrow IPC size.
// Target: heap/row at most 1.3x ipc/row.
func BenchmarkBufferMemory(b *testing.B) {
	for _, hosts := range []int{1000, 0} {
		name := fmt.Sprintf("hosts=%d", hosts)
		if hosts == 0 {
			name = "hosts=all-distinct"
		}
		for _, batch := range []int{50_000, 1_000} {
			b.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(b *testing.B) { benchBufferMemory(b, hosts, batch) })
		}
	}
}

// benchBufferMemory: 2M rows in writes of batch rows.
func benchBufferMemory(b *testing.B, hosts, batch int) {
	const rows = 2_000_000
	for range b.N {
		cfg := DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.WALSync = wal.SyncNone
		wb, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		var ipcBytes int64
		before := heapInUse()
		for start := 0; start < rows; start += batch {
			rec := benchRecord(memory.DefaultAllocator, start, batch, hosts)
			ipcBytes += ipcSize(b, rec)
			if _, err := wb.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		for _, s := range wb.Segments() {
			s.mu.RLock()
			for _, t := range s.mu.tables {
				t.sealAll()
			}
			s.mu.RUnlock()
		}
		after := heapInUse()
		heapPerRow := float64(after-before) / rows
		ipcPerRow := float64(ipcBytes) / rows
		b.ReportMetric(heapPerRow, "heap-B/row")
		b.ReportMetric(ipcPerRow, "ipc-B/row")
		b.ReportMetric(heapPerRow/ipcPerRow, "heap/ipc")
		wb.Close()
	}
}

// BenchmarkReplay writes about 1 GB of WAL (APRON_BENCH_WAL_BYTES) in
// writes of 64k rows (APRON_BENCH_WAL_BATCH_ROWS), then times opening the
// buffer (replay: read, check, IPC-decode, validate, buffer) next to only
// reading and IPC-decoding the same files. Target: replay at least 50% as
// fast, and about a second per GB whatever the batches were (issue 14).
func BenchmarkReplay(b *testing.B) {
	// As apron serve runs, unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(DefaultGOGC))
	}
	size := int64(1 << 30)
	if s := os.Getenv("APRON_BENCH_WAL_BYTES"); s != "" {
		size, _ = strconv.ParseInt(s, 10, 64)
	}
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.WALSync = wal.SyncNone
	cfg.MemLimit = 8 << 30
	wb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// APRON_BENCH_WAL_BATCH_ROWS: rows per write (WAL record); issue 14
	// asks for 1,000-row records as small writers make.
	batchRows := 65536
	if s := os.Getenv("APRON_BENCH_WAL_BATCH_ROWS"); s != "" {
		batchRows, _ = strconv.Atoi(s)
	}
	var written int64
	for i := 0; written < size; i++ {
		rec := benchRecord(memory.DefaultAllocator, i*batchRows, batchRows, 1000)
		written += ipcSize(b, rec)
		if _, err := wb.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if err := wb.Close(); err != nil {
		b.Fatal(err)
	}
	walBytes := dirSize(b, filepath.Join(cfg.DataDir, "wal"))

	// Two baselines: arrow-go's IPC reader as anyone would use it (it
	// copies each message out of the payload), and the zero-copy reader
	// replay itself uses.
	decoders := map[string]func([]byte) error{
		"arrow-ipc-reader": func(payload []byte) error {
			e, err := wal.DecodeEntry(payload)
			if err != nil {
				return err
			}
			r, err := ipc.NewReader(bytes.NewReader(e.IPC), ipc.WithAllocator(memory.DefaultAllocator))
			if err != nil {
				return err
			}
			defer r.Release()
			for r.Next() {
			}
			return r.Err()
		},
		"zero-copy": func(payload []byte) error {
			_, rec, err := decodeEntry(payload, memory.DefaultAllocator)
			if err == nil {
				rec.Release()
			}
			return err
		},
	}
	for _, name := range []string{"arrow-ipc-reader", "zero-copy"} {
		decode := decoders[name]
		b.Run("read-and-decode/"+name, func(b *testing.B) {
			b.SetBytes(walBytes)
			for range b.N {
				_, err := wal.Replay(wal.ReplayOptions{Dir: filepath.Join(cfg.DataDir, "wal"), FS: wal.OSFS()},
					func(_ uint64, _ int64, payload []byte) error { return decode(payload) })
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("replay", func(b *testing.B) {
		b.SetBytes(walBytes)
		for range b.N {
			start := time.Now()
			wb, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(start).Seconds(), "startup-s")
			b.StopTimer()
			wb.Close()
			b.StartTimer()
		}
	})
}

func dirSize(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var s int64
	for _, e := range entries {
		fi, _ := e.Info()
		s += fi.Size()
	}
	return s
}

// BenchmarkWrite is the write path without the network: batches of 64k
// rows through Write (normalize, encode for the WAL, append, buffer),
// with the WAL written but not synced. MB/s of IPC input. The host
// column holds 1,000 values, 100,000 (chunks of their own dictionaries,
// and the partition's series ids: series.go), or a new one every row
// (past the series ids' bound).
func BenchmarkWrite(b *testing.B) {
	for _, hosts := range []int{1000, 100_000, 0} {
		name := fmt.Sprintf("hosts=%d", hosts)
		if hosts == 0 {
			name = "hosts=unique"
		}
		b.Run(name, func(b *testing.B) { benchmarkWrite(b, hosts) })
	}
}

func benchmarkWrite(b *testing.B, hosts int) {
	const rows, batches = 65536, 16
	recs := make([]arrow.RecordBatch, batches)
	var size int64
	for i := range recs {
		recs[i] = benchRecord(memory.DefaultAllocator, i*rows, rows, hosts)
		size += ipcSize(b, recs[i])
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.WALSync = wal.SyncNone
	cfg.MemLimit = 64 << 30
	wb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer wb.Close()
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := cputime.Process()
	for range b.N {
		for _, r := range recs {
			if _, err := wb.Write(context.Background(), "db", "cpu", r, catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	// CPU time varies less than wall time on a shared machine: compare
	// builds on this one.
	b.ReportMetric((cputime.Process()-cpu0).Seconds()/(float64(b.N)*float64(size)/1e9), "cpu-s/GB")
}
