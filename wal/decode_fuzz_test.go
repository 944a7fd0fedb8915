package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
)

// buildFile returns the bytes of a WAL file of segment seg holding payloads.
func buildFile(seg uint64, payloads ...[]byte) []byte {
	b := appendFileHeader(nil, seg)
	for _, p := range payloads {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = binary.LittleEndian.AppendUint32(b, recordCRC(len(p), p))
		b = append(b, p...)
	}
	return b
}

// FuzzDecodeRecords feeds arbitrary bytes to the decoder that replay uses.
// It must not panic, must not allocate more than the input size for
// payloads, and every record it returns must check out.
func FuzzDecodeRecords(f *testing.F) {
	valid := buildFile(3, []byte("first"), bytes.Repeat([]byte{0xab}, 300), []byte("x"))
	f.Add(valid)
	f.Add(buildFile(1))
	f.Add(buildFile(1, make([]byte, 5000)))
	f.Add(valid[:len(valid)-3])                             // torn last record
	f.Add(append(bytes.Clone(valid), make([]byte, 512)...)) // zeroed sector
	flipped := bytes.Clone(valid)
	flipped[FileHeaderSize+10] ^= 1 // bad checksum in the first record
	f.Add(flipped)
	huge := bytes.Clone(valid)
	binary.LittleEndian.PutUint32(huge[FileHeaderSize:], 1<<30-1) // length past EOF
	f.Add(huge)
	f.Add([]byte{})
	f.Add([]byte("APRONWAL"))
	if golden, err := os.ReadFile("testdata/segment_v1.wal"); err == nil {
		f.Add(golden)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		rr := newRecordReader(bytes.NewReader(data), size, 0)
		if _, err := rr.readFileHeader(); err != nil {
			// Decode the records anyway, as if they started at 0.
			rr = newRecordReader(bytes.NewReader(data), size, 0)
		}
		for {
			off := rr.off
			p, err := rr.next()
			if err == io.EOF {
				if rr.off != size {
					t.Fatalf("EOF at offset %d of %d", rr.off, size)
				}
				break
			}
			if err != nil {
				var rerr *recordError
				if !errors.As(err, &rerr) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				if rerr.Offset != off {
					t.Fatalf("error at offset %d, record started at %d", rerr.Offset, off)
				}
				break
			}
			end := off + RecordHeaderSize + int64(len(p))
			if len(p) == 0 || end > size || rr.off != end {
				t.Fatalf("record at %d of %d bytes runs to %d of %d (reader at %d)", off, len(p), end, size, rr.off)
			}
			if !bytes.Equal(p, data[off+RecordHeaderSize:end]) {
				t.Fatalf("record at %d does not match the input", off)
			}
			if stored := binary.LittleEndian.Uint32(data[off+4:]); stored != recordCRC(len(p), p) {
				t.Fatalf("record at %d returned with a bad checksum", off)
			}
			if binary.LittleEndian.Uint32(data[off:]) != uint32(len(p)) {
				t.Fatalf("record at %d: length field differs from the payload returned", off)
			}
		}
		if int64(cap(rr.buf)) > size {
			t.Fatalf("allocated a %d-byte payload buffer for %d bytes of input", cap(rr.buf), size)
		}
	})
}

func TestFileHeader(t *testing.T) {
	h := appendFileHeader(nil, 0x0102030405060708)
	if len(h) != FileHeaderSize || string(h[:8]) != "APRONWAL" {
		t.Fatalf("header % x", h)
	}
	id, err := parseFileHeader(h)
	if err != nil || id != 0x0102030405060708 {
		t.Fatalf("parseFileHeader = %x, %v", id, err)
	}
	for i := range 28 {
		b := bytes.Clone(h)
		b[i] ^= 0x01
		if _, err := parseFileHeader(b); err == nil {
			t.Fatalf("bit flipped in header byte %d not detected", i)
		}
	}
	if recordCRC(0) == 0 {
		t.Fatal("the checksum of a zero header is zero: a zeroed record would check out")
	}
}
