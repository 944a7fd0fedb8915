package output

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// rowGroup is the batches of the row group being gathered: a row group is
// written once it is whole, so that a column planned with a dictionary
// gets one for the whole chunk (dictColumn) and the columns are encoded
// in parallel.
type rowGroup struct {
	recs  []arrow.RecordBatch
	rows  int64
	bytes int64 // of Arrow buffers
}

func (g *rowGroup) add(rec arrow.RecordBatch) {
	rec.Retain()
	g.recs = append(g.recs, rec)
	g.rows += rec.NumRows()
	g.bytes += util.TotalRecordSize(rec)
}

// take hands the batches over to the caller, who releases them.
func (g *rowGroup) take() ([]arrow.RecordBatch, int64) {
	recs, rows := g.recs, g.rows
	*g = rowGroup{}
	return recs, rows
}

func (g *rowGroup) reset() {
	recs, _ := g.take()
	releaseBatches(recs)
}

func releaseBatches(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// groupEncoder writes whole row groups to a Parquet file.
type groupEncoder interface {
	writeGroup(recs []arrow.RecordBatch, rows int64) error
	// close writes the footer.
	close() error
}

// newGroupEncoder starts the file of schema on w, its columns planned from
// recs, its first row group (none for an empty result).
func newGroupEncoder(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator, codec compress.Compression) (groupEncoder, error) {
	plans := planColumns(schema, recs)
	props, arrProps := parquetProps(mem, codec, schema, plans)
	if !flatSchema(schema) {
		fw, err := pqarrow.NewFileWriter(schema, w, props, arrProps)
		if err != nil {
			return nil, err
		}
		return &nestedEncoder{fw: fw}, nil
	}
	return newFlatEncoder(w, schema, plans, props, arrProps)
}

// flatSchema reports a schema without nested columns: a column each leaf.
func flatSchema(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		dt := f.Type
		if ext, ok := dt.(arrow.ExtensionType); ok {
			dt = ext.StorageType()
		}
		if _, ok := dt.(arrow.NestedType); ok {
			return false
		}
	}
	return true
}

// nestedEncoder is pqarrow's FileWriter, which computes the repetition and
// definition levels of nested columns; it writes one column at a time.
type nestedEncoder struct {
	fw     *pqarrow.FileWriter
	groups int
}

func (e *nestedEncoder) writeGroup(recs []arrow.RecordBatch, _ int64) error {
	if e.groups > 0 { // the first row group is started by WriteBuffered
		if err := e.fw.NewBufferedRowGroupChecked(); err != nil {
			return err
		}
	}
	e.groups++
	for _, r := range recs {
		if err := e.fw.WriteBuffered(r); err != nil {
			return err
		}
	}
	return nil
}

func (e *nestedEncoder) close() error { return e.fw.Close() }

// flatEncoder writes the columns of a flat schema (every column its own
// leaf, so its definition levels are its validity) in parallel, each one
// on its own column chunk writer of a buffered row group: what pqarrow's
// FileWriter does one column after another. The file is what the
// FileWriter writes (the same Parquet schema and ARROW:schema metadata).
type flatEncoder struct {
	fw       *file.Writer
	schema   *arrow.Schema
	plans    []columnPlan
	arrProps pqarrow.ArrowWriterProperties
	mem      memory.Allocator
	order    []int // the columns, those likely costliest to encode first
}

func newFlatEncoder(w io.Writer, schema *arrow.Schema, plans []columnPlan, props *parquet.WriterProperties, arrProps pqarrow.ArrowWriterProperties) (*flatEncoder, error) {
	pqschema, err := pqarrow.ToParquet(schema, props, arrProps)
	if err != nil {
		return nil, err
	}
	meta := make(metadata.KeyValueMetadata, 0)
	md := schema.Metadata()
	for i, k := range md.Keys() {
		meta.Append(k, md.Values()[i])
	}
	var ser bytes.Buffer
	iw := ipc.NewWriter(&ser, ipc.WithSchema(schema), ipc.WithAllocator(props.Allocator()))
	if err := iw.Close(); err != nil {
		return nil, err
	}
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(ser.Bytes()))
	fw, err := file.NewParquetWriterWithError(w, pqschema.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err != nil {
		return nil, err
	}
	e := &flatEncoder{fw: fw, schema: schema, plans: plans, arrProps: arrProps, mem: props.Allocator()}
	for pass := range 3 {
		for i, f := range schema.Fields() {
			cost := 2 // fixed width
			if plans[i].dict != nil {
				cost = 0
			} else if dictValueType(f.Type) != nil {
				cost = 1
			}
			if cost == pass {
				e.order = append(e.order, i)
			}
		}
	}
	return e, nil
}

func (e *flatEncoder) writeGroup(recs []arrow.RecordBatch, rows int64) error {
	rgw, err := e.fw.AppendBufferedRowGroupChecked()
	if err != nil {
		return err
	}
	errs := make([]error, len(e.order))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(e.order)) {
		wg.Go(func() {
			var levels []int16
			for k := int(next.Add(1) - 1); k < len(e.order); k = int(next.Add(1) - 1) {
				c := e.order[k]
				levels, errs[c] = e.writeColumn(rgw, c, recs, int(rows), levels)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The file is unusable; as with pqarrow's FileWriter, the
		// failed row group's buffers are left to the garbage collector.
		return err
	}
	return rgw.Close()
}

// writeColumn writes column c of the row group's batches; levels is the
// goroutine's buffer of definition levels, returned for the next column.
func (e *flatEncoder) writeColumn(rgw file.BufferedRowGroupWriter, c int, recs []arrow.RecordBatch, rows int, levels []int16) ([]int16, error) {
	cw, err := rgw.Column(c)
	if err != nil {
		return levels, err
	}
	// One context a column: its buffers are not safe for concurrent use.
	ctx := pqarrow.NewArrowWriteContext(context.Background(), &e.arrProps)
	nullable := e.schema.Field(c).Nullable
	def := func(a arrow.Array) []int16 {
		if !nullable {
			return nil // a required column has none
		}
		levels = defLevels(a, levels)
		return levels
	}
	if dt := e.plans[c].dict; dt != nil {
		if a := dictColumn(recs, c, rows, dt, e.mem); a != nil {
			defer a.Release()
			d := def(a)
			if done, err := writeDictColumn(cw, a.(*array.Dictionary), d); done {
				return levels, err
			}
			return levels, pqarrow.WriteArrowToColumn(ctx, cw, a, d, nil, nullable)
		}
	}
	for _, r := range recs {
		a := r.Column(c)
		if err := pqarrow.WriteArrowToColumn(ctx, cw, a, def(a), nil, nullable); err != nil {
			return levels, err
		}
	}
	return levels, nil
}

// defLevels are the definition levels of a flat optional column: 1 for a
// value, 0 for a null; in buf when it is large enough.
func defLevels(a arrow.Array, buf []int16) []int16 {
	n := a.Len()
	if cap(buf) < n {
		buf = make([]int16, n)
	}
	buf = buf[:n]
	if a.NullN() == 0 {
		for i := range buf {
			buf[i] = 1
		}
		return buf
	}
	for i := range buf {
		if a.IsValid(i) {
			buf[i] = 1
		} else {
			buf[i] = 0
		}
	}
	return buf
}

func (e *flatEncoder) close() error { return e.fw.Close() }
