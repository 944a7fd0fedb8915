package output

import (
	"fmt"
	"io"
	"runtime"
	"sync"
)

// sinkFlushSize is how much text the CSV and JSON writers gather before
// writing it out: large enough that the io.Writer is called rarely, small
// enough to be nothing next to a batch.
const sinkFlushSize = 64 << 10

// chunkRows is how many rows are formatted at a time, by one goroutine.
const chunkRows = 4096

// sink is the output of the text formats: text is appended to buf, which
// goes to w whenever it passes sinkFlushSize. An error of w is sticky:
// every later write returns it.
type sink struct {
	w      io.Writer
	buf    []byte
	err    error
	chunks [][]byte // one buffer per goroutine of writeRows
}

func newSink(w io.Writer) sink {
	return sink{w: w, buf: make([]byte, 0, sinkFlushSize+sinkFlushSize/4)}
}

// writeRows appends rows [0, n) of a batch, formatted by format (which
// appends rows [from, to) to dst), in order. Formatting numbers and times
// is most of the cost of a CSV or JSON export (strconv's shortest float
// formatting alone is two thirds of it), so a large batch is cut into
// chunks of chunkRows that up to GOMAXPROCS goroutines format at once, a
// wave at a time: memory stays at GOMAXPROCS chunks, the output is the same
// as formatting in order, and no goroutine outlives the call. format must
// only read shared state.
func (s *sink) writeRows(n int, format func(dst []byte, from, to int) []byte) error {
	if s.err != nil {
		return s.err
	}
	workers := min(runtime.GOMAXPROCS(0), (n+chunkRows-1)/chunkRows)
	if workers <= 1 {
		for from := 0; from < n; from += chunkRows {
			s.buf = format(s.buf, from, min(n, from+chunkRows))
			if len(s.buf) >= sinkFlushSize {
				if err := s.flush(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if len(s.chunks) < workers {
		s.chunks = make([][]byte, workers)
	}
	for wave := 0; wave < n; wave += workers * chunkRows {
		var wg sync.WaitGroup
		count := 0
		for k := range workers {
			from := wave + k*chunkRows
			if from >= n {
				break
			}
			count++
			wg.Go(func() { s.chunks[k] = format(s.chunks[k][:0], from, min(n, from+chunkRows)) })
		}
		wg.Wait()
		if err := s.flush(); err != nil {
			return err
		}
		for _, c := range s.chunks[:count] {
			if err := s.write(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes out what buf holds.
func (s *sink) flush() error {
	err := s.write(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *sink) write(p []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(p) > 0 {
		if _, err := s.w.Write(p); err != nil {
			s.err = fmt.Errorf("output: write: %w", err)
		}
	}
	return s.err
}

// release drops the buffers (after Close).
func (s *sink) release() {
	s.buf, s.chunks = nil, nil
}
