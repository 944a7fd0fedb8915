package persist

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

func TestParquetFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rows := genRows(t0.UnixNano(), 1000, 7919) // out of order by host, in order by time
	extra := slices.Clone(rows[600:])
	for i := range extra {
		extra[i].Extra = ptr(int64(i * 3))
	}
	want := append(slices.Clone(rows[:600]), extra...)
	chunks := makeChunks(t, mem, batch{rows: rows[:600]}, batch{rows: extra, extra: true})
	defer releaseChunks(chunks)
	tbl := cpuTable(true)
	var first, second bytes.Buffer
	if len(chunks) < 5 {
		t.Fatalf("%d chunks: the test wants several", len(chunks))
	}
	pf, err := writePartition(&first, tbl, chunks, mem, RowGroupRows, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pf.Rows != 1000 || pf.MinTime != rows[0].Time || pf.MaxTime != rows[999].Time {
		t.Fatalf("file stats %+v", pf)
	}
	if _, err := writePartition(&second, tbl, chunks, mem, RowGroupRows, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatal("the same rows gave different bytes")
	}

	// Rows: all there, sorted by host (nulls last), then time.
	rec := readParquetBytes(t, first.Bytes(), mem)
	got := rowsOf(t, rec)
	rec.Release()
	assertRows(t, got, want)
	sorted := slices.IsSortedFunc(got, func(x, y row) int {
		hx, hy := "\xff\xff", "\xff\xff"
		if x.Host != nil {
			hx = *x.Host
		}
		if y.Host != nil {
			hy = *y.Host
		}
		if c := strings.Compare(hx, hy); c != 0 {
			return c
		}
		return int(x.Time - y.Time)
	})
	if !sorted {
		t.Fatal("rows not sorted by (host, time)")
	}

	// Metadata.
	pr, err := file.NewParquetReader(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	md := pr.MetaData()
	col := md.Schema.Column(0)
	if col.Name() != "time" {
		t.Fatalf("column 0 is %q", col.Name())
	}
	ts, ok := col.LogicalType().(schema.TimestampLogicalType)
	if !ok || ts.TimeUnit() != schema.TimeUnitNanos || ts.IsAdjustedToUTC() {
		t.Fatalf("time logical type %s, want Timestamp(isAdjustedToUTC=false, NANOS)", col.LogicalType())
	}
	if hs := md.Schema.Column(1); hs.Name() != "host" || !hs.LogicalType().Equals(schema.StringLogicalType{}) {
		t.Fatalf("column 1: %s %s", hs.Name(), hs.LogicalType())
	}
	if md.NumRows != 1000 || md.NumRowGroups() != 1 {
		t.Fatalf("%d rows in %d row groups", md.NumRows, md.NumRowGroups())
	}
	rg := md.RowGroup(0)
	for i := range rg.NumColumns() {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Compression() != compress.Codecs.Zstd {
			t.Errorf("column %d compressed with %s", i, cc.Compression())
		}
		if ok, err := cc.StatsSet(); !ok || err != nil {
			t.Errorf("column %d: no statistics (%v)", i, err)
		}
	}
	cc, _ := rg.ColumnChunk(0)
	st, _ := cc.Statistics()
	if tsStats, ok := st.(interface{ Min() int64 }); !ok || tsStats.Min() != rows[0].Time {
		t.Errorf("time statistics %v", st)
	}
	if sc := rg.SortingColumns(); len(sc) != 2 || sc[0].ColumnIdx != 1 || sc[1].ColumnIdx != 0 {
		t.Errorf("sorting columns %+v", sc)
	}
}

// TestPermutationWidths: the 4-byte permutation and the 8-byte one (taken
// by partitions too large for 4 bytes) give the same order.
func TestPermutationWidths(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	chunks := makeChunks(t, mem, batch{rows: genRows(t0.UnixNano(), 1000, 7919)}, batch{rows: genRows(t0.UnixNano()+3, 555, 13)})
	defer releaseChunks(chunks)
	src, err := newPartSource(parquetSchema(cpuTable(false).ArrowSchema()), chunks, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer src.release()
	small := src.sortedPermutation(3)
	if small.small == nil || small.shift != 7 { // chunkRows 100: 7 bits a row
		t.Fatalf("permutation of %d chunks of at most 100 rows: shift %d, 4-byte %v", len(chunks), small.shift, small.small != nil)
	}
	large := permutation{large: sortRows[uint64](src, 32, 1), shift: 32}
	got := small.expand(0, small.len(), nil)
	want := large.expand(0, large.len(), nil)
	if !slices.Equal(got, want) {
		t.Fatalf("4-byte and 8-byte permutations differ")
	}
	if len(got) != 1555 {
		t.Fatalf("%d rows in the permutation, want 1555", len(got))
	}
}
