package output

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Cells are cut when they are stored: no value takes more than
// maxCellWidth terminal columns or maxCellBytes bytes (a few zero-width
// characters must not make a cell of megabytes), whatever the terminal.
const (
	maxCellWidth = 40
	maxCellBytes = 1024
)

// cell is one value of the table, escaped and cut, with its width.
type cell struct {
	text  string
	width int
}

// tableWriter draws duckdb's box. The box's column widths depend on every
// row shown, so nothing is printed before Close; what is held meanwhile is
// bounded by MaxRows: the first headN rows, and a ring of the last tailN
// rows, as cut strings (batches are not retained).
type tableWriter struct {
	closeState
	w       io.Writer
	schema  *arrow.Schema
	opts    Options
	headN   int
	tailN   int
	head    [][]cell
	tail    [][]cell // a ring once full: tail[tailPos] is the oldest row
	tailPos int
	rows    int64
	scratch []byte
	escaped []byte
}

func newTableWriter(w io.Writer, schema *arrow.Schema, opts Options) *tableWriter {
	if opts.MaxRows == 0 {
		opts.MaxRows = DefaultMaxRows
	}
	headN := (opts.MaxRows + 1) / 2
	return &tableWriter{w: w, schema: schema, opts: opts, headN: headN, tailN: opts.MaxRows - headN}
}

func (t *tableWriter) Rows() int64 { return t.rows }

func (t *tableWriter) Write(rec arrow.RecordBatch) error {
	if t.closed {
		return ErrClosed
	}
	if err := checkBatch(t.schema, rec); err != nil {
		return err
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	cols := columns(rec, styleTable)
	i := 0
	for ; i < n && len(t.head) < t.headN; i++ {
		t.head = append(t.head, t.renderRow(cols, i, nil))
	}
	// Of the rest, only the last tailN rows of this batch can be among the
	// last tailN of the result: the others are never rendered.
	for j := max(i, n-t.tailN); j < n; j++ {
		if len(t.tail) < t.tailN {
			t.tail = append(t.tail, t.renderRow(cols, j, nil))
			continue
		}
		t.tail[t.tailPos] = t.renderRow(cols, j, t.tail[t.tailPos])
		t.tailPos = (t.tailPos + 1) % t.tailN
	}
	t.rows += int64(n)
	return nil
}

// renderRow renders row i of cols into reuse (or a new row).
func (t *tableWriter) renderRow(cols []*column, i int, reuse []cell) []cell {
	row := reuse[:0]
	for _, c := range cols {
		if c.isNull(i) {
			row = append(row, cell{text: "NULL", width: 4})
			continue
		}
		t.scratch = c.appendValue(t.scratch[:0], i)
		row = append(row, t.makeCell(t.scratch))
	}
	if cap(t.scratch) > 1<<16 {
		t.scratch = nil // one huge value must not pin its size for the whole result
	}
	return row
}

// makeCell escapes raw for the terminal and cuts it to maxCellWidth.
func (t *tableWriter) makeCell(raw []byte) cell {
	var complete bool
	t.escaped, complete = appendTerminalSafe(t.escaped[:0], raw, maxCellBytes+8)
	s, w := cutToWidth(string(t.escaped), maxCellWidth, maxCellBytes, !complete)
	if cap(t.escaped) > 1<<16 {
		t.escaped = nil
	}
	return cell{text: s, width: w}
}

func (t *tableWriter) Close() error {
	if err := t.closing(); err != nil {
		return err
	}
	out := t.render()
	t.head, t.tail = nil, nil
	if _, err := io.WriteString(t.w, out); err != nil {
		return fmt.Errorf("output: writing table: %w", err)
	}
	return nil
}

// render draws the whole table: box, rows, footer.
func (t *tableWriter) render() string {
	ncols := t.schema.NumFields()
	names := make([]cell, ncols)
	types := make([]cell, ncols)
	aligns := make([]alignment, ncols)
	natural := make([]int, ncols)
	for i, f := range t.schema.Fields() {
		names[i] = t.makeCell([]byte(f.Name))
		types[i] = t.makeCell([]byte(typeName(f.Type)))
		if numericType(f.Type) {
			aligns[i] = alignRight
		}
		natural[i] = max(names[i].width, types[i].width, 1)
	}
	rows := make([][]cell, 0, len(t.head)+len(t.tail))
	rows = append(rows, t.head...)
	rows = append(rows, t.tail[t.tailPos:]...)
	rows = append(rows, t.tail[:t.tailPos]...)
	for _, r := range rows {
		for i, c := range r {
			natural[i] = max(natural[i], c.width)
		}
	}
	hidden := t.rows > int64(len(rows))

	b := &boxBuilder{l: planLayout(natural, t.opts.Width), maxWidth: t.opts.Width}
	shownCols := 0
	for _, c := range b.l.cols {
		if c != gapColumn {
			shownCols++
		}
	}
	gapCell := cell{text: ellipsis, width: 1}
	pick := func(r []cell) func(int) (string, int) {
		return func(i int) (string, int) {
			if c := b.l.cols[i]; c != gapColumn {
				return r[c].text, r[c].width
			}
			return gapCell.text, gapCell.width
		}
	}
	center := func(int) alignment { return alignCenter }
	valueAlign := func(i int) alignment {
		if c := b.l.cols[i]; c != gapColumn {
			return aligns[c]
		}
		return alignCenter
	}
	if ncols > 0 {
		b.rule("┌", "┬", "┐")
		b.row(pick(names), center)
		typeRow := pick(types)
		b.row(func(i int) (string, int) {
			if b.l.cols[i] == gapColumn {
				return "", 0
			}
			return typeRow(i)
		}, center)
		if len(rows) > 0 {
			b.rule("├", "┼", "┤")
		}
		for i, r := range rows {
			if hidden && i == len(t.head) {
				b.row(func(int) (string, int) { return ellipsis, 1 }, center)
			}
			b.row(pick(r), valueAlign)
		}
		b.rule("└", "┴", "┘")
	}
	b.text(t.footer(len(rows), hidden, ncols, shownCols))
	return b.sb.String()
}

// footer is the line under the box: "100 rows (40 shown)  9 columns (5
// shown) in 0.012 s"; the parentheses only when something is left out.
func (t *tableWriter) footer(shownRows int, hidden bool, ncols, shownCols int) string {
	var sb strings.Builder
	sb.WriteString(plural(t.rows, "row"))
	if hidden {
		fmt.Fprintf(&sb, " (%d shown)", shownRows)
	}
	sb.WriteString("  ")
	sb.WriteString(plural(int64(ncols), "column"))
	if shownCols < ncols {
		fmt.Fprintf(&sb, " (%d shown)", shownCols)
	}
	if t.opts.Elapsed != nil {
		fmt.Fprintf(&sb, " in %.3f s", t.opts.Elapsed().Seconds())
	}
	return sb.String()
}

func plural(n int64, noun string) string {
	s := strconv.FormatInt(n, 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}

// numericType reports the types whose values the table right-aligns.
func numericType(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return numericType(t.ValueType)
	case *arrow.RunEndEncodedType:
		return numericType(t.Encoded())
	}
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// typeName is the short name the table's second header row shows for an
// Arrow type: duckdb's name for the type it would read it as (varchar,
// double, timestamp_ns, …), so both tools' tables read alike.
func typeName(dt arrow.DataType) string {
	switch t := dt.(type) {
	case *arrow.TimestampType:
		name := "timestamp"
		if t.TimeZone != "" {
			name = "timestamptz"
		}
		return name + unitSuffix(t.Unit)
	case *arrow.Time32Type:
		return "time" + unitSuffix(t.Unit)
	case *arrow.Time64Type:
		return "time" + unitSuffix(t.Unit)
	case *arrow.DurationType:
		return "interval" + unitSuffix(t.Unit)
	case arrow.DecimalType:
		return fmt.Sprintf("decimal(%d,%d)", t.GetPrecision(), t.GetScale())
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("blob[%d]", t.ByteWidth)
	case *arrow.DictionaryType:
		return typeName(t.ValueType)
	case *arrow.RunEndEncodedType:
		return typeName(t.Encoded())
	case *arrow.MapType:
		return "map(" + typeName(t.KeyType()) + ", " + typeName(t.ItemType()) + ")"
	case *arrow.FixedSizeListType:
		return typeName(t.Elem()) + "[" + strconv.Itoa(int(t.Len())) + "]"
	case arrow.ListLikeType:
		return typeName(t.Elem()) + "[]"
	case *arrow.StructType:
		return "struct(" + fieldList(t.Fields()) + ")"
	case arrow.UnionType:
		return "union(" + fieldList(t.Fields()) + ")"
	case arrow.ExtensionType:
		return t.ExtensionName()
	}
	switch dt.ID() {
	case arrow.NULL:
		return "null"
	case arrow.BOOL:
		return "boolean"
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return dt.Name() // int8 … uint64, duckdb's own spelling in its box
	case arrow.FLOAT16:
		return "half"
	case arrow.FLOAT32:
		return "float"
	case arrow.FLOAT64:
		return "double"
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "varchar"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return "blob"
	case arrow.DATE32, arrow.DATE64:
		return "date"
	case arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO:
		return "interval"
	}
	return strings.ToLower(dt.String())
}

func fieldList(fields []arrow.Field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.Name + " " + typeName(f.Type)
	}
	return strings.Join(parts, ", ")
}

// unitSuffix follows duckdb's timestamp_s/_ms/_ns names; microseconds,
// duckdb's own unit, have none.
func unitSuffix(u arrow.TimeUnit) string {
	switch u {
	case arrow.Second:
		return "_s"
	case arrow.Millisecond:
		return "_ms"
	case arrow.Nanosecond:
		return "_ns"
	}
	return ""
}
