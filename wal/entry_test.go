package wal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apron-db/apron/wal"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    wal.Entry
	}{
		{"minimal", wal.Entry{IPC: []byte{1}}},
		{"typical", wal.Entry{Database: "metrics", Table: "cpu", Sequence: 42, Rows: 1000, IPC: payloadOf(1, 4096)}},
		{"max_sequence", wal.Entry{Database: "d", Table: "t", Sequence: ^uint64(0), Rows: 1<<63 - 1, IPC: []byte("ipc")}},
		{"unicode_names", wal.Entry{Database: "données", Table: "表", Sequence: 1, Rows: 1, IPC: []byte{0xff, 0xff, 0xff, 0xff}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			b := wal.AppendEntry(bytes.Clone(prefix), tc.e)
			if !bytes.HasPrefix(b, prefix) {
				t.Fatal("AppendEntry did not append")
			}
			got, err := wal.DecodeEntry(b[len(prefix):])
			if err != nil {
				t.Fatal(err)
			}
			if got.Database != tc.e.Database || got.Table != tc.e.Table || got.Sequence != tc.e.Sequence ||
				got.Rows != tc.e.Rows || !bytes.Equal(got.IPC, tc.e.IPC) {
				t.Fatalf("got %+v, want %+v", got, tc.e)
			}
			if &got.IPC[0] != &b[len(b)-len(tc.e.IPC)] {
				t.Fatal("IPC does not alias the payload")
			}
		})
	}
}

func TestDecodeEntryGarbage(t *testing.T) {
	valid := wal.AppendEntry(nil, wal.Entry{Database: "db", Table: "t", Sequence: 7, Rows: 3, IPC: []byte("ipc-bytes")})
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"unterminated_varint", []byte{0x80, 0x80}},
		{"varint_overflow", bytes.Repeat([]byte{0xff}, 11)},
		{"header_length_past_end", []byte{0x7f, 1, 2, 3}},
		{"huge_header_length", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1}},
		{"no_ipc", valid[:len(valid)-len("ipc-bytes")]},
		{"bad_protobuf", []byte{3, 0xff, 0xff, 0xff, 'x'}},
		{"negative_rows", wal.AppendEntry(nil, wal.Entry{Rows: -1, IPC: []byte{1}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wal.DecodeEntry(tc.payload); !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("DecodeEntry = %v, want an error matching ErrCorrupt", err)
			}
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(wal.AppendEntry(nil, wal.Entry{Database: "db", Table: "t", Sequence: 7, Rows: 3, IPC: []byte("ipc")}))
	f.Add(wal.AppendEntry(nil, wal.Entry{IPC: []byte{0}}))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1})
	f.Fuzz(func(t *testing.T, payload []byte) {
		e, err := wal.DecodeEntry(payload)
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if len(e.IPC) == 0 || len(e.IPC) > len(payload) {
			t.Fatalf("IPC of %d bytes from a payload of %d", len(e.IPC), len(payload))
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := wal.DecodeEntry(wal.AppendEntry(nil, e))
		if err != nil || again.Database != e.Database || again.Table != e.Table ||
			again.Sequence != e.Sequence || again.Rows != e.Rows || !bytes.Equal(again.IPC, e.IPC) {
			t.Fatalf("re-encoded entry decodes as %+v, %v; want %+v", again, err, e)
		}
	})
}
