package buffer

import (
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

// encodedBatch is a batch's Arrow IPC stream as the parts of a WAL record
// payload (see partsWriter).
type encodedBatch struct {
	parts  [][]byte
	arenas []*[]byte // pooled copies of the small writes, given back by release
}

// arenaPool recycles the memory small IPC writes are copied into.
var arenaPool = sync.Pool{New: func() any { b := make([]byte, 0, arenaSize); return &b }}

const (
	arenaSize = 64 << 10
	// partsCopyMax: writes up to this size are copied into an arena;
	// larger ones (the column buffers of a batch) are referenced.
	partsCopyMax = 16 << 10
)

// release gives the arenas back once the WAL is done with the parts.
func (e *encodedBatch) release() {
	for _, a := range e.arenas {
		*a = (*a)[:0]
		arenaPool.Put(a)
	}
	e.arenas, e.parts = nil, nil
}

// partsWriter collects what an ipc.Writer writes as the parts of a WAL
// record instead of copying it into one buffer: the WAL copies each part
// once, into its write buffer, and the batch's column buffers (most of its
// bytes) are never copied before that. Small writes (message headers,
// padding, buffers of small batches) are copied into arenas, as the IPC
// writer may reuse the memory it wrote them from; large ones are the
// buffers of the batch's arrays, which the write holds until its record is
// durable (PendingWrite.wait releases the batch after the WAL's Wait), or
// buffers the IPC writer made with a Go allocator (see encodeBatch), which
// the reference keeps alive.
type partsWriter struct {
	e         *encodedBatch
	lastArena bool // the last part ends at the end of the current arena
}

func (w *partsWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) > partsCopyMax {
		w.e.parts = append(w.e.parts, p)
		w.lastArena = false
		return len(p), nil
	}
	var a *[]byte
	if n := len(w.e.arenas); n > 0 && cap(*w.e.arenas[n-1])-len(*w.e.arenas[n-1]) >= len(p) {
		a = w.e.arenas[n-1]
	} else {
		a = arenaPool.Get().(*[]byte)
		w.e.arenas = append(w.e.arenas, a)
		w.lastArena = false
	}
	start := len(*a)
	*a = append(*a, p...)
	if w.lastArena {
		// Contiguous with the last part: extend it.
		last := &w.e.parts[len(w.e.parts)-1]
		*last = (*a)[start-len(*last) : len(*a)]
	} else {
		w.e.parts = append(w.e.parts, (*a)[start:])
	}
	w.lastArena = true
	return len(p), nil
}

// encodeBatch writes rec as an Arrow IPC stream (schema, dictionaries, the
// batch, end of stream) into the parts of a WAL payload.
func encodeBatch(rec arrow.RecordBatch) (encodedBatch, error) {
	var e encodedBatch
	// The IPC writer's own buffers (a bitmap moved to offset 0, say) are
	// then Go memory, which a part referencing it keeps alive.
	iw := ipc.NewWriter(&partsWriter{e: &e}, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(memory.NewGoAllocator()))
	if err := iw.Write(rec); err != nil {
		e.release()
		return encodedBatch{}, fmt.Errorf("buffer: encoding batch for the WAL: %w", err)
	}
	if err := iw.Close(); err != nil {
		e.release()
		return encodedBatch{}, fmt.Errorf("buffer: encoding batch for the WAL: %w", err)
	}
	return e, nil
}

// payload returns the parts of the WAL record payload: the entry header
// (see wal/doc.go for the layout), then the IPC stream.
func (e encodedBatch) payload(db, table string, seq uint64, rows int64) ([][]byte, error) {
	hdr, err := proto.Marshal(&apronpb.WalRecordHeader{Database: db, Table: table, Sequence: seq, Rows: rows})
	if err != nil {
		return nil, err
	}
	head := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(hdr)), uint64(len(hdr)))
	head = append(head, hdr...)
	return append([][]byte{head}, e.parts...), nil
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
