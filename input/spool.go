package input

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// randomFile is a file that Parquet and Arrow IPC file readers can ReadAt,
// counting the bytes they read for BytesRead.
type randomFile struct {
	*io.SectionReader
	read  *atomic.Int64
	spool *os.File // the temporary copy of a non-seekable input, or nil
}

type countingReaderAt struct {
	ra io.ReaderAt
	n  atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.ra.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// seekable returns r as a ReaderAt and its size when r can really seek: a
// pipe is an *os.File too, but its Seek fails.
func seekable(r io.Reader, size int64) (io.ReaderAt, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	sk, ok2 := r.(io.Seeker)
	if !ok || !ok2 {
		return nil, 0, false
	}
	end, err := sk.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, false
	}
	if size < 0 {
		size = end
	}
	return ra, size, true
}

// openRandom makes r randomly readable, copying it to a temporary file
// when it is not (stdin). The copy is removed by close.
func openRandom(c *config, r io.Reader, size int64) (*randomFile, error) {
	if ra, n, ok := seekable(r, size); ok {
		cra := &countingReaderAt{ra: ra}
		return &randomFile{SectionReader: io.NewSectionReader(cra, 0, n), read: &cra.n}, nil
	}
	f, err := os.CreateTemp("", "apron-write-*")
	if err != nil {
		return nil, fmt.Errorf("input: %s needs random access; spooling it to a temporary file: %w", c.name, err)
	}
	n, err := io.Copy(f, r)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("input: %s needs random access; spooling it to %s: %w", c.name, f.Name(), err)
	}
	cra := &countingReaderAt{ra: f}
	return &randomFile{SectionReader: io.NewSectionReader(cra, 0, n), read: &cra.n, spool: f}, nil
}

func (f *randomFile) bytesRead() int64 {
	return min(f.read.Load(), f.Size())
}

// close removes the spool file, if any; the caller's file stays open.
func (f *randomFile) close() error {
	if f == nil || f.spool == nil {
		return nil
	}
	err := f.spool.Close()
	if rerr := os.Remove(f.spool.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	f.spool = nil
	return err
}
