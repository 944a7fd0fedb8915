//go:build duckdb_arrow

package integration

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// refDuck is a plain in-process DuckDB (the low-level bindings, in the test
// process) holding data in native tables: the reference Apron's SQL results
// are compared with, and the baseline of the SQL benchmarks.
type refDuck struct {
	tb testing.TB
	db duck.Database
	c  duck.Connection
}

func newRefDuck(tb testing.TB) *refDuck {
	tb.Helper()
	r := &refDuck{tb: tb}
	if duck.Open(":memory:", &r.db) == duck.StateError {
		tb.Fatal("opening the reference DuckDB failed")
	}
	if duck.Connect(r.db, &r.c) == duck.StateError {
		duck.Close(&r.db)
		tb.Fatal("connecting to the reference DuckDB failed")
	}
	tb.Cleanup(func() {
		duck.Disconnect(&r.c)
		duck.Close(&r.db)
	})
	return r
}

// exec runs statements that return nothing of interest.
func (r *refDuck) exec(sql string) {
	r.tb.Helper()
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.Query(r.c, sql, &res) == duck.StateError {
		r.tb.Fatalf("reference: %s: %s", sql, duck.ResultError(&res))
	}
}

// refVectorSize is DuckDB's STANDARD_VECTOR_SIZE: the most rows of one
// data chunk.
const refVectorSize = 2048

// append appends rec's rows to schema.table by column name; the table's
// other columns get NULL.
func (r *refDuck) append(schema, table string, rec arrow.RecordBatch) {
	r.tb.Helper()
	var app duck.Appender
	if duck.AppenderCreate(r.c, schema, table, &app) == duck.StateError {
		r.tb.Fatalf("reference appender: %s", duck.AppenderError(app))
	}
	defer duck.AppenderDestroy(&app)
	for _, f := range rec.Schema().Fields() {
		if duck.AppenderAddColumn(app, f.Name) == duck.StateError {
			r.tb.Fatalf("reference appender column %s: %s", f.Name, duck.AppenderError(app))
		}
	}
	conv, ed := duck.SchemaFromArrow(r.c, rec.Schema())
	defer duck.DestroyArrowConvertedSchema(&conv)
	if err := refErrorData(ed); err != nil {
		r.tb.Fatal(err)
	}
	for off := int64(0); off < rec.NumRows(); off += refVectorSize {
		s := rec.NewSlice(off, min(off+refVectorSize, rec.NumRows()))
		dc, ed := duck.DataChunkFromArrow(r.c, s, conv)
		s.Release()
		if err := refErrorData(ed); err != nil {
			r.tb.Fatal(err)
		}
		if duck.AppendDataChunk(app, dc) == duck.StateError {
			r.tb.Fatalf("reference append: %s", duck.AppenderError(app))
		}
		duck.DestroyDataChunk(&dc)
	}
	if duck.AppenderClose(app) == duck.StateError {
		r.tb.Fatalf("reference appender close: %s", duck.AppenderError(app))
	}
}

func refErrorData(ed duck.ErrorData) error {
	defer duck.DestroyErrorData(&ed)
	if ed.Ptr == nil || !duck.ErrorDataHasError(ed) {
		return nil
	}
	return errors.New(duck.ErrorDataMessage(ed))
}

// query runs sql as a streaming query whose chunks come out as Arrow
// record batches, the way Apron's engine reads DuckDB's results.
func (r *refDuck) query(sql string) (array.RecordReader, error) {
	rd := &refReader{}
	rd.refs.Store(1)
	if duck.Prepare(r.c, sql, &rd.stmt) == duck.StateError {
		err := fmt.Errorf("reference: prepare %s: %s", sql, duck.PrepareError(rd.stmt))
		rd.finish()
		return nil, err
	}
	if duck.PendingPreparedStreaming(rd.stmt, &rd.pending) == duck.StateError {
		err := fmt.Errorf("reference: %s: %s", sql, duck.PendingError(rd.pending))
		rd.finish()
		return nil, err
	}
	if duck.ExecutePending(rd.pending, &rd.res) == duck.StateError {
		err := fmt.Errorf("reference: %s: %s", sql, duck.ResultError(&rd.res))
		rd.finish()
		return nil, err
	}
	rd.opts = duck.ResultGetArrowOptions(&rd.res)
	n := duck.ColumnCount(&rd.res)
	names := make([]string, n)
	types := make([]duck.LogicalType, n)
	for i := range n {
		names[i] = duck.ColumnName(&rd.res, i)
		types[i] = duck.ColumnLogicalType(&rd.res, i)
	}
	sc, ed := duck.NewArrowSchema(rd.opts, types, names)
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	if err := refErrorData(ed); err != nil {
		rd.finish()
		return nil, fmt.Errorf("reference: result schema of %s: %w", sql, err)
	}
	rd.schema = sc
	return rd, nil
}

// refReader is an array.RecordReader over a DuckDB streaming result.
type refReader struct {
	refs    atomic.Int64
	schema  *arrow.Schema
	stmt    duck.PreparedStatement
	pending duck.PendingResult
	res     duck.Result
	opts    duck.ArrowOptions
	cur     arrow.RecordBatch
	err     error
	done    bool
}

func (r *refReader) finish() {
	if r.done {
		return
	}
	r.done = true
	if r.res != (duck.Result{}) {
		duck.DestroyResult(&r.res)
	}
	duck.DestroyArrowOptions(&r.opts)
	duck.DestroyPending(&r.pending)
	duck.DestroyPrepare(&r.stmt)
}

func (r *refReader) Retain() { r.refs.Add(1) }
func (r *refReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.finish()
}
func (r *refReader) Schema() *arrow.Schema          { return r.schema }
func (r *refReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *refReader) Record() arrow.RecordBatch      { return r.cur }
func (r *refReader) Err() error                     { return r.err }

func (r *refReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done {
		return false
	}
	for {
		chunk := duck.FetchChunk(r.res)
		if chunk.Ptr == nil {
			if msg := duck.ResultError(&r.res); msg != "" {
				r.err = errors.New(msg)
			}
			r.finish()
			return false
		}
		if duck.DataChunkGetSize(chunk) == 0 {
			duck.DestroyDataChunk(&chunk)
			continue
		}
		rec, ed := duck.DataChunkToArrowArray(r.opts, r.schema, chunk)
		duck.DestroyDataChunk(&chunk)
		if err := refErrorData(ed); err != nil {
			r.err = err
			r.finish()
			return false
		}
		r.cur = rec
		return true
	}
}

// ---- canonical results ----

// canonRow is one result row canonicalized: its fields, and a key to sort
// by in which floats have only 6 significant digits (so that two sides
// whose floats differ in the last bits sort alike).
type canonRow struct {
	key    string
	fields []string
}

func (r canonRow) String() string { return strings.Join(r.fields, "|") }

// canonResult reads rdr to the end (and releases it) into its schema's
// names and types and its canonical rows.
func canonResult(rdr array.RecordReader) (schema string, rows []canonRow, err error) {
	defer rdr.Release()
	schema = schemaString(rdr.Schema())
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := canonRow{fields: make([]string, rec.NumCols())}
			keys := make([]string, rec.NumCols())
			for j, c := range rec.Columns() {
				row.fields[j] = canonValue(c, i, 12)
				keys[j] = canonValue(c, i, 6)
			}
			row.key = strings.Join(keys, "\x1f")
			rows = append(rows, row)
		}
	}
	return schema, rows, rdr.Err()
}

// canonValue: NULL for null, floats to digits significant digits, times
// as integer nanoseconds, the rest as Arrow prints it.
func canonValue(c arrow.Array, i, digits int) string {
	if c.IsNull(i) {
		return "NULL"
	}
	switch c := c.(type) {
	case *array.Float64:
		return canonFloat(c.Value(i), digits)
	case *array.Float32:
		return canonFloat(float64(c.Value(i)), digits)
	case *array.Timestamp:
		v := int64(c.Value(i))
		switch c.DataType().(*arrow.TimestampType).Unit {
		case arrow.Second:
			v *= 1e9
		case arrow.Millisecond:
			v *= 1e6
		case arrow.Microsecond:
			v *= 1e3
		}
		return strconv.FormatInt(v, 10)
	case *array.Dictionary:
		return canonValue(c.Dictionary(), c.GetValueIndex(i), digits)
	}
	return strings.Clone(c.ValueStr(i))
}

func canonFloat(f float64, digits int) string {
	if f == 0 {
		return "0" // and -0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "f" + strconv.FormatFloat(f, 'g', digits, 64)
}

func sortRows(rows []canonRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].key != rows[j].key {
			return rows[i].key < rows[j].key
		}
		return rows[i].String() < rows[j].String()
	})
}

// sameRow says whether two canonical rows are equal, floats within a
// relative 1e-9 (sums and averages depend on the order DuckDB adds in).
func sameRow(a, b canonRow) bool {
	if len(a.fields) != len(b.fields) {
		return false
	}
	for i := range a.fields {
		x, y := a.fields[i], b.fields[i]
		if x == y {
			continue
		}
		if !strings.HasPrefix(x, "f") || !strings.HasPrefix(y, "f") {
			return false
		}
		fx, err1 := strconv.ParseFloat(x[1:], 64)
		fy, err2 := strconv.ParseFloat(y[1:], 64)
		if err1 != nil || err2 != nil || math.Abs(fx-fy) > 1e-9*max(math.Abs(fx), math.Abs(fy)) {
			return false
		}
	}
	return true
}
