package input

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// fieldScanner reads CSV fields (RFC 4180, plus CRLF or LF endings) from a
// chunk of whole rows without allocating: a field is a slice of the chunk,
// or of scratch when it had to be unescaped ("" or CRLF in quotes).
type fieldScanner struct {
	data    []byte
	pos     int
	line    int64 // line of data[pos]
	delim   byte
	stop    [256]bool // bytes that end an unquoted field or are errors in it
	scratch []byte
	// truncated: data ends inside a row that the splitter gave up on
	// (longer than maxRowBytes), not at the end of the file.
	truncated bool
}

func newFieldScanner(delim byte) *fieldScanner {
	s := &fieldScanner{delim: delim}
	s.stop[delim] = true
	s.stop['\n'] = true
	s.stop['"'] = true
	return s
}

func (s *fieldScanner) reset(data []byte, line int64, truncated bool) {
	s.data, s.pos, s.line, s.truncated = data, 0, line, truncated
}

// skipBlank skips empty lines and reports whether a row follows.
func (s *fieldScanner) skipBlank() bool {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\n':
			s.pos++
			s.line++
		case '\r':
			if s.pos+1 == len(s.data) {
				s.pos++
			} else if s.data[s.pos+1] == '\n' {
				s.pos += 2
				s.line++
			} else {
				return true
			}
		default:
			return true
		}
	}
	return false
}

var (
	errBareQuote   = fmt.Errorf("%w: bare \" in a non-quoted field (quote the whole field and double the quote: \"a\"\"b\")", ErrSyntax)
	errAfterQuote  = fmt.Errorf("%w: text after the closing quote of a quoted field (a quote inside a quoted field is written \"\")", ErrSyntax)
	errUnclosedEOF = fmt.Errorf("%w: quoted field not closed before the end of the file", ErrSyntax)
	errUnclosedBig = fmt.Errorf("%w: quoted field not closed within %d MiB", ErrSyntax, maxRowBytes>>20)
	errRowTooLong  = fmt.Errorf("%w: a row longer than %d MiB (is the file CSV, with LF or CRLF line ends?)", ErrSyntax, maxRowBytes>>20)
)

// next returns the next field of the current row and whether it was the
// row's last. On error, errLine is the line to report (an unclosed quote
// is reported where it opened).
func (s *fieldScanner) next() (field []byte, last bool, errLine int64, err error) {
	data := s.data
	i := s.pos
	if i < len(data) && data[i] == '"' {
		return s.quoted()
	}
	start := i
	for i < len(data) && !s.stop[data[i]] {
		i++
	}
	if i == len(data) {
		if s.truncated {
			return nil, false, s.line, errRowTooLong
		}
		s.pos = i
		return trimCR(data[start:i]), true, 0, nil
	}
	switch data[i] {
	case '\n':
		s.pos = i + 1
		s.line++
		return trimCR(data[start:i]), true, 0, nil
	case '"':
		return nil, false, s.line, errBareQuote
	}
	s.pos = i + 1 // the delimiter
	return data[start:i], false, 0, nil
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// quoted reads a quoted field at s.pos.
func (s *fieldScanner) quoted() (field []byte, last bool, errLine int64, err error) {
	data := s.data
	openLine := s.line
	start := s.pos + 1
	i := start
	escaped := false // "" inside, or CRLF: the field needs rewriting
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			s.line += int64(bytes.Count(data[i:], []byte{'\n'}))
			if s.truncated {
				return nil, false, openLine, errUnclosedBig
			}
			return nil, false, openLine, errUnclosedEOF
		}
		if nl := bytes.Count(data[i:i+j], []byte{'\n'}); nl > 0 {
			s.line += int64(nl)
			escaped = true // may hold CRLF; checked in unescape
		}
		i += j + 1
		if i < len(data) && data[i] == '"' {
			escaped = true
			i++
			continue
		}
		break
	}
	field = data[start : i-1]
	if escaped {
		field = s.unescape(field)
	}
	if i == len(data) {
		if s.truncated {
			return nil, false, openLine, errRowTooLong
		}
		s.pos = i
		return field, true, 0, nil
	}
	switch c := data[i]; {
	case c == s.delim:
		s.pos = i + 1
		return field, false, 0, nil
	case c == '\n':
		s.pos = i + 1
		s.line++
		return field, true, 0, nil
	case c == '\r' && (i+1 == len(data) || data[i+1] == '\n'):
		if i+1 == len(data) {
			s.pos = i + 1
		} else {
			s.pos = i + 2
			s.line++
		}
		return field, true, 0, nil
	}
	return nil, false, s.line, errAfterQuote
}

// unescape turns "" into " and CRLF into LF (as encoding/csv does, so a
// value reads the same whatever the file's line endings).
func (s *fieldScanner) unescape(f []byte) []byte {
	if bytes.IndexByte(f, '"') < 0 && bytes.IndexByte(f, '\r') < 0 {
		return f
	}
	out := s.scratch[:0]
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '"' && i+1 < len(f) && f[i+1] == '"':
			i++
		case c == '\r' && i+1 < len(f) && f[i+1] == '\n':
			continue
		}
		out = append(out, c)
	}
	s.scratch = out
	return out
}

// endNumber consumes the terminator after a number that ends at i and
// reports whether it ended the row; ok is false when i is not at a
// terminator, and then nothing is consumed.
func (s *fieldScanner) endNumber(i int) (last, ok bool) {
	data := s.data
	switch {
	case i == len(data):
		if s.truncated {
			return false, false // let next report it
		}
		s.pos = i
		return true, true
	case data[i] == s.delim:
		s.pos = i + 1
		return false, true
	case data[i] == '\n':
		s.pos = i + 1
		s.line++
		return true, true
	case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
		s.pos = i + 2
		s.line++
		return true, true
	}
	return false, false
}

// nextFloat parses an unquoted decimal of at most 19 digits at s.pos in
// the same pass as it scans it (see parseFloat64); ok is false, and
// nothing consumed, for anything else.
func (s *fieldScanner) nextFloat() (v float64, last, ok bool) {
	v, i, ok := scanDecimal(s.data, s.pos)
	if !ok {
		return 0, false, false
	}
	if last, ok = s.endNumber(i); !ok {
		return 0, false, false
	}
	return v, last, true
}

// nextISOTime is nextFloat for the timestamp text scanISOFast reads.
func (s *fieldScanner) nextISOTime(c *dateCache) (ns int64, last, ok bool) {
	ns, i, ok := scanISOFast(s.data, s.pos, c)
	if !ok {
		return 0, false, false
	}
	if last, ok = s.endNumber(i); !ok {
		return 0, false, false
	}
	return ns, last, true
}

// nextInt is nextFloat for integers of at most 18 digits (which cannot
// overflow an int64).
func (s *fieldScanner) nextInt() (v int64, last, ok bool) {
	data := s.data
	i := s.pos
	neg := false
	if i < len(data) && (data[i] == '-' || data[i] == '+') {
		neg = data[i] == '-'
		i++
	}
	start := i
	for ; i < len(data) && data[i]-'0' <= 9; i++ {
		v = v*10 + int64(data[i]-'0')
	}
	if nd := i - start; nd == 0 || nd > 18 {
		return 0, false, false
	}
	if last, ok = s.endNumber(i); !ok {
		return 0, false, false
	}
	if neg {
		v = -v
	}
	return v, last, true
}

// skipRow moves to the start of the next row after an error in this one,
// for the sampler, which keeps going past bad rows.
func (s *fieldScanner) skipRow() {
	for s.pos < len(s.data) {
		_, last, _, err := s.next()
		if err != nil {
			// Resynchronise at the next newline.
			if k := bytes.IndexByte(s.data[s.pos:], '\n'); k >= 0 {
				s.pos += k + 1
				s.line++
			} else {
				s.pos = len(s.data)
			}
			return
		}
		if last {
			return
		}
	}
}

// csvChunkParser parses chunks into record batches; each worker has one.
type csvChunkParser struct {
	cfg      *config
	specs    []colSpec
	schema   *arrow.Schema
	strBytes []int // per column: average string bytes per row in the sample
	sc       *fieldScanner
	dates    dateCache // the last date nextISOTime read
}

// parse turns one chunk into a record batch.
func (p *csvChunkParser) parse(ch *csvChunk) csvResult {
	res := csvResult{firstLine: ch.firstLine}
	ncols := len(p.specs)
	cols := make([]*colBuilder, ncols)
	for i, s := range p.specs {
		cols[i] = newDirectColBuilder(p.cfg.Mem, s, ch.rows, p.strBytes[i]*ch.rows)
	}
	if !utf8.Valid(ch.data) {
		for _, c := range cols {
			c.checkUTF8 = true
		}
	}
	sc := p.sc
	sc.reset(ch.data, ch.firstLine, ch.broken)
	// Timestamps as text are read in place unless --time-format is an
	// epoch unit or a Go layout.
	isoTimes := p.cfg.time.mode == timeAuto || p.cfg.time.mode == timeRFC3339
	rows := 0
	for sc.skipBlank() {
		rowLine := sc.line
		if rows == 0 {
			res.firstLine = rowLine
		}
		for c := 0; ; c++ {
			var last, done bool
			if c < ncols {
				// Numbers are parsed while they are scanned; anything
				// unusual (quotes, empty, long, bad) takes the general
				// path from the field's start.
				switch col := cols[c]; {
				case col.fx == nil:
				case col.kind == KindFloat64:
					var v float64
					if v, last, done = sc.nextFloat(); done {
						col.fx.putFloat(v)
					}
				case col.kind == KindInt64:
					var v int64
					if v, last, done = sc.nextInt(); done {
						col.fx.putInt(v)
					}
				case col.kind == KindTimestamp && isoTimes:
					var v int64
					if v, last, done = sc.nextISOTime(&p.dates); done {
						col.fx.putInt(v)
					}
				}
			}
			if !done {
				var err error
				if last, err = p.field(sc, cols, c, rowLine); err != nil {
					releaseBuilders(cols)
					res.err = err
					return res
				}
			}
			if last {
				if c+1 < ncols {
					releaseBuilders(cols)
					res.err = p.cfg.errorAt(rowLine, 0, "", fmt.Errorf("%w: the row has %d fields, the header %d", ErrSyntax, c+1, ncols))
					return res
				}
				break
			}
		}
		rows++
		res.lastLine = sc.line
		if sc.pos > 0 && sc.data[sc.pos-1] == '\n' {
			res.lastLine-- // the row's newline moved sc.line to the next line
		}
	}
	res.rows = rows
	res.rec = buildRecord(p.schema, cols, rows)
	return res
}

// field scans and appends field c of the row starting at rowLine.
func (p *csvChunkParser) field(sc *fieldScanner, cols []*colBuilder, c int, rowLine int64) (last bool, err error) {
	ncols := len(p.specs)
	f, last, errLine, err := sc.next()
	if err != nil {
		name := ""
		if c < ncols {
			name = p.specs[c].name
		}
		return false, p.cfg.errorAt(errLine, 0, name, err)
	}
	if c >= ncols {
		return false, p.cfg.errorAt(rowLine, 0, "", fmt.Errorf("%w: the row has more fields than the header's %d", ErrSyntax, ncols))
	}
	s := p.specs[c]
	if len(f) == 0 {
		if s.origin == originTime {
			return false, p.cfg.errorAt(rowLine, 0, s.name, errNoTime)
		}
		cols[c].appendNull()
		return last, nil
	}
	if err := cols[c].appendText(f, &p.cfg.time); err != nil {
		return false, p.cfg.errorAt(rowLine, 0, s.name, withHint(err, s.name, s.origin, sampleRows, suggestKind(s.kind, f)))
	}
	return last, nil
}

var errNoTime = errors.New("the time is empty (every row needs one; leave the column out to have the server stamp the rows)")
