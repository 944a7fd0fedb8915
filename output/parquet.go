package output

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Row groups end at parquetRowGroupRows rows or once their batches hold
// parquetRowGroupBytes of Arrow buffers, whichever comes first. A row
// group's batches are held until it ends, then encoded (compressed, in
// memory, a column chunk per column) and written out while the next one
// is gathered: two row groups of batches and one encoded are what the
// writer holds, whatever the result size.
const (
	parquetRowGroupRows  = 1 << 20
	parquetRowGroupBytes = 64 << 20
)

// parquetWriter writes one Parquet file with arrow-go: zstd, statistics,
// format 2.6 (so timestamp[ns] stays TIMESTAMP(NANOS)), each column's
// encoding as parquet_plan.go chooses it, the Arrow schema stored in the
// metadata (pyarrow reads back the exact types: large_utf8, dictionaries,
// zones, seconds). pqarrow has no writer for string_view and binary_view:
// they are written as utf8 and binary. Columns of other types it cannot
// write (duration, intervals, list views, unions) are written as utf8,
// their values in CSV's text.
type parquetWriter struct {
	closeState
	schema *arrow.Schema // the result's
	out    *arrow.Schema // the file's: schema with other types in place of unsupported ones
	conv   []convertFunc // per column, nil or how it is turned into the file's type
	mem    memory.Allocator
	codec  compress.Compression
	group  rowGroup     // the row group being gathered
	enc    groupEncoder // nil until the first row group is written
	// pending is the result of the row group being written, in the
	// background; enc and sink are the background's until it is received.
	pending chan error
	sink    *discardOnError
	err     error // encoding or writing failed: every call says so
	rows    int64
	// groupRows is parquetRowGroupRows; tests make it small.
	groupRows int64
}

// parquetCodec is zstd (level 1: parquetZstdLevel), as in Apron's own
// files. Measured on the cpu benchmark (BenchmarkParquetCodec: random
// full-precision floats, the worst case for any codec), zstd writes 40.8
// bytes a row, snappy 42.7, for about 1.45 times the CPU; on values that
// repeat (most metrics) zstd's lead grows, and a file exported is read
// more often than written.
var parquetCodec = compress.Codecs.Zstd

func newParquetWriter(w io.Writer, schema *arrow.Schema, opts Options) (*parquetWriter, error) {
	return newParquetWriterCodec(w, schema, opts, parquetCodec)
}

func newParquetWriterCodec(w io.Writer, schema *arrow.Schema, opts Options, codec compress.Compression) (*parquetWriter, error) {
	props, arrProps := parquetProps(opts.Mem, codec, schema, nil)
	p := &parquetWriter{schema: schema, mem: opts.Mem, codec: codec, groupRows: parquetRowGroupRows, conv: make([]convertFunc, schema.NumFields())}
	fields := schema.Fields()
	for i, f := range fields {
		switch {
		case f.Type.ID() == arrow.STRING_VIEW:
			fields[i].Type, p.conv[i] = arrow.BinaryTypes.String, textArray
		case f.Type.ID() == arrow.BINARY_VIEW:
			fields[i].Type, p.conv[i] = arrow.BinaryTypes.Binary, binaryArray
		case !parquetCanWrite(f, props, arrProps):
			fields[i].Type, p.conv[i] = arrow.BinaryTypes.String, textArray
		}
	}
	md := schema.Metadata()
	p.out = arrow.NewSchema(fields, &md)
	// The file is started with its first row group, whose rows choose the
	// columns' encodings; the schema is checked now.
	if _, err := pqarrow.ToParquet(p.out, props, arrProps); err != nil {
		return nil, fmt.Errorf("output: parquet writer: %w", err)
	}
	p.sink = &discardOnError{w: w}
	return p, nil
}

// discardOnError passes writes to w until one fails, then records the
// error and discards the rest. arrow-go is never shown a failed write
// because it does not recover from one: arrow-go v18.8.0's row group Close
// stops at the first column that fails, and the buffers of the others are
// never released. So it runs to its end, and the writer reports the error.
type discardOnError struct {
	w   io.Writer
	err error
}

func (d *discardOnError) Write(p []byte) (int, error) {
	if d.err == nil {
		if _, err := d.w.Write(p); err != nil {
			d.err = fmt.Errorf("output: write: %w", err)
		}
	}
	return len(p), nil
}

// parquetCanWrite reports whether pqarrow can write a column of f's type:
// it maps its type to Parquet, and its data is not of a kind pqarrow
// refuses at write time (unwritable).
func parquetCanWrite(f arrow.Field, props *parquet.WriterProperties, arrProps pqarrow.ArrowWriterProperties) bool {
	if unwritable(f.Type) {
		return false
	}
	_, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, arrProps)
	return err == nil
}

// unwritable reports types whose schema pqarrow converts but whose data it
// cannot write (found by TestOddTypes): list views and unions, and
// fixed-size lists, since a null one has non-empty null slots, which
// pqarrow refuses ("lists with non-zero length null components").
func unwritable(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.ListViewType, *arrow.LargeListViewType, arrow.UnionType, *arrow.FixedSizeListType:
		return true
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if unwritable(f.Type) {
				return true
			}
		}
	}
	return false
}

func (p *parquetWriter) Rows() int64 { return p.rows }

func (p *parquetWriter) Write(rec arrow.RecordBatch) error {
	if p.closed {
		return ErrClosed
	}
	if p.err != nil {
		return p.err
	}
	if err := checkBatch(p.schema, rec); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil // an empty row group would only add metadata
	}
	out, err := p.fileBatch(rec)
	if err != nil {
		return err
	}
	defer out.Release()
	for off, n := int64(0), out.NumRows(); off < n; {
		take := min(n-off, p.groupRows-p.group.rows)
		part := out
		if take < n {
			part = out.NewSlice(off, off+take)
			defer part.Release()
		}
		p.group.add(part)
		p.rows += take
		off += take
		if p.group.rows >= p.groupRows || p.group.bytes >= parquetRowGroupBytes {
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush hands the row group gathered to a goroutine that encodes and
// writes it while the next one is gathered (the result's batches keep
// arriving meanwhile), once the one before is written. The first row
// group starts the file.
func (p *parquetWriter) flush() error {
	if err := p.wait(); err != nil {
		return err
	}
	recs, rows := p.group.take()
	if p.enc == nil {
		enc, err := newGroupEncoder(p.sink, p.out, recs, p.mem, p.codec)
		if err != nil {
			releaseBatches(recs)
			p.err = fmt.Errorf("output: parquet writer: %w", err)
			return p.err
		}
		p.enc = enc
	}
	if rows == 0 {
		return nil
	}
	done := make(chan error, 1)
	p.pending = done
	go func() {
		err := p.enc.writeGroup(recs, rows)
		releaseBatches(recs) // before the result: wait's caller may check the memory
		done <- err
	}()
	return nil
}

// wait waits for the row group being written, if any, and returns the
// writer's error: the encoder's, or the first write error of the sink
// (both only read here, while no row group is being written).
func (p *parquetWriter) wait() error {
	if p.pending != nil {
		err := <-p.pending
		p.pending = nil
		if err != nil && p.err == nil {
			p.err = fmt.Errorf("output: parquet: %w", err)
		}
	}
	if p.err == nil && p.sink.err != nil {
		p.err = p.sink.err
	}
	return p.err
}

// convertFunc turns a column into the type the Parquet file stores.
type convertFunc func(arrow.Array, memory.Allocator) arrow.Array

// fileBatch is rec in the file's schema, its columns of unsupported types
// converted. The caller releases it.
func (p *parquetWriter) fileBatch(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		if p.conv[i] == nil {
			cols[i] = rec.Column(i)
			cols[i].Retain()
			continue
		}
		cols[i] = p.conv[i](rec.Column(i), p.mem)
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(p.out, cols, rec.NumRows()), nil
}

// textArray renders arr as a utf8 array in styleCSV.
func textArray(arr arrow.Array, mem memory.Allocator) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(arr.Len())
	col := newColumn(arr, styleCSV)
	var buf []byte
	for i := range arr.Len() {
		if col.isNull(i) {
			b.AppendNull()
			continue
		}
		buf = col.appendValue(buf[:0], i)
		b.BinaryBuilder.Append(buf)
	}
	return b.NewArray()
}

// binaryArray copies a binary_view array into a binary one.
func binaryArray(arr arrow.Array, mem memory.Allocator) arrow.Array {
	a := arr.(*array.BinaryView)
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(a.Value(i))
	}
	return b.NewArray()
}

func (p *parquetWriter) Close() error {
	if err := p.closing(); err != nil {
		return err
	}
	p.flush()
	p.wait()
	p.group.reset()
	if p.enc != nil {
		if err := p.enc.close(); err != nil && p.err == nil {
			p.err = fmt.Errorf("output: parquet: %w", err)
		}
	}
	if p.err != nil {
		return p.err
	}
	return p.sink.err
}
