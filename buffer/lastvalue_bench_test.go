package buffer

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/cputime"
	"github.com/apron-db/apron/wal"
)

// BenchmarkWriteLastValue is BenchmarkWrite's bulk ingest (64k-row
// batches, 1000 hosts × 5 regions) into a table without a last-value
// cache and into one with a cache on (host, region), in the same run:
// the write-path cost of keeping the cache. Run with -count to
// interleave the two.
func BenchmarkWriteLastValue(b *testing.B) {
	const rows, batches = 65536, 16
	recs := make([]arrow.RecordBatch, batches)
	var size int64
	for i := range recs {
		recs[i] = benchRecord(memory.DefaultAllocator, i*rows, rows, 1000)
		size += ipcSize(b, recs[i])
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, side := range []string{"none", "cache"} {
		b.Run(side, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.DataDir = b.TempDir()
			cfg.WALSync = wal.SyncNone
			cfg.MemLimit = 64 << 30
			wb, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer wb.Close()
			if _, err := wb.Write(context.Background(), "db", "cpu", recs[0], catalog.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			if side == "cache" {
				if _, _, err := wb.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu"}, false); err != nil {
					b.Fatal(err)
				}
			}
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
			b.ReportMetric(float64(b.N*rows*batches)/b.Elapsed().Seconds(), "rows/s")
			// CPU time varies less than wall time on a shared machine.
			b.ReportMetric((cputime.Process()-cpu0).Seconds()/(float64(b.N)*float64(size)/1e9), "cpu-s/GB")
			if c, ok := wb.LastValueCache("db", "cpu"); ok {
				if _, n, _ := c.Info(); n != 1000 {
					b.Fatalf("the cache holds %d rows, want 1000", n)
				}
			}
		})
	}
}
