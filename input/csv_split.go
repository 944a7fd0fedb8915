package input

import (
	"bytes"
	"io"
)

// The CSV splitter cuts the file into chunks of whole rows, BatchRows rows
// each, so that workers can parse chunks in parallel and each chunk is one
// batch. It does not parse fields: a newline ends a row when the number of
// quotes since the row began is even (a quoted field holds its two quotes
// plus pairs of "", so the parity of a well-formed row is even at its end
// and odd inside a quoted field). That costs one IndexByte and one Count
// per line, both vectorized. A malformed row (a bare quote) makes the
// parity lie from there on; the parser reports the fault itself, at its
// real line, before it reaches a boundary the splitter got wrong.

const (
	// readSize is the least free space the splitter reads into at a time.
	readSize = 1 << 20
	// maxRowBytes bounds one row (and so the buffer when a quote is never
	// closed): past it the splitter hands the rows it has to the parser,
	// which reports the unclosed quote or the bare quote that caused it.
	maxRowBytes = 64 << 20
)

type csvSplitter struct {
	r    io.Reader
	buf  []byte // unconsumed data, read from r
	line int64  // line number of buf[0]
	eof  bool
	err  error // a read error other than io.EOF

	free       chan []byte // buffers handed back by the parsers
	rowBytes   int         // average row length seen, to size buffers
	maxRowSize int
}

func newCSVSplitter(r io.Reader, free chan []byte) *csvSplitter {
	return &csvSplitter{r: r, buf: make([]byte, 0, 4*readSize), line: 1, free: free, maxRowSize: maxRowBytes}
}

// scanResult is what scan found at the start of buf.
type scanResult struct {
	end    int   // buf[:end] holds the complete rows
	rows   int   // non-blank rows in buf[:end]
	lines  int64 // newlines in buf[:end]
	broken bool  // a row is longer than maxRowSize: buf[:end] holds all of it read so far
}

// scan finds up to n rows at the start of buf, reading more of the file as
// needed. At the end of the file an unterminated last row counts.
func (s *csvSplitter) scan(n int) scanResult {
	var res scanResult
	p, rowStart, odd := 0, 0, false
	// q is the next quote at or after p: -1 none in buf, -2 not searched.
	// Most lines have none, and then a line costs one IndexByte.
	q := -2
	for res.rows < n {
		i := bytes.IndexByte(s.buf[p:], '\n')
		if i < 0 {
			if s.eof || s.err != nil {
				if rowStart < len(s.buf) && !isBlank(s.buf[rowStart:]) {
					res.rows++
				}
				res.end = len(s.buf)
				return res
			}
			if len(s.buf)-rowStart > s.maxRowSize {
				res.end, res.broken = len(s.buf), true
				res.lines += int64(bytes.Count(s.buf[p:], []byte{'\n'}))
				return res
			}
			s.fill()
			q = -2
			continue
		}
		e := p + i
		if q == -2 || q >= 0 && q < p {
			q = bytes.IndexByte(s.buf[p:], '"')
			if q >= 0 {
				q += p
			}
		}
		if q >= 0 && q < e {
			if bytes.Count(s.buf[q:e], []byte{'"'})&1 == 1 {
				odd = !odd
			}
			q = -2
		}
		p = e + 1
		res.lines++
		if !odd {
			if !isBlank(s.buf[rowStart:e]) {
				res.rows++
			}
			rowStart = p
			res.end = p
		}
	}
	return res
}

// isBlank: an empty line (or a lone CR of a CRLF file) is not a row.
func isBlank(b []byte) bool { return len(b) == 0 || len(b) == 1 && b[0] == '\r' }

// fill reads more of the file into buf, growing it when it is full.
func (s *csvSplitter) fill() {
	if cap(s.buf)-len(s.buf) < readSize {
		nb := s.getBuf(2*cap(s.buf) + readSize)
		s.buf = append(nb, s.buf...)
	}
	n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil:
		s.err = err
	}
}

// skip drops the first n bytes (the BOM, the header), which span lines.
func (s *csvSplitter) skip(n int, lines int64) {
	s.buf = s.buf[n:]
	s.line += lines
}

// cut removes the first scanned rows from buf and returns them as a
// chunk's data, and the whole buffer to recycle once they are parsed. The
// chunk keeps buf's array (no copy of the rows); the remainder moves to a
// new buffer sized for the next chunk.
func (s *csvSplitter) cut(res scanResult, nextRows int) (data, whole []byte) {
	data, whole = s.buf[:res.end:res.end], s.buf
	if res.rows > 0 {
		s.rowBytes = res.end / res.rows
	}
	rest := s.buf[res.end:]
	want := s.rowBytes*nextRows + s.rowBytes*nextRows/8 + readSize
	nb := s.getBuf(max(want, len(rest)+readSize))
	s.buf = append(nb, rest...)
	s.line += res.lines
	return data, whole
}

// getBuf returns an empty buffer of at least n bytes, reusing one that a
// parser is done with when it is large enough.
func (s *csvSplitter) getBuf(n int) []byte {
	select {
	case b := <-s.free:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}
