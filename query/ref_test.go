//go:build duckdb_arrow

package query

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// refDB is a plain in-process DuckDB holding data in its own tables: the
// reference the engine's results are compared with.
type refDB struct {
	t  testing.TB
	db duck.Database
	c  duck.Connection
}

func newRefDB(t testing.TB) *refDB {
	r := &refDB{t: t}
	if duck.Open(":memory:", &r.db) == duck.StateError {
		t.Fatal("opening reference DuckDB failed")
	}
	if duck.Connect(r.db, &r.c) == duck.StateError {
		t.Fatal("connecting to reference DuckDB failed")
	}
	t.Cleanup(func() {
		duck.Disconnect(&r.c)
		duck.Close(&r.db)
	})
	return r
}

func (r *refDB) exec(sql string) {
	r.t.Helper()
	if err := exec(r.c, sql); err != nil {
		r.t.Fatalf("%s: %v", sql, err)
	}
}

// append appends rec's rows to schema.table by column name.
func (r *refDB) append(schema, table string, rec arrow.RecordBatch) {
	r.t.Helper()
	var app duck.Appender
	if duck.AppenderCreate(r.c, schema, table, &app) == duck.StateError {
		r.t.Fatalf("appender: %s", duck.AppenderError(app))
	}
	defer duck.AppenderDestroy(&app)
	for _, f := range rec.Schema().Fields() {
		if duck.AppenderAddColumn(app, f.Name) == duck.StateError {
			r.t.Fatalf("appender column %s: %s", f.Name, duck.AppenderError(app))
		}
	}
	conv, ed := duck.SchemaFromArrow(r.c, rec.Schema())
	defer duck.DestroyArrowConvertedSchema(&conv)
	if err := errorData(ed); err != nil {
		r.t.Fatal(err)
	}
	for off := int64(0); off < rec.NumRows(); off += vectorSize {
		s := rec.NewSlice(off, min(off+vectorSize, rec.NumRows()))
		dc, ed := duck.DataChunkFromArrow(r.c, s, conv)
		s.Release()
		if err := errorData(ed); err != nil {
			r.t.Fatal(err)
		}
		if duck.AppendDataChunk(app, dc) == duck.StateError {
			r.t.Fatalf("append: %s", duck.AppenderError(app))
		}
		duck.DestroyDataChunk(&dc)
	}
	if duck.AppenderClose(app) == duck.StateError {
		r.t.Fatalf("appender close: %s", duck.AppenderError(app))
	}
}

// reader runs sql as a streaming query.
func (r *refDB) reader(sql string) (*reader, error) {
	var ext duck.ExtractedStatements
	defer duck.DestroyExtracted(&ext)
	if duck.ExtractStatements(r.c, sql, &ext) != 1 {
		return nil, classify(duck.ExtractStatementsError(ext))
	}
	var stmt duck.PreparedStatement
	if duck.PrepareExtractedStatement(r.c, ext, 0, &stmt) == duck.StateError {
		err := classify(duck.PrepareError(stmt))
		duck.DestroyPrepare(&stmt)
		return nil, err
	}
	return runStreaming(context.Background(), r.c, stmt)
}

func (r *refDB) query(sql string) []string {
	r.t.Helper()
	rd, err := r.reader(sql)
	rows, _, err := collect(rd, err)
	if err != nil {
		r.t.Fatalf("reference: %s: %v", sql, err)
	}
	return rows
}
