package output

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

// jsonWriter writes rows as JSON objects, keys in column order, values
// spelled by the shared renderer in styleJSON (doc.go). In JSON mode the
// result is one array, an object a line, streamed as the rows come:
//
//	[
//	{"time":"2026-01-05T12:00:00Z","host":"h1","v":1.5},
//	{"time":"2026-01-05T12:00:01Z","host":"h2","v":null}
//	]
//
// and [] for no rows. In JSONL mode (lines) each object is a line and
// nothing else is written.
type jsonWriter struct {
	closeState
	sink
	schema *arrow.Schema
	lines  bool
	keys   [][]byte // `{"name":` for the first column, `,"name":` for the others
	rows   int64
}

func newJSONWriter(w io.Writer, schema *arrow.Schema, lines bool) *jsonWriter {
	keys := make([][]byte, schema.NumFields())
	for i, f := range schema.Fields() {
		sep := byte(',')
		if i == 0 {
			sep = '{'
		}
		keys[i] = append(appendJSONString([]byte{sep}, f.Name), ':')
	}
	return &jsonWriter{sink: newSink(w), schema: schema, lines: lines, keys: keys}
}

func (j *jsonWriter) Rows() int64 { return j.rows }

func (j *jsonWriter) Write(rec arrow.RecordBatch) error {
	if j.closed {
		return ErrClosed
	}
	if err := checkBatch(j.schema, rec); err != nil {
		return err
	}
	cols := columns(rec, styleJSON)
	base := j.rows
	n := int(rec.NumRows())
	err := j.writeRows(n, func(dst []byte, from, to int) []byte {
		for i := from; i < to; i++ {
			if !j.lines {
				if base+int64(i) == 0 {
					dst = append(dst, '[', '\n')
				} else {
					dst = append(dst, ',', '\n')
				}
			}
			if len(cols) == 0 {
				dst = append(dst, '{')
			}
			for c, col := range cols {
				dst = append(dst, j.keys[c]...)
				dst = col.appendJSONValue(dst, i)
			}
			dst = append(dst, '}')
			if j.lines {
				dst = append(dst, '\n')
			}
		}
		return dst
	})
	if err != nil {
		return err
	}
	j.rows += int64(n)
	return nil
}

func (j *jsonWriter) Close() error {
	if err := j.closing(); err != nil {
		return err
	}
	if !j.lines {
		if j.rows == 0 {
			j.buf = append(j.buf, '[', ']', '\n')
		} else {
			j.buf = append(j.buf, '\n', ']', '\n')
		}
	}
	err := j.flush()
	j.release()
	return err
}
