package output

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// ipcWriter writes the Arrow IPC stream format (what pyarrow.ipc.open_stream
// and DuckDB's arrow reader take): the schema, the batches as they come
// (uncompressed, dictionaries as the batches carry them), the
// end-of-stream marker at Close. An empty result is the schema and the
// marker. Every Arrow type passes through unchanged.
type ipcWriter struct {
	closeState
	schema *arrow.Schema
	w      *ipc.Writer
	rows   int64
}

func newIPCWriter(w io.Writer, schema *arrow.Schema, opts Options) *ipcWriter {
	return &ipcWriter{
		schema: schema,
		w:      ipc.NewWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(opts.Mem)),
	}
}

func (i *ipcWriter) Rows() int64 { return i.rows }

func (i *ipcWriter) Write(rec arrow.RecordBatch) error {
	if i.closed {
		return ErrClosed
	}
	rec, err := conform(i.schema, rec)
	if err != nil {
		return err
	}
	defer rec.Release()
	if rec.NumRows() == 0 {
		return nil // nothing to say: an empty result is the schema alone
	}
	if err := i.w.Write(rec); err != nil {
		return fmt.Errorf("output: arrow stream: %w", err)
	}
	i.rows += rec.NumRows()
	return nil
}

func (i *ipcWriter) Close() error {
	if err := i.closing(); err != nil {
		return err
	}
	if err := i.w.Close(); err != nil {
		return fmt.Errorf("output: arrow stream: %w", err)
	}
	return nil
}
