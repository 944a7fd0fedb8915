package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// lpReader reads InfluxDB line protocol on the caller's goroutine. Each
// measurement has its own batch in progress; a batch goes out when it has
// BatchRows rows, and at the end of the file every unfinished one does,
// in the order their measurements first appeared.
type lpReader struct {
	cfg *config
	cr  *countingReader

	buf  []byte // buf[:n] read, buf[off:] not yet decoded
	n    int
	off  int
	line int64 // line of buf[off]
	eof  bool

	dec     *lineprotocol.Decoder // over the current block
	entries []lpEntry             // of the current block
	ei      int                   // next entry of the block
	blkLine int64                 // line of the block's start

	tables map[string]*lpTable
	order  []*lpTable
	rows   int64 // data rows decoded
	flushI int   // at EOF: next table of order to flush
	err    error
	closed bool
	now    func() time.Time
}

// lpTable is one measurement: its columns as seen so far in the file (a
// field keeps one type from its first appearance on) and its batch in
// progress, which has builders only for the columns it has seen.
type lpTable struct {
	name    string
	cols    []*lpCol // cols[0] is time
	index   map[string]int
	rows    int
	first   lpEntry // lines of the batch's first row
	last    lpEntry
	firstRw int64
	lastRw  int64
}

type lpCol struct {
	name    string
	kind    Kind
	tag     bool
	b       *colBuilder // nil when the batch in progress has no value yet
	lastRow int
}

// maxLPLine bounds one entry, so that a file without newlines does not
// grow the buffer without end.
const maxLPLine = 64 << 20

func openLineProtocol(c *config, r io.Reader) (Reader, error) {
	cr := &countingReader{r: r}
	return &lpReader{cfg: c, cr: cr, buf: make([]byte, readSize), line: 1, tables: map[string]*lpTable{}, now: time.Now}, nil
}

// nextBlock reads more of the file and starts a decoder over the whole
// entries in it. It reports false at the end of the file.
func (rd *lpReader) nextBlock() (bool, error) {
	for {
		end, lines, entries := lpScanBlock(rd.buf[rd.off:rd.n], rd.line, rd.eof, rd.entries[:0])
		rd.entries = entries
		if end > 0 {
			blk := rd.buf[rd.off : rd.off+end]
			rd.dec = lineprotocol.NewDecoderWithBytes(blk)
			rd.ei = 0
			rd.blkLine = rd.line
			rd.off += end
			rd.line += lines
			if len(entries) > 0 {
				return true, nil
			}
			continue // only blank lines and comments
		}
		if rd.eof {
			return false, nil
		}
		// Make room: keep the undecoded tail, then read.
		tail := rd.n - rd.off
		if tail > maxLPLine {
			return false, rd.cfg.errorAt(rd.line, 0, "", fmt.Errorf("%w: a line is longer than %d MiB", ErrSyntax, maxLPLine>>20))
		}
		if rd.off > 0 {
			copy(rd.buf, rd.buf[rd.off:rd.n])
			rd.n, rd.off = tail, 0
		}
		if len(rd.buf)-rd.n < readSize/2 {
			nb := make([]byte, 2*len(rd.buf))
			copy(nb, rd.buf[:rd.n])
			rd.buf = nb
		}
		m, err := rd.cr.Read(rd.buf[rd.n:])
		first := rd.cr.n.Load() == int64(m)
		rd.n += m
		if first && bytes.HasPrefix(rd.buf[rd.off:rd.n], bom) {
			rd.off += len(bom) // a BOM from a Windows editor
		}
		if err == io.EOF {
			rd.eof = true
		} else if err != nil {
			return false, fmt.Errorf("input: reading %s: %w", rd.cfg.name, err)
		}
	}
}

func (rd *lpReader) Next() (Batch, error) {
	if rd.closed {
		return Batch{}, errClosed
	}
	if rd.err != nil {
		return Batch{}, rd.err
	}
	b, err := rd.next()
	if err != nil {
		rd.err = err
		rd.discard()
	}
	return b, err
}

func (rd *lpReader) next() (Batch, error) {
	for {
		if rd.dec == nil || rd.ei >= len(rd.entries) {
			rd.dec = nil
			ok, err := rd.nextBlock()
			if err != nil {
				return Batch{}, err
			}
			if !ok {
				break
			}
		}
		t, err := rd.decodeEntry()
		if err != nil {
			return Batch{}, err
		}
		if t.rows >= rd.cfg.BatchRows {
			return rd.flush(t), nil
		}
	}
	for rd.flushI < len(rd.order) {
		t := rd.order[rd.flushI]
		rd.flushI++
		if t.rows > 0 {
			return rd.flush(t), nil
		}
	}
	return Batch{}, io.EOF
}

// decodeEntry appends the next entry of the block to its table's batch.
func (rd *lpReader) decodeEntry() (*lpTable, error) {
	d := rd.dec
	ent := rd.entries[rd.ei]
	rd.ei++
	if !d.Next() {
		return nil, fmt.Errorf("input: %s:%d: line protocol: entry lost (reader bug)", rd.cfg.name, ent.first)
	}
	m, err := d.Measurement()
	if err != nil {
		return nil, rd.syntaxError(err, ent, "")
	}
	t := rd.tables[string(m)]
	if t == nil {
		t = &lpTable{name: string(m), index: map[string]int{}}
		t.cols = []*lpCol{{name: TimeColumnName, kind: KindTimestamp, lastRow: -1}}
		rd.tables[t.name] = t
		rd.order = append(rd.order, t)
	}
	row := t.rows
	fail := func(key []byte, err error) error {
		// Column stays "": the message names the measurement and the
		// tag or field, which a column name alone would not.
		return rd.cfg.errorAt(ent.first, 0, "", fmt.Errorf("measurement %q: %w", t.name, err))
	}
	for {
		k, v, err := d.NextTag()
		if err != nil {
			return nil, rd.syntaxError(err, ent, t.name)
		}
		if k == nil {
			break
		}
		c, err := rd.column(t, k, KindString, true, row)
		if err != nil {
			return nil, fail(k, err)
		}
		c.b.str.BinaryBuilder.Append(v)
	}
	nfields := 0
	for {
		k, v, err := d.NextField()
		if err != nil {
			return nil, rd.syntaxError(err, ent, t.name)
		}
		if k == nil {
			break
		}
		nfields++
		var kind Kind
		switch v.Kind() {
		case lineprotocol.Int:
			kind = KindInt64
		case lineprotocol.Uint:
			kind = KindUint64
		case lineprotocol.Float:
			kind = KindFloat64
		case lineprotocol.Bool:
			kind = KindBool
		default:
			kind = KindString
		}
		c, err := rd.column(t, k, kind, false, row)
		if err != nil {
			return nil, fail(k, err)
		}
		switch kind {
		case KindInt64:
			c.b.i64.Append(v.IntV())
		case KindUint64:
			c.b.u64.Append(v.UintV())
		case KindFloat64:
			c.b.f64.Append(v.FloatV())
		case KindBool:
			c.b.bl.Append(v.BoolV())
		default:
			c.b.str.BinaryBuilder.Append(v.BytesV())
		}
	}
	tb, err := d.TimeBytes()
	if err != nil {
		return nil, rd.syntaxError(err, ent, t.name)
	}
	var ns int64
	if tb == nil {
		// No timestamp: the time of reading, as InfluxDB does on
		// arrival (a batch has one time column for all its rows).
		ns = rd.now().UnixNano()
	} else {
		ts, ok := parseInt64(tb)
		mul := int64(rd.cfg.precision.Duration())
		if !ok || (ts != 0 && (ts > math.MaxInt64/mul || ts < math.MinInt64/mul)) {
			return nil, rd.cfg.errorAt(ent.first, 0, "", fmt.Errorf("measurement %q: timestamp %s: %w", t.name, tb, errTimeRange))
		}
		ns = ts * mul
	}
	tc := t.cols[0]
	if tc.b == nil {
		tc.b = newColBuilder(rd.cfg.Mem, KindTimestamp, min(rd.cfg.BatchRows, 1024), 0)
	}
	tc.b.ts.Append(arrow.Timestamp(ns))
	tc.lastRow = row
	// Columns this row has no value for.
	for _, c := range t.cols {
		if c.b != nil && c.lastRow != row {
			c.b.appendNull()
			c.lastRow = row
		}
	}
	if t.rows == 0 {
		t.first, t.firstRw = ent, rd.rows
	}
	t.last, t.lastRw = ent, rd.rows
	t.rows++
	rd.rows++
	return t, nil
}

// column returns the column key of t for a value of kind in row, with a
// builder that holds row-1 values (nulls for the rows before it).
func (rd *lpReader) column(t *lpTable, key []byte, kind Kind, tag bool, row int) (*lpCol, error) {
	i, ok := t.index[string(key)]
	if !ok {
		if string(key) == TimeColumnName {
			return nil, fmt.Errorf("%w: a %s named %q would clash with the time column", ErrSchema, tagOrField(tag), TimeColumnName)
		}
		i = len(t.cols)
		t.cols = append(t.cols, &lpCol{name: string(key), kind: kind, tag: tag, lastRow: -1})
		t.index[string(key)] = i
	}
	c := t.cols[i]
	switch {
	case c.tag != tag:
		return nil, fmt.Errorf("%w: %q is a %s here but was a %s on an earlier line", ErrSchema, key, tagOrField(tag), tagOrField(c.tag))
	case c.kind != kind:
		return nil, fmt.Errorf("%w: field %q is %s here but was %s on an earlier line (a field keeps its first type)", ErrType, key, lpKindName(kind), lpKindName(c.kind))
	case c.lastRow == row:
		return nil, fmt.Errorf("%w: %s %q appears twice", ErrSyntax, tagOrField(tag), key)
	}
	if c.b == nil {
		c.b = newColBuilder(rd.cfg.Mem, kind, 0, 0)
		for range row {
			c.b.appendNull()
		}
	}
	c.lastRow = row
	return c, nil
}

func tagOrField(tag bool) string {
	if tag {
		return "tag"
	}
	return "field"
}

// lpKindName names a field type the way line protocol writes it.
func lpKindName(k Kind) string {
	switch k {
	case KindInt64:
		return "an int64 (1i)"
	case KindUint64:
		return "a uint64 (1u)"
	case KindFloat64:
		return "a float64 (1.5)"
	case KindBool:
		return "a bool (true)"
	}
	return `a string ("a")`
}

// syntaxError turns a decoder error into an *Error at its line: the
// decoder counts lines from the start of the block.
func (rd *lpReader) syntaxError(err error, ent lpEntry, measurement string) error {
	line := ent.first
	var de *lineprotocol.DecodeError
	if errors.As(err, &de) {
		line = rd.blkLine + de.Line - 1
		err = fmt.Errorf("%w: byte %d: %w", ErrSyntax, de.Column, de.Err)
	} else {
		err = fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	if measurement != "" {
		err = fmt.Errorf("measurement %q: %w", measurement, err)
	}
	return rd.cfg.errorAt(line, 0, "", err)
}

// flush returns t's batch in progress; the columns are in the order the
// table first saw them, time first.
func (rd *lpReader) flush(t *lpTable) Batch {
	var fields []arrow.Field
	var cols []*colBuilder
	for _, c := range t.cols {
		if c.b == nil {
			continue
		}
		fields = append(fields, arrow.Field{Name: c.name, Type: c.kind.arrowType(), Nullable: true})
		cols = append(cols, c.b)
		c.b, c.lastRow = nil, -1
	}
	rec := buildRecord(arrow.NewSchema(fields, nil), cols, t.rows)
	b := Batch{Table: t.name, Record: rec, FirstLine: t.first.first, LastLine: t.last.last, FirstRow: t.firstRw, LastRow: t.lastRw}
	t.rows = 0
	return b
}

// discard releases every batch in progress.
func (rd *lpReader) discard() {
	for _, t := range rd.order {
		for _, c := range t.cols {
			if c.b != nil {
				c.b.release()
				c.b = nil
			}
		}
		t.rows = 0
	}
}

func (rd *lpReader) BytesRead() int64 { return rd.cr.n.Load() }

func (rd *lpReader) Close() error {
	if !rd.closed {
		rd.closed = true
		rd.discard()
	}
	return nil
}
