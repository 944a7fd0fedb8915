package input

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Format is a file format that Open reads.
type Format string

const (
	CSV          Format = "csv"
	TSV          Format = "tsv" // CSV with tab delimiters
	JSONL        Format = "jsonl"
	LineProtocol Format = "lp"
	Parquet      Format = "parquet"
	Arrow        Format = "arrow" // Arrow IPC, file or stream
)

// Formats lists the formats for --format's help text.
var Formats = []Format{CSV, TSV, JSONL, LineProtocol, Parquet, Arrow}

// DefaultBatchRows is the batch size when Options.BatchRows is 0: large
// enough that per-batch costs (a DoPut message, a WAL record) vanish,
// small enough that a batch of wide rows stays in the tens of MB.
const DefaultBatchRows = 65536

// TimeColumnName is the name every table's time column has on the server.
const TimeColumnName = "time"

// Options says how to read a file; the zero value (plus Format) reads with
// inferred types, a "time" column if there is one and 65536-row batches.
type Options struct {
	Format     Format           // required; the CLI calls Detect for --format auto
	BatchRows  int              // rows per batch; 0 = DefaultBatchRows
	Schema     string           // "host:string,usage:float64": overrides inferred CSV/JSONL types (see ParseSchema)
	TimeColumn string           // the column written as "time"; "" = a column named "time" if any
	TimeFormat string           // "" (auto), "rfc3339", "s", "ms", "us", "ns" or a Go time layout
	Precision  string           // line protocol timestamps: "ns" (default), "us", "ms", "s"
	Table      string           // the table of CSV/JSONL/Parquet/Arrow batches (line protocol: each line's measurement)
	Mem        memory.Allocator // nil = memory.DefaultAllocator
	// DictionaryStrings: CSV and TSV string columns whose sample repeats
	// its values come out as dictionary<int32, utf8> (dictCol), each
	// batch with a dictionary of its own; the CLI sets it (less to send,
	// less for the server to hash). Off, every string column is utf8.
	DictionaryStrings bool
}

// Batch is a run of rows of one table.
type Batch struct {
	Table               string            // Options.Table, or the line-protocol measurement
	Record              arrow.RecordBatch // owned by the caller: it must Release it
	FirstLine, LastLine int64             // 1-based source lines of the rows (CSV, JSONL, LP); 0 for Parquet/Arrow
	FirstRow, LastRow   int64             // 0-based index of the batch's first/last data row in the file
}

// Reader yields the batches of one file, in file order (line protocol:
// in file order per table).
type Reader interface {
	// Next returns the next batch, or io.EOF after the last one. An error
	// is sticky: every later call returns it again.
	Next() (Batch, error)
	// BytesRead is how much of the file has been read so far, for a
	// progress bar. It is safe to call from any goroutine. Reading runs
	// ahead of Next by a few batches.
	BytesRead() int64
	// Close stops every goroutine of the reader, releases what it holds
	// and removes its spool file. It does not close the io.Reader given
	// to Open. It is idempotent.
	Close() error
}

// Validate checks the options without opening anything, so that the CLI
// can refuse bad flags before it reads a file. Open checks them too.
func (o Options) Validate() error {
	switch o.Format {
	case CSV, TSV, JSONL, LineProtocol, Parquet, Arrow:
	case "":
		return fmt.Errorf("%w: no format given (call Detect, or pass --format csv|tsv|jsonl|lp|parquet|arrow)", ErrFormat)
	default:
		return fmt.Errorf("%w %q (pass --format csv|tsv|jsonl|lp|parquet|arrow)", ErrFormat, o.Format)
	}
	_, err := newConfig("", o)
	return err
}

// config is Options checked and parsed once.
type config struct {
	Options
	name      string
	schema    map[string]Kind
	time      timeParser
	precision lineprotocol.Precision
}

func newConfig(name string, opts Options) (*config, error) {
	c := &config{Options: opts, name: name}
	if c.BatchRows < 0 {
		return nil, fmt.Errorf("input: BatchRows %d is negative", c.BatchRows)
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.Mem == nil {
		c.Mem = memory.DefaultAllocator
	}
	var err error
	if c.schema, err = ParseSchema(opts.Schema); err != nil {
		return nil, err
	}
	if c.time, err = newTimeParser(opts.TimeFormat); err != nil {
		return nil, err
	}
	switch strings.ToLower(opts.Precision) {
	case "", "ns", "n":
		c.precision = lineprotocol.Nanosecond
	case "us", "µs", "u":
		c.precision = lineprotocol.Microsecond
	case "ms":
		c.precision = lineprotocol.Millisecond
	case "s":
		c.precision = lineprotocol.Second
	default:
		return nil, schemaf("--precision %q is not ns, us, ms or s", opts.Precision)
	}
	return c, nil
}

// errorAt builds an *Error for this file.
func (c *config) errorAt(line, row int64, column string, err error) *Error {
	return &Error{File: c.name, Line: line, Row: row, Column: column, Err: err}
}

// Open reads r, a file of size bytes (-1 when unknown, e.g. stdin), named
// name in messages.
//
// CSV, TSV, JSONL, line protocol and Arrow IPC streams are read
// sequentially from r's current position. Parquet files and Arrow IPC
// files need random access (their index is at the end): when r is an
// io.ReaderAt and io.Seeker that can seek (a regular *os.File), Open reads
// it with ReadAt from offset 0, whatever its position; otherwise (stdin, a
// pipe, a bufio.Reader) Open first copies r to a temporary file, which
// Close removes. Open returns only once that copy is done.
func Open(name string, r io.Reader, size int64, opts Options) (Reader, error) {
	c, err := newConfig(name, opts)
	if err != nil {
		return nil, err
	}
	switch opts.Format {
	case CSV:
		return openCSV(c, r, ',')
	case TSV:
		return openCSV(c, r, '\t')
	case JSONL:
		return openJSONL(c, r)
	case LineProtocol:
		return openLineProtocol(c, r)
	case Parquet:
		return openParquet(c, r, size)
	case Arrow:
		return openArrow(c, r, size)
	case "":
		return nil, fmt.Errorf("%w: no format given for %s (call Detect, or pass --format csv|tsv|jsonl|lp|parquet|arrow)", ErrFormat, name)
	}
	return nil, fmt.Errorf("%w %q for %s (pass --format csv|tsv|jsonl|lp|parquet|arrow)", ErrFormat, opts.Format, name)
}

// countingReader counts the bytes read through it for BytesRead.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// timeColumnIndex finds the column that becomes "time" among names: the
// one --time-column names, or else one named "time"; -1 when there is
// none (the server stamps the rows). A file with both a "time" column and
// another --time-column is refused: one of them would have to be dropped
// or renamed silently.
func timeColumnIndex(names []string, timeColumn string) (int, error) {
	timeIdx := indexOf(names, TimeColumnName)
	if timeColumn == "" {
		return timeIdx, nil
	}
	idx := indexOf(names, timeColumn)
	if idx < 0 {
		return -1, schemaf("--time-column %q: no such column (the columns are %s)", timeColumn, listNames(names))
	}
	if timeColumn != TimeColumnName && timeIdx >= 0 {
		return -1, schemaf("the file has a column %q and --time-column names %q: both would be the time column; rename or drop one", TimeColumnName, timeColumn)
	}
	return idx, nil
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

func listNames(names []string) string {
	const max = 20
	q := make([]string, 0, min(len(names), max))
	for i, n := range names {
		if i == max {
			q = append(q, "…")
			break
		}
		q = append(q, fmt.Sprintf("%q", n))
	}
	return strings.Join(q, ", ")
}

// errClosed is returned by Next after Close.
var errClosed = errors.New("input: reader is closed")
