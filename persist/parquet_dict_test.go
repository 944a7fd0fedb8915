package persist

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// TestParquetDictionaryBySample: a numeric column whose values all differ
// is written without a dictionary, one whose values repeat with one, and
// both read back the same rows.
func TestParquetDictionaryBySample(t *testing.T) {
	for _, c := range []struct {
		name          string
		usage         func(i int) float64
		wantUsageDict bool
		extra         func(i int) int64
		wantExtraDict bool
	}{
		{name: "unique", usage: func(i int) float64 { return float64(i) / 4 }, extra: func(i int) int64 { return int64(i) * 3 }},
		{name: "repeating", usage: func(i int) float64 { return float64(i%10) / 4 }, wantUsageDict: true,
			extra: func(i int) int64 { return int64(i % 300) }, wantExtraDict: true},
		{name: "pairs", usage: func(i int) float64 { return float64(i / 2) }, wantUsageDict: true, // half distinct
			extra: func(i int) int64 { return int64(i) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			rows := genRows(t0.UnixNano(), 3000, 1000)
			for i := range rows {
				rows[i].Usage = ptr(c.usage(i))
				rows[i].Extra = ptr(c.extra(i))
			}
			dict := writeBack(t, mem, rows, (*metadata.ColumnChunkMetaData).HasDictionaryPage)
			want := map[string]bool{"time": false, "host": true, "usage": c.wantUsageDict, "ok": false, "extra": c.wantExtraDict}
			for name, w := range want {
				if dict[name] != w {
					t.Errorf("column %s has a dictionary: %v, want %v (all: %v)", name, dict[name], w, dict)
				}
			}
		})
	}
}

// writeBack writes rows as one partition, checks that they read back the
// same, and returns of(column chunk) for each column of the file's first
// row group, by name.
func writeBack[T any](t *testing.T, mem memory.Allocator, rows []row, of func(*metadata.ColumnChunkMetaData) T) map[string]T {
	t.Helper()
	chunks := makeChunks(t, mem, batch{rows: rows, extra: true})
	defer releaseChunks(chunks)
	var buf bytes.Buffer
	if _, err := writePartition(&buf, cpuTable(true), chunks, mem, RowGroupRows, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec := readParquetBytes(t, buf.Bytes(), mem)
	got := rowsOf(t, rec)
	rec.Release()
	assertRows(t, got, rows)

	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	out := map[string]T{}
	rg := pf.MetaData().RowGroup(0)
	for i := 0; i < rg.NumColumns(); i++ {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		out[pf.MetaData().Schema.Column(i).Name()] = of(cc)
	}
	return out
}
