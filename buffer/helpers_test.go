package buffer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/offheap"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func testConfig(t *testing.T, mem memory.Allocator) Config {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Allocator = mem
	// Sealed chunks in maps of their own: a use after the last Release
	// faults, and each must be released by the end of the test.
	chunkMem := memory.NewCheckedAllocator(offheap.NewMapAll())
	t.Cleanup(func() { chunkMem.AssertSize(t, 0) })
	cfg.ChunkAllocator = chunkMem
	cfg.ChunkRows = 100
	cfg.CompactionInterval = 0 // compaction tests turn it on
	return cfg
}

// walBytes is the size of the WAL files under dataDir.
func walBytes(dataDir string) int64 {
	var s int64
	entries, _ := os.ReadDir(filepath.Join(dataDir, "wal"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			s += fi.Size()
		}
	}
	return s
}

func openBuffer(t *testing.T, cfg Config) *WriteBuffer {
	t.Helper()
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// row is one row of the test table cpu(time, host, usage, ok).
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

var cpuSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
	{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
}, nil)

var cpuExtraSchema = arrow.NewSchema(append(cpuSchema.Fields(),
	arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)

// makeRecord builds a record of rows in schema (cpuSchema or cpuExtraSchema).
func makeRecord(mem memory.Allocator, schema *arrow.Schema, rows []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Time))
		if r.Host == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*r.Host)
		}
		if r.Usage == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(*r.Usage)
		}
		if r.OK == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.BooleanBuilder).Append(*r.OK)
		}
		if schema.NumFields() > 4 {
			if r.Extra == nil {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*array.Int64Builder).Append(*r.Extra)
			}
		}
	}
	return b.NewRecordBatch()
}

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

func write(t *testing.T, b *WriteBuffer, table string, schema *arrow.Schema, rows []row) WriteResult {
	t.Helper()
	mem := memory.NewGoAllocator()
	rec := makeRecord(mem, schema, rows)
	defer rec.Release()
	res, err := b.Write(context.Background(), "db", table, rec, catalog.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// readRows reads every buffered row of db.table, in the table's schema,
// sorted by String().
func readRows(t *testing.T, b *WriteBuffer, table string) []row {
	t.Helper()
	tbl, ok := b.Catalog().Table("db", table)
	if !ok {
		t.Fatalf("table %q not in catalog", table)
	}
	schema := tbl.ArrowSchema()
	var out []row
	for _, seg := range b.Segments() {
		for _, c := range seg.Snapshot("db", table) {
			rec, err := Project(c, schema, b.Allocator())
			c.Rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rowsOf(t, rec)...)
			rec.Release()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
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
