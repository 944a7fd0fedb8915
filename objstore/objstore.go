package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"
)

// Errors returned by every Store. Test with errors.Is: the returned errors
// wrap these with the name and operation.
var (
	// ErrNotFound: no object has that name.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: a Put with MustNotExist found the name taken. The object
	// that was there is left as it was.
	ErrExists = errors.New("objstore: object already exists")
	// ErrInvalidName: the name breaks the rules of ValidateName.
	ErrInvalidName = errors.New("objstore: invalid object name")
	// ErrChecksum: the data read from the caller's reader does not match
	// PutOptions.CRC32C. Nothing was stored.
	ErrChecksum = errors.New("objstore: CRC32C mismatch")
	// ErrSizeMismatch: the caller's reader gave a different number of bytes
	// than the size passed to Put. Nothing was stored.
	ErrSizeMismatch = errors.New("objstore: size mismatch")
	// ErrInvalidRange: a negative offset was passed to GetRange.
	ErrInvalidRange = errors.New("objstore: invalid range")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("objstore: store closed")
)

// MaxNameLen is the longest name accepted, in bytes (the GCS limit).
const MaxNameLen = 1024

// Attrs describes a stored object.
type Attrs struct {
	Size    int64
	CRC32C  uint32 // Castagnoli CRC of the whole object
	Created time.Time
}

// ObjectInfo is one entry of a List.
type ObjectInfo struct {
	Name string
	Attrs
}

// PutOptions modify a Put.
type PutOptions struct {
	// MustNotExist makes the Put fail with ErrExists when the name is
	// already taken; the object that is there is kept. This is what makes a
	// retried persist of a deterministic name safe.
	MustNotExist bool
	// CRC32C, when the caller knows it, is checked against the data; a
	// mismatch fails the Put with ErrChecksum and stores nothing. For GCS it
	// also lets the upload stream without buffering (see GCS.Put).
	CRC32C *uint32
}

// Store is a flat namespace of immutable-ish objects addressed by
// slash-separated names, after pebble's remote.Storage.
//
// Semantics shared by all implementations (checked by objstoretest.RunSuite):
//   - Put is atomic: readers see the old object (or none) or the whole new
//     one, never a prefix. A Put that fails, or whose context is cancelled,
//     leaves no object behind (and keeps any previous one).
//   - size >= 0 is the exact number of bytes data yields (else
//     ErrSizeMismatch); size < 0 means unknown.
//   - GetRange(off, n): off < 0 is ErrInvalidRange; n < 0 reads to the end;
//     a range past the end is clipped, so off >= size gives an empty reader.
//   - List(prefix) is a plain string prefix match on the whole name (so
//     "a/b" matches "a/b/c" and "a/bc"); pass "a/b/" for one "directory".
//     Results are sorted by name (byte order).
//   - Delete of a missing name returns nil (idempotent, so it can be
//     retried blindly).
//   - Get, GetRange and Attributes of a missing name return an error
//     wrapping ErrNotFound.
//   - Invalid names return an error wrapping ErrInvalidName.
type Store interface {
	Put(ctx context.Context, name string, data io.Reader, size int64, opts PutOptions) error
	Get(ctx context.Context, name string) (io.ReadCloser, error)
	GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error)
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	Delete(ctx context.Context, name string) error
	Attributes(ctx context.Context, name string) (Attrs, error)
	// URI says where a client could read the object directly:
	// "gs://bucket/prefix/name" or "file:///abs/path/name".
	URI(name string) string
	Close() error
}

// ValidateName checks an object name: a non-empty, slash-separated relative
// path of at most MaxNameLen bytes, with no empty segment (so no leading or
// trailing slash and no "//"), no segment starting with '.' (which excludes
// "." and ".." and reserves hidden names for the stores' own temporary
// files), and no NUL, CR or LF byte. Errors wrap ErrInvalidName.
func ValidateName(name string) error {
	if err := validateName(name); err != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidName, name, err)
	}
	return nil
}

func validateName(name string) string {
	if name == "" {
		return "empty"
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	}
	if strings.ContainsAny(name, "\x00\r\n") {
		return "contains NUL, CR or LF"
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch {
		case seg == "":
			return "empty path segment"
		case seg[0] == '.':
			return "path segment starts with '.'"
		}
	}
	return ""
}

// validatePrefix checks a List prefix: "" or a string that could start a
// valid name (a trailing slash is allowed).
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	p := strings.TrimSuffix(prefix, "/")
	if p == "" || validateName(p) != "" {
		return fmt.Errorf("%w: bad list prefix %q", ErrInvalidName, prefix)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the Castagnoli CRC of b, the checksum kept in Attrs.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// checkPut validates the common arguments of Put.
func checkPut(name string, data io.Reader) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if data == nil {
		return errors.New("objstore: nil reader")
	}
	return nil
}

// checkRange validates GetRange arguments.
func checkRange(name string, off int64) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("%w: offset %d of %q", ErrInvalidRange, off, name)
	}
	return nil
}

// clip returns the part [start, end) of an object of the given size that
// GetRange(off, n) reads.
func clip(size, off, n int64) (start, end int64) {
	start = min(off, size)
	end = size
	if n >= 0 && n < size-start {
		end = start + n
	}
	return start, end
}

// ctxReader fails reads once ctx is done, so a cancelled Put stops copying.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// checkSizeCRC compares what was read with what the caller announced.
func checkSizeCRC(name string, size, got int64, wantCRC *uint32, gotCRC uint32) error {
	if size >= 0 && got != size {
		return fmt.Errorf("%w: %q: read %d bytes, expected %d", ErrSizeMismatch, name, got, size)
	}
	if wantCRC != nil && *wantCRC != gotCRC {
		return fmt.Errorf("%w: %q: data has %08x, caller said %08x", ErrChecksum, name, gotCRC, *wantCRC)
	}
	return nil
}

// readAllLimited reads the whole of r, failing the size check later rather
// than buffering without bound: with size >= 0 at most size+1 bytes are read.
func readAllLimited(r io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	if size >= 0 {
		buf.Grow(int(min(size, 64<<20)) + bytes.MinRead)
		r = io.LimitReader(r, size+1)
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
