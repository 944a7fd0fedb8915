//go:build duckdb_arrow

package query

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/acklat"
)

// BenchmarkAckWhileQuerying measures the acknowledgement latency of one
// writer of 1,000-row batches into the table a dashboard reads, first
// with nothing else running, then while one client runs an aggregate
// over the table (APRON_BENCH_ROWS rows, default 2M: a 1-minute average
// per host) back to back. As apron serve runs: the WAL fsynced, Go with
// one P more than the cores, and the query engine's extra Ps while
// queries run (cmd/apron/maxprocs.go). Writes are paced at one every 2 ms
// at most. It reports p50, p99, p99.9 and max of both phases in ms, and
// the aggregates run meanwhile. Target (issue 14): p99 ≤ 5 ms at all
// times. BenchmarkAckWhilePersisting (buffer) is the same writer while a
// segment persists.
func BenchmarkAckWhileQuerying(b *testing.B) {
	n := benchRows(b)
	cores := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cores + 1))
	cfg := buffer.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.MemLimit = 8 << 30
	wb, err := buffer.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer wb.Close()
	e, err := Open(wb, Config{ExtraProcs: cores - 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	mem := memory.NewGoAllocator()
	ctx := context.Background()
	for off := 0; off < n; off += 100_000 {
		rec := cpuBenchBatch(mem, off, min(100_000, n-off))
		if _, err := wb.Write(ctx, "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	// The writer's batches, built once: 64 of 1,000 rows after the table's.
	var batches []arrow.RecordBatch
	for off := n; len(batches) < 64; off += 1000 {
		batches = append(batches, cpuBenchBatch(mem, off, 1000))
	}
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	pace := acklat.Paced{Every: 2 * time.Millisecond}
	writes := func(count int) []time.Duration {
		pace.Restart()
		lat := make([]time.Duration, count)
		for i := range lat {
			lat[i] = pace.Time(func() {
				if _, err := wb.Write(ctx, "db", "cpu", batches[i%len(batches)], catalog.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		}
		return lat
	}
	const agg = "SELECT host, time_bucket(INTERVAL 1 MINUTE, time) AS m, avg(usage) FROM db.cpu GROUP BY host, m"
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		idle := writes(2000)
		// The aggregate back to back, on its own goroutine, while the
		// writer writes as many batches again.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var queries int
		var qerr error
		var qtime time.Duration
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				r, err := e.Query(ctx, agg, "")
				if err == nil {
					for r.Next() {
					}
					err = r.Err()
					r.Release()
				}
				if err != nil {
					qerr = err
					return
				}
				queries++
				qtime += time.Since(start)
			}
		})
		busy := writes(2000)
		close(stop)
		wg.Wait()
		if qerr != nil {
			b.Fatal(qerr)
		}
		if queries == 0 {
			b.Fatal("no aggregate ran while the writer wrote")
		}
		b.Logf("%d aggregates over %d rows meanwhile, %.1f ms each", queries, n, float64(qtime)/float64(queries)/1e6)
		acklat.Report(b, "idle", idle)
		acklat.Report(b, "querying", busy)
	}
}
