package output

import (
	"strings"
)

// Box drawing: the characters of duckdb's box mode.
const (
	boxH = "─"
	boxV = "│"
)

// gapColumn stands, in a layout, for the "…" column that replaces the
// columns left out of a table too wide for the terminal.
const gapColumn = -1

// layout is which columns a table shows, in order, and how wide each is
// (in terminal columns, padding and rules excluded).
type layout struct {
	cols   []int // schema column indexes, or gapColumn
	widths []int
}

// minShrinkWidth is the narrowest a column is shrunk to before columns are
// left out instead (duckdb's max_col_width): fewer columns, readable,
// rather than all of them cut to a few letters.
const minShrinkWidth = 20

// boxWidth is the width of a box with columns of these widths: a rule
// before each column, one after the last, and a space each side of a value.
func boxWidth(widths []int) int {
	w := 1
	for _, cw := range widths {
		w += cw + 3
	}
	return w
}

// planLayout fits columns of the natural widths natural into maxWidth
// terminal columns (0: no limit). In order, as duckdb does:
//
//  1. if they fit, every column gets its natural width;
//  2. else the widest columns are capped at one common width, as wide as
//     still fits but at least minShrinkWidth (columns already narrower keep
//     their width), the columns at the cap sharing what is left over;
//  3. if even that is too wide, columns are left out from the middle
//     outwards (the middle one, then the one to its right, then to its
//     left, …: the first column, often the time, goes last), a one-wide
//     "…" column in their place, until the rest fit or one is left; the
//     space that frees goes back to the shown columns, left to right, up to
//     their natural width.
//
// The layout only depends on the widths, so the same result always lays
// out the same way.
func planLayout(natural []int, maxWidth int) layout {
	l := layout{cols: make([]int, len(natural)), widths: append([]int(nil), natural...)}
	for i := range l.cols {
		l.cols[i] = i
	}
	if maxWidth <= 0 || boxWidth(natural) <= maxWidth {
		return l
	}
	widest := 0
	for _, w := range natural {
		widest = max(widest, w)
	}
	for capW := widest - 1; capW >= minShrinkWidth; capW-- {
		capped := capWidths(natural, capW)
		if total := boxWidth(capped); total <= maxWidth {
			spare := maxWidth - total
			for i := range capped {
				if spare > 0 && natural[i] > capW {
					capped[i]++
					spare--
				}
			}
			l.widths = capped
			return l
		}
	}

	widths := capWidths(natural, minShrinkWidth)
	shown := make([]bool, len(natural))
	for i := range shown {
		shown[i] = true
	}
	total := boxWidth(widths) + 1 + 3 // and the one-wide "…" column
	left := len(natural)
	for offset := 0; total > maxWidth && left > 1; {
		c := len(natural)/2 + offset
		if c >= 0 && c < len(natural) && shown[c] {
			shown[c] = false
			total -= widths[c] + 3
			left--
		}
		if offset <= 0 {
			offset = -offset + 1
		} else {
			offset = -offset
		}
	}
	if left == len(natural) {
		total -= 1 + 3 // nothing left out: no "…" column
	}
	for c := range widths {
		if spare := maxWidth - total; spare > 0 && shown[c] && widths[c] < natural[c] {
			grow := min(spare, natural[c]-widths[c])
			widths[c] += grow
			total += grow
		}
	}
	l.cols, l.widths = l.cols[:0], l.widths[:0]
	gap := false
	for c := range natural {
		switch {
		case shown[c]:
			l.cols = append(l.cols, c)
			l.widths = append(l.widths, widths[c])
		case !gap:
			l.cols = append(l.cols, gapColumn)
			l.widths = append(l.widths, 1)
			gap = true
		}
	}
	return l
}

func capWidths(natural []int, capW int) []int {
	out := make([]int, len(natural))
	for i, w := range natural {
		out[i] = min(w, capW)
	}
	return out
}

// alignment of a value in its column.
type alignment uint8

const (
	alignLeft alignment = iota
	alignRight
	alignCenter
)

// boxBuilder draws a table's lines into a buffer.
type boxBuilder struct {
	sb       strings.Builder
	l        layout
	maxWidth int // every line is cut to it (0: no limit)
	line     strings.Builder
}

// rule draws a horizontal rule with the given left, middle and right joins.
func (b *boxBuilder) rule(left, mid, right string) {
	b.line.Reset()
	b.line.WriteString(left)
	for i, w := range b.l.widths {
		if i > 0 {
			b.line.WriteString(mid)
		}
		b.line.WriteString(strings.Repeat(boxH, w+2))
	}
	b.line.WriteString(right)
	b.endLine()
}

// row draws one row; text(i) is the i-th shown column's value (escaped,
// with its width), align(i) how it is placed.
func (b *boxBuilder) row(text func(i int) (string, int), align func(i int) alignment) {
	b.line.Reset()
	b.line.WriteString(boxV)
	for i, w := range b.l.widths {
		s, sw := text(i)
		if sw > w {
			s, sw = cutToWidth(s, w, maxCellBytes, false)
		}
		pad := w - sw
		var lpad int
		switch align(i) {
		case alignRight:
			lpad = pad
		case alignCenter:
			lpad = pad / 2
		}
		b.line.WriteByte(' ')
		writeSpaces(&b.line, lpad)
		b.line.WriteString(s)
		writeSpaces(&b.line, pad-lpad)
		b.line.WriteByte(' ')
		b.line.WriteString(boxV)
	}
	b.endLine()
}

// text adds a line of text under the box (the footer).
func (b *boxBuilder) text(s string) {
	b.line.Reset()
	b.line.WriteString(s)
	b.endLine()
}

// endLine moves the line to the output, cut to maxWidth. Lines are planned
// to fit; the cut only acts when even one column and the "…" column are
// wider than the terminal.
func (b *boxBuilder) endLine() {
	s := b.line.String()
	if b.maxWidth > 0 {
		if w := displayWidth(s); w > b.maxWidth {
			s, _ = cutToWidth(s, b.maxWidth, len(s)+len(ellipsis), false)
		}
	}
	b.sb.WriteString(s)
	b.sb.WriteByte('\n')
}

func writeSpaces(sb *strings.Builder, n int) {
	const spaces = "                                        "
	for n > len(spaces) {
		sb.WriteString(spaces)
		n -= len(spaces)
	}
	if n > 0 {
		sb.WriteString(spaces[:n])
	}
}
