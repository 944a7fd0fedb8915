package persist

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// TestParquetRawBySample: a column without a dictionary whose values zstd
// cannot shrink (random mantissas) is written uncompressed, one that
// compresses (a counter, a measurement of few digits) with zstd, and the
// rows read back the same either way.
func TestParquetRawBySample(t *testing.T) {
	for _, c := range []struct {
		name         string
		rows         int
		usage        func(r *rand.Rand, i int) float64
		wantUsageRaw bool
		extra        func(i int) int64
	}{
		{name: "random", rows: 60000, usage: func(r *rand.Rand, _ int) float64 { return r.Float64() * 60 }, wantUsageRaw: true,
			extra: func(i int) int64 { return int64(i) * 3 }},
		{name: "random_small_file", rows: 3000, usage: func(r *rand.Rand, _ int) float64 { return r.Float64() * 60 }, wantUsageRaw: true,
			extra: func(i int) int64 { return int64(i) }},
		{name: "few_digits", rows: 60000, usage: func(r *rand.Rand, _ int) float64 { return float64(r.IntN(100000)) / 100 },
			extra: func(i int) int64 { return int64(i) * 1000 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			r := rand.New(rand.NewPCG(1, 2))
			rows := genRows(t0.UnixNano(), c.rows, 1000)
			for i := range rows {
				rows[i].Usage = ptr(c.usage(r, i))
				rows[i].Extra = ptr(c.extra(i))
			}
			raw := writeBack(t, mem, rows, func(cc *metadata.ColumnChunkMetaData) bool {
				return cc.Compression() == compress.Codecs.Uncompressed
			})
			want := map[string]bool{"time": false, "host": false, "usage": c.wantUsageRaw, "ok": false, "extra": false}
			for name, w := range want {
				if raw[name] != w {
					t.Errorf("column %s uncompressed: %v, want %v (all: %v)", name, raw[name], w, raw)
				}
			}
		})
	}
}
