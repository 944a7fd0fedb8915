package buffer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
	"github.com/apron-db/apron/wal"
)

// entryHeadroom is room left in front of the IPC bytes of a WAL entry for
// its header, so that the header is written in place once the sequence is
// known, without copying the batch (see wal/doc.go for the payload layout).
const entryHeadroom = 64

// encodedBatch is a batch's Arrow IPC stream with headroom in front.
type encodedBatch struct {
	buf []byte // headroom + IPC stream
}

// encodePool recycles the buffers of WAL entries: a 64k-row batch takes
// megabytes, and a new buffer would be zeroed by the runtime each time.
var encodePool sync.Pool // of *[]byte

// release returns e's buffer to the pool once the WAL is done with it.
func (e encodedBatch) release() {
	if e.buf != nil {
		b := e.buf[:0]
		encodePool.Put(&b)
	}
}

// encodeBatch writes rec as an Arrow IPC stream (schema, dictionaries, the
// batch, end of stream) after entryHeadroom+len(db)+len(table) free bytes.
func encodeBatch(db, table string, rec arrow.RecordBatch, mem memory.Allocator) (encodedBatch, error) {
	head := entryHeadroom + len(db) + len(table)
	need := head + int(estimateIPC(rec))
	var buf []byte
	if p, ok := encodePool.Get().(*[]byte); ok && cap(*p) >= need {
		buf = (*p)[:0]
	} else {
		buf = make([]byte, 0, need)
	}
	w := bytes.NewBuffer(buf)
	w.Write(make([]byte, head))
	iw := ipc.NewWriter(w, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	if err := iw.Write(rec); err != nil {
		return encodedBatch{}, fmt.Errorf("buffer: encoding batch for the WAL: %w", err)
	}
	if err := iw.Close(); err != nil {
		return encodedBatch{}, fmt.Errorf("buffer: encoding batch for the WAL: %w", err)
	}
	return encodedBatch{buf: w.Bytes()}, nil
}

// payload writes the entry header in front of the IPC bytes and returns the
// WAL record payload, sharing e's memory.
func (e encodedBatch) payload(db, table string, seq uint64, rows int64) ([]byte, error) {
	hdr, err := proto.Marshal(&apronpb.WalRecordHeader{Database: db, Table: table, Sequence: seq, Rows: rows})
	if err != nil {
		return nil, err
	}
	head := entryHeadroom + len(db) + len(table)
	var lenBuf [binary.MaxVarintLen64]byte
	nl := binary.PutUvarint(lenBuf[:], uint64(len(hdr)))
	start := head - len(hdr) - nl
	if start < 0 {
		return nil, fmt.Errorf("buffer: WAL entry header of %d bytes does not fit its headroom", len(hdr))
	}
	copy(e.buf[start:], lenBuf[:nl])
	copy(e.buf[start+nl:], hdr)
	return e.buf[start:], nil
}

// estimateIPC guesses the IPC size of rec, to size the buffer once.
func estimateIPC(rec arrow.RecordBatch) int64 {
	var s int64 = 1024
	for _, c := range rec.Columns() {
		s += dataSize(c.Data()) + 64
	}
	return s
}

// decodeEntry reads a WAL payload back into its header and batch. The
// batch aliases payload (see sliceMessageReader).
func decodeEntry(payload []byte, mem memory.Allocator) (wal.Entry, arrow.RecordBatch, error) {
	e, err := wal.DecodeEntry(payload)
	if err != nil {
		return e, nil, err
	}
	r, err := ipc.NewReaderFromMessageReader(&sliceMessageReader{b: e.IPC}, ipc.WithAllocator(mem))
	if err != nil {
		return e, nil, fmt.Errorf("decoding the batch of %s.%s sequence %d: %w", e.Database, e.Table, e.Sequence, err)
	}
	defer r.Release()
	if !r.Next() {
		err := r.Err()
		if err == nil {
			err = fmt.Errorf("no record batch")
		}
		return e, nil, fmt.Errorf("decoding the batch of %s.%s sequence %d: %w", e.Database, e.Table, e.Sequence, err)
	}
	rec := r.RecordBatch()
	rec.Retain()
	if rec.NumRows() != e.Rows {
		rec.Release()
		return e, nil, fmt.Errorf("the batch of %s.%s sequence %d has %d rows, its header says %d", e.Database, e.Table, e.Sequence, rec.NumRows(), e.Rows)
	}
	return e, rec, nil
}
