package buffer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestViewTypesStoredPlain: string_view, binary_view and
// dictionary<string_view> columns (what polars sends) are written as
// string and binary, values and nulls intact.
func TestViewTypesStoredPlain(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	defer b.Close()

	sv := array.NewStringViewBuilder(mem)
	bv := array.NewBinaryViewBuilder(mem)
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond})
	long := strings.Repeat("a long value, not inline ", 3)
	for i, s := range []string{"short", long, ""} {
		tb.Append(arrow.Timestamp(t0.UnixNano() + int64(i)))
		if s == "" {
			sv.AppendNull()
			bv.AppendNull()
			continue
		}
		sv.Append(s)
		bv.Append([]byte(s))
	}
	dictValues := array.NewStringViewBuilder(mem)
	dictValues.AppendValues([]string{"red", long}, nil)
	values := dictValues.NewArray()
	dictValues.Release()
	idxb := array.NewUint32Builder(mem)
	idxb.AppendValues([]uint32{1, 0, 1}, nil)
	indices := idxb.NewArray()
	idxb.Release()
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint32, ValueType: arrow.BinaryTypes.StringView}
	cols := []arrow.Array{tb.NewArray(), sv.NewArray(), bv.NewArray(), array.NewDictionaryArray(dictType, indices, values)}
	values.Release()
	indices.Release()
	tb.Release()
	sv.Release()
	bv.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: cols[0].DataType()},
		{Name: "s", Type: arrow.BinaryTypes.StringView, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: "cat", Type: dictType}}, nil)
	rec := array.NewRecordBatch(schema, cols, 3)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	if _, err := b.Write(context.Background(), "db", "v", rec, catalog.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tbl, _ := b.Catalog().Table("db", "v")
	for _, c := range tbl.Columns[1:] {
		want := arrow.BinaryTypes.String
		if c.Name == "b" {
			want = arrow.BinaryTypes.Binary
		}
		if !arrow.TypeEqual(c.Type, want) {
			t.Errorf("column %s stored as %s, want %s", c.Name, c.Type, want)
		}
	}
	var got []string
	for _, seg := range b.Segments() {
		for _, c := range seg.Snapshot("db", "v") {
			p, err := Project(c, tbl.ArrowSchema(), b.Allocator())
			c.Rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < int(p.NumCols()); i++ {
				got = append(got, p.Column(i).String())
			}
			p.Release()
		}
	}
	want := []string{`["short" "` + long + `" (null)]`, `["short" "` + long + `" (null)]`, `["` + long + `" "red" "` + long + `"]`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("read back:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMalformedViewRefused: a view pointing past its data buffer is
// refused before anything is written.
func TestMalformedViewRefused(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	defer b.Close()
	sv := array.NewStringViewBuilder(mem)
	sv.Append(strings.Repeat("x", 40))
	good := sv.NewArray()
	sv.Release()
	defer good.Release()
	// The same view over a data buffer cut short.
	d := good.Data()
	short := memory.NewBufferBytes(d.Buffers()[2].Bytes()[:10])
	badData := array.NewData(arrow.BinaryTypes.StringView, 1, []*memory.Buffer{nil, d.Buffers()[1], short}, nil, 0, 0)
	defer badData.Release()
	bad := array.MakeFromData(badData)
	defer bad.Release()
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond})
	tb.Append(arrow.Timestamp(t0.UnixNano()))
	ts := tb.NewArray()
	tb.Release()
	defer ts.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "time", Type: ts.DataType()}, {Name: "s", Type: arrow.BinaryTypes.StringView}}, nil),
		[]arrow.Array{ts, bad}, 1)
	defer rec.Release()
	v := b.Catalog().Version()
	_, err := b.Write(context.Background(), "db", "v", rec, catalog.WriteOptions{})
	if !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("malformed view: %v, want ErrInvalidBatch", err)
	}
	if b.Catalog().Version() != v {
		t.Fatal("a refused batch changed the catalog")
	}
}

// TestChunkStats: a View's ChunkStats are the rows and time ranges of the
// chunks Chunks returns (sealed ones and the open one, over two days and
// segments), and nothing for a dropped table's segment.
func TestChunkStats(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	defer b.Close()
	for i := range 5 {
		write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+int64(i)*40_000_000_000_000, 257, 1_000_003))
		if i == 2 {
			roll(t, b)
		}
	}
	v := b.View()
	defer v.Release()
	var want, got []ChunkStat
	for _, s := range v.Buffered {
		for _, c := range v.Chunks(s, "db", "cpu") {
			want = append(want, ChunkStat{Rows: c.Rec.NumRows(), MinTime: c.MinTime, MaxTime: c.MaxTime})
			c.Rec.Release()
		}
		got = v.ChunkStats(s, "db", "cpu", got)
	}
	sortStats := func(s []ChunkStat) {
		slices.SortFunc(s, func(a, b ChunkStat) int {
			return cmp.Or(cmp.Compare(a.MinTime, b.MinTime), cmp.Compare(a.MaxTime, b.MaxTime), cmp.Compare(a.Rows, b.Rows))
		})
	}
	sortStats(want)
	sortStats(got)
	if len(want) < 4 || !slices.Equal(got, want) {
		t.Fatalf("ChunkStats %v, want %v (the chunks')", got, want)
	}
}
