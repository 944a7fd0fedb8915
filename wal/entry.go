package wal

import (
	"encoding/binary"
	"fmt"

	apronpb "github.com/apron-db/apron/proto"
	"google.golang.org/protobuf/proto"
)

// Entry is the payload of an Apron WAL record: where a batch goes, its place
// in the write order, and the batch as an Arrow IPC stream.
type Entry struct {
	Database string
	Table    string
	Sequence uint64
	Rows     int64
	// IPC is an Arrow IPC stream (schema, dictionaries, one record batch,
	// end-of-stream marker). DecodeEntry returns it aliasing the payload.
	IPC []byte
}

// AppendEntry encodes e as a record payload and appends it to dst.
func AppendEntry(dst []byte, e Entry) []byte {
	h := &apronpb.WalRecordHeader{
		Database: e.Database,
		Table:    e.Table,
		Sequence: e.Sequence,
		Rows:     e.Rows,
	}
	opts := proto.MarshalOptions{Deterministic: true}
	size := opts.Size(h)
	dst = binary.AppendUvarint(dst, uint64(size))
	dst, err := opts.MarshalAppend(dst, h)
	if err != nil {
		// Marshalling a message of strings and integers cannot fail except
		// for invalid UTF-8, which proto3 strings reject.
		panic(fmt.Sprintf("wal: marshal record header: %v", err))
	}
	return append(dst, e.IPC...)
}

// DecodeEntry decodes a record payload written by AppendEntry. The returned
// IPC aliases payload. Malformed payloads give an error matching ErrCorrupt.
func DecodeEntry(payload []byte) (Entry, error) {
	hl, n := binary.Uvarint(payload)
	if n <= 0 {
		return Entry{}, entryError("bad header length varint")
	}
	rest := payload[n:]
	if hl > uint64(len(rest)) {
		return Entry{}, entryError(fmt.Sprintf("header length %d exceeds the %d bytes left", hl, len(rest)))
	}
	var h apronpb.WalRecordHeader
	if err := proto.Unmarshal(rest[:hl], &h); err != nil {
		return Entry{}, fmt.Errorf("wal: entry: record header: %w: %w", err, ErrCorrupt)
	}
	ipc := rest[hl:]
	if len(ipc) == 0 {
		return Entry{}, entryError("no IPC stream after the header")
	}
	if h.Rows < 0 {
		return Entry{}, entryError(fmt.Sprintf("negative row count %d", h.Rows))
	}
	return Entry{
		Database: h.Database,
		Table:    h.Table,
		Sequence: h.Sequence,
		Rows:     h.Rows,
		IPC:      ipc,
	}, nil
}

func entryError(msg string) error {
	return fmt.Errorf("wal: entry: %s: %w", msg, ErrCorrupt)
}
