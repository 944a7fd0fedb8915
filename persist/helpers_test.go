package persist

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// row is one row of the test table cpu(time, host, usage, ok, extra).
type row struct {
	Time  int64
	Host  *string
	Usage *float64
	OK    *bool
	Extra *int64
}

func (r row) String() string {
	s := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	f := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	b := func(p *bool) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	i := func(p *int64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%d/%s/%s/%s/%s", r.Time, s(r.Host), f(r.Usage), b(r.OK), i(r.Extra))
}

func ptr[T any](v T) *T { return &v }

func genRows(start int64, n int, step int64) []row {
	out := make([]row, n)
	for i := range out {
		r := row{Time: start + int64(i)*step}
		if i%7 != 3 {
			r.Host = ptr(fmt.Sprintf("host-%d", i%13))
		}
		if i%5 != 1 {
			r.Usage = ptr(float64(i) / 4)
		}
		if i%3 != 2 {
			r.OK = ptr(i%2 == 0)
		}
		out[i] = r
	}
	return out
}

// cpuTable is the catalog's table db.cpu: time, host, usage, ok, and with
// extra, extra.
func cpuTable(extra bool) *catalog.Table {
	cols := []catalog.Column{
		{Name: "time", Type: catalog.TimeType(), ID: 0},
		{Name: "host", Type: arrow.BinaryTypes.String, ID: 1},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64, ID: 2},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, ID: 3},
	}
	if extra {
		cols = append(cols, catalog.Column{Name: "extra", Type: arrow.PrimitiveTypes.Int64, ID: 4})
	}
	return &catalog.Table{Database: "db", Name: "cpu", ID: 1, Columns: cols}
}

// chunkRows is the rows of a chunk in these tests.
const chunkRows = 100

// batch is rows written to the test table at once; with extra, they have
// the column extra.
type batch struct {
	rows  []row
	extra bool
}

// makeChunks returns the chunks that the buffer holds for batches of rows
// of one day written one after the other: chunkRows rows each, the last
// one short; a chunk has column extra when one of its rows came with it
// (null in the others); hosts are dictionary<int32, utf8> over one
// dictionary in first-seen order, of which each chunk has the prefix it
// has seen, in the same memory.
func makeChunks(t testing.TB, mem memory.Allocator, batches ...batch) []Chunk {
	t.Helper()
	var all []row
	var extra []bool
	for _, b := range batches {
		all = append(all, b.rows...)
		for range b.rows {
			extra = append(extra, b.extra)
		}
	}
	var hosts []string
	index := map[string]int32{}
	seen := make([]int, len(all)) // dictionary length once row i is in
	for i, r := range all {
		if r.Host != nil {
			if _, ok := index[*r.Host]; !ok {
				index[*r.Host] = int32(len(hosts))
				hosts = append(hosts, *r.Host)
			}
		}
		seen[i] = len(hosts)
	}
	sb := array.NewStringBuilder(mem)
	sb.AppendValues(hosts, nil)
	dict := sb.NewArray()
	sb.Release()
	defer dict.Release()

	var out []Chunk
	for start := 0; start < len(all); start += chunkRows {
		end := min(start+chunkRows, len(all))
		rows := all[start:end]
		fields := []arrow.Field{
			{Name: "time", Type: catalog.TimeType()},
			{Name: "host", Type: dictType, Nullable: true},
			{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		}
		withExtra := slices.Contains(extra[start:end], true)
		if withExtra {
			fields = append(fields, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
		}
		tb := array.NewTimestampBuilder(mem, catalog.TimeType())
		ib := array.NewInt32Builder(mem)
		ub := array.NewFloat64Builder(mem)
		ob := array.NewBooleanBuilder(mem)
		eb := array.NewInt64Builder(mem)
		c := Chunk{MinTime: rows[0].Time, MaxTime: rows[0].Time}
		for _, r := range rows {
			c.MinTime, c.MaxTime = min(c.MinTime, r.Time), max(c.MaxTime, r.Time)
			tb.Append(arrow.Timestamp(r.Time))
			if r.Host == nil {
				ib.AppendNull()
			} else {
				ib.Append(index[*r.Host])
			}
			if r.Usage == nil {
				ub.AppendNull()
			} else {
				ub.Append(*r.Usage)
			}
			if r.OK == nil {
				ob.AppendNull()
			} else {
				ob.Append(*r.OK)
			}
			if r.Extra == nil {
				eb.AppendNull()
			} else {
				eb.Append(*r.Extra)
			}
		}
		idx := ib.NewArray()
		prefix := array.NewSlice(dict, 0, int64(seen[end-1]))
		cols := []arrow.Array{tb.NewArray(), array.NewDictionaryArray(dictType, idx, prefix), ub.NewArray(), ob.NewArray()}
		idx.Release()
		prefix.Release()
		if withExtra {
			cols = append(cols, eb.NewArray())
		}
		c.Rec = array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
		for _, a := range cols {
			a.Release()
		}
		for _, b := range []array.Builder{tb, ib, ub, ob, eb} {
			b.Release()
		}
		out = append(out, c)
	}
	return out
}

// readParquetBytes reads a Parquet file into one record batch.
func readParquetBytes(t testing.TB, data []byte, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var recs []arrow.RecordBatch
	for tr.Next() {
		r := tr.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if len(recs) == 1 {
		return recs[0]
	}
	// Concatenate (rare in tests: files under a row group).
	out := concatRecords(t, tbl.Schema(), recs, mem)
	for _, r := range recs {
		r.Release()
	}
	return out
}

func concatRecords(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		var err error
		if len(parts) == 0 {
			cols[i] = array.MakeArrayOfNull(mem, schema.Field(i).Type, 0)
			continue
		}
		if cols[i], err = array.Concatenate(parts, mem); err != nil {
			t.Fatal(err)
		}
	}
	out := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	return out
}

func rowsOf(t *testing.T, rec arrow.RecordBatch) []row {
	t.Helper()
	out := make([]row, rec.NumRows())
	idx := func(name string) int {
		i := rec.Schema().FieldIndices(name)
		if len(i) == 0 {
			return -1
		}
		return i[0]
	}
	for i := range out {
		out[i].Time = int64(rec.Column(idx("time")).(*array.Timestamp).Value(i))
		if c := idx("host"); c >= 0 && rec.Column(c).IsValid(i) {
			out[i].Host = ptr(rec.Column(c).(*array.String).Value(i))
		}
		if c := idx("usage"); c >= 0 && rec.Column(c).IsValid(i) {
			out[i].Usage = ptr(rec.Column(c).(*array.Float64).Value(i))
		}
		if c := idx("ok"); c >= 0 && rec.Column(c).IsValid(i) {
			out[i].OK = ptr(rec.Column(c).(*array.Boolean).Value(i))
		}
		if c := idx("extra"); c >= 0 && rec.Column(c).IsValid(i) {
			out[i].Extra = ptr(rec.Column(c).(*array.Int64).Value(i))
		}
	}
	return out
}

func sortedStrings(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}

func assertRows(t *testing.T, got []row, want []row) {
	t.Helper()
	g, w := sortedStrings(got), sortedStrings(want)
	if len(g) != len(w) {
		t.Fatalf("got %d rows, want %d", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("row %d: got %s, want %s", i, g[i], w[i])
		}
	}
}
