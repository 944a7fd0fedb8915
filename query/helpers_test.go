//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/offheap"
	"github.com/apron-db/apron/wal"
)

// env is a write buffer and an engine over it, on a checked allocator.
type env struct {
	t   testing.TB
	mem *memory.CheckedAllocator
	wb  *buffer.WriteBuffer
	e   *Engine
}

// chunkAllocator is a buffer's Config.ChunkAllocator for a test: sealed
// chunks in memory maps of their own, so that a scan that reads one after
// its last Release faults instead of reading stale memory, and checked to
// be all released once the test's other cleanups (the buffer's Close)
// have run.
func chunkAllocator(t testing.TB) memory.Allocator {
	mem := memory.NewCheckedAllocator(offheap.NewMapAll())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	bcfg := buffer.DefaultConfig()
	bcfg.DataDir = t.TempDir()
	bcfg.Allocator = mem
	bcfg.ChunkAllocator = chunkAllocator(t)
	bcfg.MemLimit = 8 << 30
	bcfg.WALSync = wal.SyncNone
	wb, err := buffer.Open(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(wb, cfg)
	if err != nil {
		wb.Close()
		t.Fatal(err)
	}
	v := &env{t: t, mem: mem, wb: wb, e: e}
	t.Cleanup(v.close)
	return v
}

func (v *env) close() {
	if v.e != nil {
		st := v.e.Stats()
		if st.Active != 0 {
			v.t.Errorf("%d connections still active at the end", st.Active)
		}
		if err := v.e.Close(); err != nil {
			v.t.Error(err)
		}
		v.e = nil
	}
	if v.wb != nil {
		if err := v.wb.Close(); err != nil {
			v.t.Error(err)
		}
		v.wb = nil
		v.mem.AssertSize(v.t, 0)
	}
}

// col is one column of a batch to write: values are int64, float64,
// string, bool, time.Time or nil.
type col struct {
	name string
	typ  arrow.DataType
	vals []any
}

var tsNs = &arrow.TimestampType{Unit: arrow.Nanosecond}

// batch builds a record batch from columns; times are int64 ns.
func batch(mem memory.Allocator, cols ...col) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.name != "time"}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, c := range cols {
		fb := b.Field(i)
		for _, v := range c.vals {
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(v.(int64)))
			case *array.Int64Builder:
				fb.Append(v.(int64))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.BinaryBuilder:
				fb.Append(v.([]byte))
			case *array.BooleanBuilder:
				fb.Append(v.(bool))
			default:
				panic(fmt.Sprintf("no builder case for %T", fb))
			}
		}
	}
	return b.NewRecordBatch()
}

func (v *env) write(db, table string, rec arrow.RecordBatch) {
	v.t.Helper()
	defer rec.Release()
	if _, err := v.wb.Write(context.Background(), db, table, rec, catalog.WriteOptions{}); err != nil {
		v.t.Fatal(err)
	}
}

// query runs sql and returns its rows canonicalized.
func (v *env) query(sql, db string) []string {
	v.t.Helper()
	rows, _, err := collect(v.e.Query(context.Background(), sql, db))
	if err != nil {
		v.t.Fatalf("%s: %v", sql, err)
	}
	return rows
}

// collect reads a reader to the end into canonical row strings.
func collect(r array.RecordReader, err error) ([]string, *arrow.Schema, error) {
	if err != nil {
		return nil, nil, err
	}
	defer r.Release()
	var rows []string
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, rowString(rec, i))
		}
	}
	return rows, r.Schema(), r.Err()
}

func rowString(rec arrow.RecordBatch, i int) string {
	parts := make([]string, rec.NumCols())
	for j, c := range rec.Columns() {
		parts[j] = valueString(c, i)
	}
	return strings.Join(parts, "|")
}

// valueString canonicalizes a value: floats to 10 significant digits, so
// that summation order does not matter.
func valueString(c arrow.Array, i int) string {
	if c.IsNull(i) {
		return "NULL"
	}
	switch c := c.(type) {
	case *array.Float64:
		return floatString(c.Value(i))
	case *array.Float32:
		return floatString(float64(c.Value(i)))
	case *array.Timestamp:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Decimal128:
		return floatString(c.Value(i).ToFloat64(c.DataType().(*arrow.Decimal128Type).Scale))
	}
	// Values may point into the batch's memory: copy them.
	return strings.Clone(c.ValueStr(i))
}

func floatString(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', 10, 64)
}

func sorted(rows []string) []string {
	out := append([]string(nil), rows...)
	sort.Strings(out)
	return out
}

func equalRows(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d\n got: %.10q\nwant: %.10q", what, len(got), len(want), got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: row %d = %q, want %q", what, i, got[i], want[i])
			return
		}
	}
}

var catalogOpts = catalog.WriteOptions{}

// base is a fixed start time for test data.
var base = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// distinctTimes returns n times drawn from [start, start+span), none of
// them in seen (which it adds them to), as []any for col: tests whose
// answers must be one need no two rows of a time.
func distinctTimes(rng *rand.Rand, seen map[int64]bool, start, span int64, n int) []any {
	ts := make([]any, 0, n)
	for len(ts) < n {
		v := start + rng.Int64N(span)
		if !seen[v] {
			seen[v] = true
			ts = append(ts, v)
		}
	}
	return ts
}
