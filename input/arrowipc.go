package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// arrowFileMagic opens (and ends) an Arrow IPC file; a stream has none.
var arrowFileMagic = []byte("ARROW1")

// openArrow reads an Arrow IPC file (random access: its footer indexes
// the batches) or stream (sequential). A stream from a pipe is read as it
// comes; only a file from a pipe is spooled.
func openArrow(c *config, r io.Reader, size int64) (Reader, error) {
	if ra, n, ok := seekable(r, size); ok {
		head := make([]byte, len(arrowFileMagic))
		if _, err := ra.ReadAt(head, 0); err == nil && bytes.Equal(head, arrowFileMagic) {
			return openArrowFile(c, r, size)
		}
		cra := &countingReaderAt{ra: ra}
		return openArrowStream(c, io.NewSectionReader(cra, 0, n), cra.n.Load)
	}
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 1<<20)
	if head, _ := br.Peek(len(arrowFileMagic)); bytes.Equal(head, arrowFileMagic) {
		return openArrowFile(c, br, -1)
	}
	return openArrowStream(c, br, cr.n.Load)
}

type arrowFileSource struct {
	f    *randomFile
	fr   *ipc.FileReader
	i    int
	name string
}

func openArrowFile(c *config, r io.Reader, size int64) (Reader, error) {
	f, err := openRandom(c, r, size)
	if err != nil {
		return nil, err
	}
	fr, err := ipc.NewFileReader(f, ipc.WithAllocator(c.Mem))
	if err != nil {
		f.close()
		return nil, fmt.Errorf("input: %s is not a readable Arrow IPC file: %w", c.name, err)
	}
	src := &arrowFileSource{f: f, fr: fr, name: c.name}
	fix, err := newTimeFix(c, fr.Schema())
	if err != nil {
		src.close()
		return nil, err
	}
	return &recordReader{cfg: c, src: src, fix: fix, bytes: f.bytesRead}, nil
}

func (s *arrowFileSource) next() (arrow.RecordBatch, error) {
	for s.i < s.fr.NumRecords() {
		rec, err := s.fr.RecordBatchAt(s.i)
		s.i++
		if err != nil {
			return nil, fmt.Errorf("input: %s: Arrow batch %d: %w", s.name, s.i-1, err)
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		return rec, nil
	}
	return nil, io.EOF
}

func (s *arrowFileSource) close() error {
	return errors.Join(s.fr.Close(), s.f.close())
}

type arrowStreamSource struct {
	rd   *ipc.Reader
	name string
}

func openArrowStream(c *config, r io.Reader, bytesRead func() int64) (Reader, error) {
	rd, err := ipc.NewReader(r, ipc.WithAllocator(c.Mem))
	if err != nil {
		return nil, fmt.Errorf("input: %s is not a readable Arrow IPC stream or file: %w", c.name, err)
	}
	src := &arrowStreamSource{rd: rd, name: c.name}
	fix, err := newTimeFix(c, rd.Schema())
	if err != nil {
		src.close()
		return nil, err
	}
	return &recordReader{cfg: c, src: src, fix: fix, bytes: bytesRead}, nil
}

func (s *arrowStreamSource) next() (arrow.RecordBatch, error) {
	for s.rd.Next() {
		rec := s.rd.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain() // valid only until the next Next otherwise
		return rec, nil
	}
	if err := s.rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("input: %s: reading the Arrow stream: %w", s.name, err)
	}
	return nil, io.EOF
}

func (s *arrowStreamSource) close() error {
	s.rd.Release()
	return nil
}
