package output

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Format names an output format, as the --format flag spells it.
type Format string

// The formats New writes; doc.go says what each one writes.
const (
	Table   Format = "table"
	CSV     Format = "csv"
	JSON    Format = "json"
	JSONL   Format = "jsonl"
	Arrow   Format = "arrow"
	Parquet Format = "parquet"
)

// Formats lists every format, in the order help text shows them.
var Formats = []Format{Table, CSV, JSON, JSONL, Arrow, Parquet}

// ErrClosed is returned by Write and Close after Close.
var ErrClosed = errors.New("output: writer is closed")

// ErrUnknownFormat is wrapped by ParseFormat's error.
var ErrUnknownFormat = errors.New("output: unknown format")

// ParseFormat returns the format named s (case-insensitive, surrounding
// spaces ignored); its error lists the formats there are.
func ParseFormat(s string) (Format, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for _, f := range Formats {
		if string(f) == name {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%w %q (formats: %s)", ErrUnknownFormat, s, strings.Join(names, ", "))
}

// DefaultMaxRows is the number of rows a table shows when Options.MaxRows
// is 0: as many as duckdb's shell shows.
const DefaultMaxRows = 40

// Options tune a writer. The zero value is valid: no width limit, 40 rows,
// no query time, the default allocator.
type Options struct {
	// Width is the terminal width for Table: every line is cut to it, the
	// table first shrinking wide columns, then leaving out middle columns
	// (0 = no limit). Other formats ignore it.
	Width int
	// MaxRows is the most rows Table shows (0 = DefaultMaxRows). A longer
	// result shows its first ceil(MaxRows/2) and last floor(MaxRows/2) rows
	// with a "…" row between; the table holds only those rows in memory.
	MaxRows int
	// Elapsed, when set, is called once by Table's Close: the footer ends
	// with the query time it returns.
	Elapsed func() time.Duration
	// Mem allocates the Arrow and Parquet buffers of the arrow and parquet
	// writers (nil = memory.DefaultAllocator).
	Mem memory.Allocator
}

// Validate reports options no writer can honour.
func (o Options) Validate() error {
	if o.Width < 0 {
		return fmt.Errorf("output: width %d is negative", o.Width)
	}
	if o.MaxRows < 0 {
		return fmt.Errorf("output: max rows %d is negative", o.MaxRows)
	}
	return nil
}

// Writer writes a query result, a sequence of record batches of one schema,
// in one format. It is not safe for concurrent use.
type Writer interface {
	// Write writes rec's rows. The writer does not keep rec past the call
	// unless it Retains it (and then Releases it). rec's columns must have
	// the types of the schema given to New.
	Write(rec arrow.RecordBatch) error
	// Close flushes what the format keeps to the end (the table itself,
	// the Parquet footer, the IPC end-of-stream marker) and releases the
	// writer's buffers. Errors of the underlying io.Writer come back here
	// if not already from Write. It does not close the io.Writer. Calling
	// it again returns ErrClosed.
	Close() error
	// Rows is the number of rows written so far.
	Rows() int64
}

// New returns a writer of format f to w for batches of schema.
func New(f Format, w io.Writer, schema *arrow.Schema, opts Options) (Writer, error) {
	if w == nil {
		return nil, errors.New("output: nil io.Writer")
	}
	if schema == nil {
		return nil, errors.New("output: nil schema")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator
	}
	switch f {
	case Table:
		return newTableWriter(w, schema, opts), nil
	case CSV:
		return newCSVWriter(w, schema), nil
	case JSON:
		return newJSONWriter(w, schema, false), nil
	case JSONL:
		return newJSONWriter(w, schema, true), nil
	case Arrow:
		return newIPCWriter(w, schema, opts), nil
	case Parquet:
		return newParquetWriter(w, schema, opts)
	}
	_, err := ParseFormat(string(f))
	return nil, err
}

// checkBatch reports a batch whose columns are not those of schema. The
// text formats render by column type, so a mismatch would render garbage or
// panic rather than fail cleanly.
func checkBatch(schema *arrow.Schema, rec arrow.RecordBatch) error {
	if rec == nil {
		return errors.New("output: nil record batch")
	}
	if int(rec.NumCols()) != schema.NumFields() {
		return fmt.Errorf("output: batch has %d columns, schema %d", rec.NumCols(), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if got := rec.Column(i).DataType(); !arrow.TypeEqual(got, f.Type) {
			return fmt.Errorf("output: column %d (%q) is %s, schema says %s", i, f.Name, got, f.Type)
		}
	}
	return nil
}

// conform returns rec with schema as its schema, for the writers (IPC,
// Parquet) that insist on an identical schema: a batch whose column types
// match but whose field metadata or nullability differ (a Flight stream
// may announce one and send the other) is re-labelled, not refused. The
// caller releases the result.
func conform(schema *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := checkBatch(schema, rec); err != nil {
		return nil, err
	}
	if rec.Schema().Equal(schema) {
		rec.Retain()
		return rec, nil
	}
	return array.NewRecordBatch(schema, rec.Columns(), rec.NumRows()), nil
}

// closeState is embedded by every writer: Close acts once.
type closeState struct {
	closed bool
}

func (c *closeState) closing() error {
	if c.closed {
		return ErrClosed
	}
	c.closed = true
	return nil
}
