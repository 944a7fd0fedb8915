package output

import (
	"bytes"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

// csvWriter writes RFC 4180 CSV: a header line of the column names, one
// line per row, fields separated by commas, lines ended by LF (as duckdb,
// pandas and encoding/csv write; every reader takes it). A field is quoted
// when it holds a comma, a quote, CR or LF (quotes doubled), and when it
// is the empty string, so that it differs from NULL, the empty field.
// Values are spelled by the shared renderer in styleCSV (doc.go).
type csvWriter struct {
	closeState
	sink
	schema *arrow.Schema
	header bool // written
	rows   int64
}

func newCSVWriter(w io.Writer, schema *arrow.Schema) *csvWriter {
	return &csvWriter{sink: newSink(w), schema: schema}
}

func (c *csvWriter) Rows() int64 { return c.rows }

// writeHeader appends the header line. A result of no columns has no
// header (and no lines): there is nothing a CSV line could hold.
func (c *csvWriter) writeHeader() {
	c.header = true
	if c.schema.NumFields() == 0 {
		return
	}
	for i, f := range c.schema.Fields() {
		if i > 0 {
			c.buf = append(c.buf, ',')
		}
		start := len(c.buf)
		c.buf = append(c.buf, f.Name...)
		c.buf = quoteField(c.buf, start)
	}
	c.buf = append(c.buf, '\n')
}

func (c *csvWriter) Write(rec arrow.RecordBatch) error {
	if c.closed {
		return ErrClosed
	}
	if err := checkBatch(c.schema, rec); err != nil {
		return err
	}
	if !c.header {
		c.writeHeader()
	}
	n := int(rec.NumRows())
	if c.schema.NumFields() == 0 {
		c.rows += int64(n)
		return nil
	}
	cols := columns(rec, styleCSV)
	err := c.writeRows(n, func(dst []byte, from, to int) []byte {
		for i := from; i < to; i++ {
			for j, col := range cols {
				if j > 0 {
					dst = append(dst, ',')
				}
				if col.isNull(i) {
					continue
				}
				start := len(dst)
				dst = col.appendValue(dst, i)
				if !col.plain {
					dst = quoteField(dst, start)
				}
			}
			dst = append(dst, '\n')
		}
		return dst
	})
	if err != nil {
		return err
	}
	c.rows += int64(n)
	return nil
}

// quoteField quotes the field buf[start:] in place if it must be quoted.
func quoteField(buf []byte, start int) []byte {
	f := buf[start:]
	if len(f) > 0 && bytes.IndexAny(f, ",\"\r\n") < 0 {
		return buf
	}
	quotes := bytes.Count(f, []byte{'"'})
	n := len(buf)
	for range 2 + quotes {
		buf = append(buf, 0)
	}
	// Shift the field right from its end, doubling quotes, then open it.
	w := len(buf) - 1
	buf[w] = '"'
	w--
	for r := n - 1; r >= start; r-- {
		buf[w] = buf[r]
		w--
		if buf[r] == '"' {
			buf[w] = '"'
			w--
		}
	}
	buf[w] = '"'
	return buf
}

func (c *csvWriter) Close() error {
	if err := c.closing(); err != nil {
		return err
	}
	if !c.header {
		c.writeHeader()
	}
	err := c.flush()
	c.release()
	return err
}
