package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// jsonlReader reads JSON Lines on the caller's goroutine. The types come
// from the first sampleRows lines, which are held in memory and replayed;
// a key first seen later becomes a new column, which closes the batch in
// progress: the next batch has the wider schema.
type jsonlReader struct {
	cfg *config
	cr  *countingReader
	br  *bufio.Reader

	line   int64 // line number of the last line read
	sample []jsonLine
	eof    bool

	specs    []colSpec
	index    map[string]int // key in the file → column
	timeKey  string         // the key that becomes "time", "" if none
	schema   *arrow.Schema  // of specs, rebuilt when a column is added
	builders []*colBuilder
	lastRow  []int // per column: last row of the batch it has a value in

	rows                int // rows in the batch in progress
	firstLine, lastLine int64
	rowsDone            int64 // rows returned in earlier batches

	pending *jsonLine // a line whose new keys closed the previous batch
	idx     []int     // scratch: the column of each field of a line
	sc      jsonScanner
	long    []byte // a line longer than br's buffer
	err     error
	closed  bool
}

// jsonLine is a line kept for later: a sampled line, or one pending.
type jsonLine struct {
	num  int64
	text []byte
}

func openJSONL(c *config, r io.Reader) (Reader, error) {
	cr := &countingReader{r: r}
	rd := &jsonlReader{cfg: c, cr: cr, br: bufio.NewReaderSize(cr, 1<<20), index: map[string]int{}}
	if err := rd.inferSample(); err != nil {
		return nil, err
	}
	return rd, nil
}

// readLine returns the next non-blank line, without its line end. The
// slice is valid until the next call.
func (rd *jsonlReader) readLine() ([]byte, error) {
	for {
		b, err := rd.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			rd.long = append(rd.long[:0], b...)
			for err == bufio.ErrBufferFull {
				b, err = rd.br.ReadSlice('\n')
				rd.long = append(rd.long, b...)
			}
			b = rd.long
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("input: reading %s: %w", rd.cfg.name, err)
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		rd.line++
		if rd.line == 1 {
			b = bytes.TrimPrefix(b, bom)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			return t, nil
		}
		if err == io.EOF {
			return nil, io.EOF
		}
	}
}

// inferSample reads up to sampleRows lines and sets the columns from
// them. A line that does not parse ends the sample; Next reports it at
// its turn, after the lines before it.
func (rd *jsonlReader) inferSample() error {
	type keyInfo struct {
		seen kindSet
		nul  bool
	}
	var order []string
	keys := map[string]*keyInfo{}
	for len(rd.sample) < sampleRows {
		b, err := rd.readLine()
		if err == io.EOF {
			rd.eof = true
			break
		}
		if err != nil {
			return err
		}
		ln := jsonLine{num: rd.line, text: bytes.Clone(b)}
		rd.sample = append(rd.sample, ln)
		fields, perr := rd.sc.parse(ln.text)
		if perr != nil {
			break
		}
		for _, f := range fields {
			k := keys[string(f.key)]
			if k == nil {
				k = &keyInfo{}
				keys[string(f.key)] = k
				order = append(order, string(f.key))
			}
			switch f.kind {
			case jsonInt:
				k.seen |= sawInt
			case jsonFloat:
				k.seen |= sawFloat
			case jsonBool:
				k.seen |= sawBool
			case jsonString, jsonNested:
				k.seen |= sawString
			}
		}
	}
	timeIdx, err := timeColumnIndex(order, rd.cfg.TimeColumn)
	if err != nil {
		return rd.cfg.errorAt(0, 0, "", err)
	}
	if timeIdx >= 0 {
		rd.timeKey = order[timeIdx]
	}
	for _, key := range order {
		if _, err := rd.addColumn(key, keys[key].seen.kind(), originInferred); err != nil {
			return err
		}
	}
	return nil
}

// addColumn appends a column for key. Its kind is, in order: the time
// column's, the one --schema gives, then kind.
func (rd *jsonlReader) addColumn(key string, kind Kind, origin typeOrigin) (int, error) {
	s := colSpec{name: key, kind: kind, origin: origin}
	if k, ok := rd.cfg.schema[key]; ok {
		s.kind, s.origin = k, originSchema
	}
	if key == rd.timeKey {
		if k, ok := rd.cfg.schema[TimeColumnName]; ok && s.origin != originSchema {
			s.kind, s.origin = k, originSchema
		}
		if s.origin == originSchema && s.kind != KindTimestamp {
			return 0, rd.cfg.errorAt(0, 0, key, schemaf("--schema makes the time column a%s %s; it is always a timestamp (set --time-format to read numbers)", article(s.kind), s.kind))
		}
		s.name, s.kind, s.origin = TimeColumnName, KindTimestamp, originTime
	} else if key == TimeColumnName && rd.timeKey == "" && rd.cfg.TimeColumn == "" {
		// A "time" key first seen after the sample is the time column
		// from here on; the batches before it had none.
		rd.timeKey = key
		s.kind, s.origin = KindTimestamp, originTime
	} else if key == TimeColumnName && rd.timeKey != "" {
		return 0, rd.cfg.errorAt(rd.line, 0, key, schemaf("the file has a key %q and --time-column names %q: both would be the time column; rename or drop one", TimeColumnName, rd.timeKey))
	}
	i := len(rd.specs)
	rd.specs = append(rd.specs, s)
	rd.index[key] = i
	rd.schema = nil
	if rd.builders != nil {
		rd.builders = append(rd.builders, newColBuilder(rd.cfg.Mem, s.kind, 0, 0))
		rd.lastRow = append(rd.lastRow, -1)
	}
	return i, nil
}

func (rd *jsonlReader) Next() (Batch, error) {
	if rd.closed {
		return Batch{}, errClosed
	}
	if rd.err != nil {
		return Batch{}, rd.err
	}
	b, err := rd.fill()
	if err != nil {
		rd.discard()
		rd.err = err
		return Batch{}, err
	}
	return b, nil
}

// fill appends lines to the batch until it is full, a new key closes it,
// or the file ends.
func (rd *jsonlReader) fill() (Batch, error) {
	for {
		var ln jsonLine
		switch {
		case rd.pending != nil:
			ln, rd.pending = *rd.pending, nil
		case len(rd.sample) > 0:
			ln, rd.sample = rd.sample[0], rd.sample[1:]
		case rd.eof:
			return rd.flush()
		default:
			text, err := rd.readLine()
			if err == io.EOF {
				rd.eof = true
				return rd.flush()
			}
			if err != nil {
				return Batch{}, err
			}
			ln = jsonLine{num: rd.line, text: text}
		}
		closed, err := rd.appendLine(ln)
		if err != nil {
			return Batch{}, err
		}
		if closed {
			return rd.flush()
		}
		if rd.rows == rd.cfg.BatchRows {
			return rd.flush()
		}
	}
}

// appendLine appends one line as a row. When the line has a key that no
// column has and the batch has rows, it keeps the line as pending and
// reports closed: the batch goes out with the schema it has.
func (rd *jsonlReader) appendLine(ln jsonLine) (closed bool, err error) {
	fields, err := rd.sc.parse(ln.text)
	if err != nil {
		var je *jsonError
		if errors.As(err, &je) {
			return false, rd.cfg.errorAt(ln.num, 0, je.key, err)
		}
		return false, rd.cfg.errorAt(ln.num, 0, "", err)
	}
	// Each key is looked up once; -1: not a column (yet).
	idx := rd.idx[:0]
	for _, f := range fields {
		i, ok := rd.index[string(f.key)]
		if !ok {
			i = -1
		}
		idx = append(idx, i)
	}
	rd.idx = idx
	for k, f := range fields {
		if idx[k] >= 0 || f.kind == jsonNull {
			continue
		}
		if rd.rows > 0 {
			rd.pending = &jsonLine{num: ln.num, text: bytes.Clone(ln.text)}
			return true, nil
		}
		kind := KindString
		switch f.kind {
		case jsonBool:
			kind = KindBool
		case jsonInt, jsonFloat:
			// One value is no sample: an integer now may be 1.5
			// later, and a float64 holds both.
			kind = KindFloat64
		}
		i, err := rd.addColumn(string(f.key), kind, originLate)
		if err != nil {
			return false, err
		}
		idx[k] = i
	}
	if rd.builders == nil {
		rd.startBatch()
	}
	row := rd.rows
	checkUTF8 := !utf8.Valid(ln.text)
	for k, f := range fields {
		i := idx[k]
		if i < 0 {
			continue // null under a key never seen with a value
		}
		if rd.lastRow[i] == row {
			return false, rd.cfg.errorAt(ln.num, 0, string(f.key), fmt.Errorf("%w: the key appears twice in the object", ErrSyntax))
		}
		rd.lastRow[i] = row
		col, s := rd.builders[i], rd.specs[i]
		col.checkUTF8 = checkUTF8
		switch {
		case f.kind == jsonNull:
			if s.origin == originTime {
				return false, rd.cfg.errorAt(ln.num, 0, string(f.key), errNoTime)
			}
			col.appendNull()
			continue
		case f.kind == jsonNested && s.kind != KindString:
			return false, rd.cfg.errorAt(ln.num, 0, string(f.key),
				withHint(fmt.Errorf("%w: an object or array is not a%s %s", ErrType, article(s.kind), s.kind), string(f.key), s.origin, sampleRows, KindString))
		}
		if err := col.appendText(f.val, &rd.cfg.time); err != nil {
			return false, rd.cfg.errorAt(ln.num, 0, string(f.key), withHint(err, string(f.key), s.origin, sampleRows, suggestKind(s.kind, f.val)))
		}
	}
	for i, last := range rd.lastRow {
		if last != row {
			if rd.specs[i].origin == originTime {
				return false, rd.cfg.errorAt(ln.num, 0, rd.timeKey, errNoTime)
			}
			rd.builders[i].appendNull()
			rd.lastRow[i] = row
		}
	}
	if rd.rows == 0 {
		rd.firstLine = ln.num
	}
	rd.lastLine = ln.num
	rd.rows++
	return false, nil
}

func (rd *jsonlReader) startBatch() {
	rd.builders = make([]*colBuilder, len(rd.specs))
	rd.lastRow = make([]int, len(rd.specs))
	hint := min(rd.cfg.BatchRows, 4096)
	for i, s := range rd.specs {
		rd.builders[i] = newColBuilder(rd.cfg.Mem, s.kind, hint, 0)
		rd.lastRow[i] = -1
	}
}

// flush returns the batch in progress, or io.EOF when there is none.
func (rd *jsonlReader) flush() (Batch, error) {
	if rd.rows == 0 {
		rd.discard()
		if rd.pending != nil {
			return rd.fill()
		}
		return Batch{}, io.EOF
	}
	if rd.schema == nil {
		rd.schema = schemaOf(rd.specs)
	}
	rec := buildRecord(rd.schema, rd.builders, rd.rows)
	b := Batch{Table: rd.cfg.Table, Record: rec, FirstLine: rd.firstLine, LastLine: rd.lastLine,
		FirstRow: rd.rowsDone, LastRow: rd.rowsDone + int64(rd.rows) - 1}
	rd.rowsDone += int64(rd.rows)
	rd.rows, rd.builders, rd.lastRow = 0, nil, nil
	return b, nil
}

func (rd *jsonlReader) discard() {
	releaseBuilders(rd.builders)
	rd.builders, rd.lastRow, rd.rows = nil, nil, 0
}

func (rd *jsonlReader) BytesRead() int64 { return rd.cr.n.Load() }

func (rd *jsonlReader) Close() error {
	if !rd.closed {
		rd.closed = true
		rd.discard()
	}
	return nil
}
