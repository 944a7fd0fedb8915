package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	// FileHeaderSize is the size of the header at the start of every file.
	FileHeaderSize = 32
	// RecordHeaderSize is the size of the length and checksum before each
	// payload.
	RecordHeaderSize = 8
	// MaxRecordSize is the largest payload a record may have.
	MaxRecordSize = 1 << 30
	// FormatVersion is the version written in the file header.
	FormatVersion = 1

	fileMagic = "APRONWAL"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is matched (errors.Is) by every error that reports bytes that
// do not decode: *CorruptionError and the errors of DecodeEntry.
var ErrCorrupt = errors.New("wal: corrupt data")

// SegmentFileName returns the base name of the WAL file of a segment.
func SegmentFileName(segmentID uint64) string {
	return fmt.Sprintf("%020d.wal", segmentID)
}

// appendFileHeader appends the 32-byte file header of a segment to dst.
func appendFileHeader(dst []byte, segmentID uint64) []byte {
	var h [FileHeaderSize]byte
	copy(h[0:8], fileMagic)
	binary.LittleEndian.PutUint32(h[8:12], FormatVersion)
	binary.LittleEndian.PutUint64(h[16:24], segmentID)
	binary.LittleEndian.PutUint32(h[24:28], crc32.Checksum(h[0:24], castagnoli))
	return append(dst, h[:]...)
}

// parseFileHeader checks a 32-byte file header and returns its segment id.
func parseFileHeader(h []byte) (uint64, error) {
	if len(h) < FileHeaderSize {
		return 0, fmt.Errorf("short file header (%d bytes)", len(h))
	}
	if string(h[0:8]) != fileMagic {
		return 0, fmt.Errorf("bad magic %q", h[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(h[24:28]), crc32.Checksum(h[0:24], castagnoli); got != want {
		return 0, fmt.Errorf("file header checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint32(h[8:12]); v != FormatVersion {
		return 0, fmt.Errorf("unsupported format version %d", v)
	}
	return binary.LittleEndian.Uint64(h[16:24]), nil
}

// recordCRC returns the checksum of a record: CRC-32C of the 4 length bytes
// followed by the payload.
func recordCRC(size int, payload ...[]byte) uint32 {
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(size))
	crc := crc32.Checksum(l[:], castagnoli)
	for _, part := range payload {
		crc = crc32.Update(crc, castagnoli, part)
	}
	return crc
}

// recordErrKind tells how a record failed to decode.
type recordErrKind int

const (
	kindShortHeader   recordErrKind = iota // fewer than 8 bytes left
	kindZeroHeader                         // length and checksum all zero
	kindPastEOF                            // length runs past the end of the file
	kindBadLength                          // 0 or > MaxRecordSize, non-zero bytes follow
	kindBadLengthTail                      // same, only zero bytes follow
	kindChecksum                           // bad checksum, non-zero bytes follow
	kindChecksumTail                       // bad checksum, only zero bytes (or nothing) follow
)

// recordError reports a record that does not decode.
type recordError struct {
	Offset int64 // offset of the record header
	Kind   recordErrKind
	Msg    string
}

func (e *recordError) Error() string { return e.Msg }

// torn reports whether the error, found in the newest file, is a torn tail
// (an unfinished write) rather than corruption.
func (e *recordError) torn() bool {
	switch e.Kind {
	case kindShortHeader, kindZeroHeader, kindPastEOF, kindBadLengthTail, kindChecksumTail:
		return true
	}
	return false
}

// recordReader reads a file sequentially. Lengths read from the file are
// checked against the bytes left before anything is allocated, so the
// reader never allocates more than the size of the file.
type recordReader struct {
	br   *bufio.Reader
	size int64 // size of the file
	off  int64 // offset of the next unread byte: the end of the last good record
	hdr  [FileHeaderSize]byte
	buf  []byte // payload buffer, reused
}

const readBufferSize = 64 << 10

func newRecordReader(r io.ReaderAt, size, start int64) *recordReader {
	bs := int64(readBufferSize)
	if size-start < bs {
		bs = max(size-start, 16)
	}
	return &recordReader{
		br:   bufio.NewReaderSize(io.NewSectionReader(r, start, size-start), int(bs)),
		size: size,
		off:  start,
	}
}

// readFileHeader reads the file header; the reader must be at offset 0.
func (rr *recordReader) readFileHeader() (uint64, error) {
	if rr.size < FileHeaderSize {
		return 0, fmt.Errorf("short file header: file has %d bytes", rr.size)
	}
	if _, err := io.ReadFull(rr.br, rr.hdr[:]); err != nil {
		return 0, fmt.Errorf("read file header: %w", err)
	}
	rr.off = FileHeaderSize
	return parseFileHeader(rr.hdr[:])
}

// next returns the payload of the next record, valid until the next call. It
// returns io.EOF at a clean end of file, a *recordError for bytes that do
// not decode, and other errors for failed reads.
func (rr *recordReader) next() ([]byte, error) {
	off := rr.off
	left := rr.size - off
	if left == 0 {
		return nil, io.EOF
	}
	if left < RecordHeaderSize {
		return nil, &recordError{off, kindShortHeader, fmt.Sprintf("partial record header (%d bytes left)", left)}
	}
	h := rr.hdr[:RecordHeaderSize]
	if _, err := io.ReadFull(rr.br, h); err != nil {
		return nil, fmt.Errorf("read record header: %w", unexpectedEOF(err))
	}
	length := int64(binary.LittleEndian.Uint32(h[0:4]))
	stored := binary.LittleEndian.Uint32(h[4:8])
	left -= RecordHeaderSize
	switch {
	case length == 0 && stored == 0:
		return nil, &recordError{off, kindZeroHeader, "zeroed record header"}
	case length > left:
		return nil, &recordError{off, kindPastEOF, fmt.Sprintf("record length %d runs past end of file (%d bytes left)", length, left)}
	case length == 0 || length > MaxRecordSize:
		kind := kindBadLength
		if zero, err := rr.restIsZero(); err != nil {
			return nil, err
		} else if zero {
			kind = kindBadLengthTail
		}
		return nil, &recordError{off, kind, fmt.Sprintf("invalid record length %d", length)}
	}
	// length <= left: the allocation is bounded by the size of the file.
	if int64(cap(rr.buf)) < length {
		rr.buf = make([]byte, length)
	}
	p := rr.buf[:length]
	if _, err := io.ReadFull(rr.br, p); err != nil {
		return nil, fmt.Errorf("read record payload: %w", unexpectedEOF(err))
	}
	if computed := recordCRC(len(p), p); computed != stored {
		kind := kindChecksum
		if zero, err := rr.restIsZero(); err != nil {
			return nil, err
		} else if zero {
			kind = kindChecksumTail
		}
		return nil, &recordError{off, kind, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x, length %d)", stored, computed, length)}
	}
	rr.off = off + RecordHeaderSize + length
	return p, nil
}

// restIsZero reads what is left of the file and reports whether it is all
// zero bytes. It does not move rr.off.
func (rr *recordReader) restIsZero() (bool, error) {
	for {
		b, err := rr.br.Peek(rr.br.Buffered())
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		if _, derr := rr.br.Discard(len(b)); derr != nil {
			return false, derr
		}
		if err != nil {
			return false, err
		}
		if _, err := rr.br.Peek(1); err == io.EOF {
			return true, nil
		} else if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return false, err
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
