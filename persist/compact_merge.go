package persist

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/apron-db/apron/catalog"
)

// A compaction's inputs are each sorted as every persisted file is
// (writePartition: the string columns in column order, nulls last, then
// time), and declare it in their row groups' sorting_columns. So the
// merged file is their k-way merge: each input is read a batch at a time,
// and the merge takes, from the input whose next row comes first, the run
// of its rows that come before every other input's next row (a binary
// search in its batch: with rows sorted by series, a run is most of a
// series' rows in that file). Ties go to the earlier input, then to the
// earlier row, as the sort of a segment's rows keeps buffer order, so the
// merged file holds the rows in the order sorting them all at once would
// (TestMergedAsSorted).
//
// Read whole and sorted, a compaction of up to compactMaxRows (16Mi)
// rows held them all in memory, outside the buffer's limit: 0.9 GB of
// the peer benchmark's peak RSS under 16 writers. Merged, it holds a
// batch of each input, the batch being built, and the writer's row group
// of encoded pages.
//
// The merged file's numeric columns keep the inputs' encoding choices
// (plainColumns, rawColumns: made from all of a segment's rows when its
// file was written): a column every input wrote without a dictionary is
// written without one, and uncompressed if every input wrote it so.
// Strings go to the writer plain, and it builds each row group's
// dictionary.

// mergeBatchRows is the rows of an input read at a time.
const mergeBatchRows = 16 << 10

// mergeable says whether the merge may take inputs: each file's row
// groups declare the order writePartition writes (its string columns,
// nulls last, then time), and its string columns are tbl's string
// columns, in tbl's order, but for those it predates.
func mergeable(inputs []*compactFile, tbl *catalog.Table) bool {
	rank := map[string]int{}
	for _, f := range parquetSchema(tbl.ArrowSchema()).Fields() {
		if f.Type.ID() == arrow.STRING {
			rank[f.Name] = len(rank)
		}
	}
	for _, in := range inputs {
		md := in.pf.MetaData()
		sch := md.Schema
		if sch.NumColumns() == 0 || sch.Column(0).Name() != catalog.TimeColumn {
			return false
		}
		var want []parquet.SortingColumn
		last := -1
		for i := range sch.NumColumns() {
			col := sch.Column(i)
			if col.LogicalType() == nil || !col.LogicalType().Equals(schema.StringLogicalType{}) {
				continue
			}
			r, ok := rank[col.Name()]
			if !ok || r <= last {
				return false
			}
			last = r
			want = append(want, parquet.SortingColumn{ColumnIdx: int32(i)})
		}
		want = append(want, parquet.SortingColumn{ColumnIdx: 0})
		for g := range md.NumRowGroups() {
			got := md.RowGroup(g).SortingColumns()
			if len(got) != len(want) {
				return false
			}
			for i := range got {
				if got[i] != want[i] {
					return false
				}
			}
		}
	}
	return true
}

// inheritedEncodings returns the names of out's numeric columns that
// every input holding them wrote without a dictionary (plain), and of
// those, the ones every input wrote uncompressed (raw).
func inheritedEncodings(inputs []*compactFile, out *arrow.Schema) (plain, raw []string) {
	for i, f := range out.Fields() {
		if i == 0 || !sampledForDictionary(f.Type) {
			continue
		}
		votes, isPlain, isRaw := 0, true, true
		for _, in := range inputs {
			md := in.pf.MetaData()
			c := md.Schema.ColumnIndexByName(f.Name)
			if c < 0 || md.NumRowGroups() == 0 {
				continue
			}
			cc, err := md.RowGroup(0).ColumnChunk(c)
			if err != nil {
				continue
			}
			votes++
			isPlain = isPlain && !cc.HasDictionaryPage()
			isRaw = isRaw && cc.Compression() == compress.Codecs.Uncompressed
		}
		if votes > 0 && isPlain {
			plain = append(plain, f.Name)
			if isRaw {
				raw = append(raw, f.Name)
			}
		}
	}
	return plain, raw
}

// writeMerged writes the merge of inputs into w, as one file in the
// columns of in.Schema.
func (s *Store) writeMerged(ctx context.Context, w io.Writer, inputs []*compactFile, in CompactInput) (partFile, error) {
	out := parquetSchema(in.Schema.ArrowSchema())
	m := &mergeSource{out: out, mem: in.Mem}
	defer m.release()
	for i, f := range out.Fields() {
		if f.Type.ID() == arrow.STRING {
			m.keys = append(m.keys, i)
		}
	}
	for i, f := range inputs {
		rr, err := f.records(ctx, in, mergeBatchRows, false)
		if err != nil {
			return partFile{}, err
		}
		c := &mergeCursor{src: f, rr: rr, order: i}
		m.cursors = append(m.cursors, c)
		if err := c.advance(ctx, m, in); err != nil {
			return partFile{}, err
		}
	}
	plain, raw := inheritedEncodings(inputs, out)
	sw := sortedWrite{out: out, keys: m.keys, plain: plain, raw: raw, maxGroupRows: RowGroupRows, pace: in.Pace, slots: s.slots}
	return sw.write(w, in.Mem, func() (arrow.RecordBatch, error) { return m.next(ctx, in) })
}

// mergeSource is the merge of its cursors, a batch at a time.
type mergeSource struct {
	out     *arrow.Schema
	keys    []int // out's string columns
	cursors []*mergeCursor
	mem     memory.Allocator
}

// mergeCursor is an input's next rows: its current batch, in the table's
// columns (compactionChunk), from row pos.
type mergeCursor struct {
	src   *compactFile
	rr    pqarrow.RecordReader
	order int // the input's place: ties go to the earlier
	rec   arrow.RecordBatch
	pos   int
	// cols[i] is the column of rec that is output column i, -1 if the
	// input predates it; keys[k] is key k's, nil then.
	cols  []int
	keys  []*array.String
	times []int64
}

func (m *mergeSource) release() {
	for _, c := range m.cursors {
		if c.rec != nil {
			c.rec.Release()
			c.rec = nil
		}
		c.rr.Release()
	}
}

// advance moves c to its next batch that has rows; c.rec is nil once the
// input is read.
func (c *mergeCursor) advance(ctx context.Context, m *mergeSource, in CompactInput) error {
	if c.rec != nil {
		c.rec.Release()
		c.rec = nil
	}
	for c.rr.Next() {
		ch, err := compactionChunk(ctx, c.rr.RecordBatch(), in, memory.NewGoAllocator(), false)
		if err != nil {
			return fmt.Errorf("%w %s: %w", errCompactionInput, c.src.f.Path, err)
		}
		if ch.Rec == nil {
			continue // every row expired
		}
		c.rec, c.pos = ch.Rec, 0
		return c.bind(m)
	}
	if err := c.rr.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("%w %s: %w", errCompactionInput, c.src.f.Path, err)
	}
	return nil
}

// bind finds m's output columns in c.rec.
func (c *mergeCursor) bind(m *mergeSource) error {
	sch := c.rec.Schema()
	c.cols = c.cols[:0]
	for _, f := range m.out.Fields() {
		idx := sch.FieldIndices(f.Name)
		if len(idx) == 0 {
			c.cols = append(c.cols, -1)
			continue
		}
		if t := sch.Field(idx[0]).Type; !arrow.TypeEqual(t, f.Type) {
			return fmt.Errorf("%w %s: column %q is %s, %s in the merged file", errCompactionInput, c.src.f.Path, f.Name, t, f.Type)
		}
		c.cols = append(c.cols, idx[0])
	}
	if c.cols[0] < 0 {
		return fmt.Errorf("%w %s: no %q column", errCompactionInput, c.src.f.Path, catalog.TimeColumn)
	}
	c.times = valuesOf[int64](c.rec.Column(c.cols[0]))
	c.keys = c.keys[:0]
	for _, k := range m.keys {
		if c.cols[k] < 0 {
			c.keys = append(c.keys, nil)
			continue
		}
		c.keys = append(c.keys, c.rec.Column(c.cols[k]).(*array.String))
	}
	return nil
}

// before says whether row i of a comes before row j of b in the merged
// file: the keys (nulls, and inputs without the column, last), then time,
// then the earlier input.
func before(a *mergeCursor, i int, b *mergeCursor, j int) bool {
	for k := range a.keys {
		ka, kb := a.keys[k], b.keys[k]
		na, nb := ka == nil || ka.IsNull(i), kb == nil || kb.IsNull(j)
		switch {
		case na && nb:
			continue
		case na:
			return false
		case nb:
			return true
		}
		if c := strings.Compare(ka.Value(i), kb.Value(j)); c != 0 {
			return c < 0
		}
	}
	if c := cmp.Compare(a.times[i], b.times[j]); c != 0 {
		return c < 0
	}
	return a.order < b.order
}

// mergePiece is rows [lo, hi) of an input's batch, retained.
type mergePiece struct {
	rec    arrow.RecordBatch
	cols   []int
	lo, hi int
}

// next returns the merge's next batch of up to parquetBatchRows rows, nil
// at its end.
func (m *mergeSource) next(ctx context.Context, in CompactInput) (arrow.RecordBatch, error) {
	var pieces []mergePiece
	defer func() {
		for _, p := range pieces {
			p.rec.Release()
		}
	}()
	rows := 0
	for rows < parquetBatchRows {
		var first, second *mergeCursor
		for _, c := range m.cursors {
			switch {
			case c.rec == nil:
			case first == nil || before(c, c.pos, first, first.pos):
				first, second = c, first
			case second == nil || before(c, c.pos, second, second.pos):
				second = c
			}
		}
		if first == nil {
			break
		}
		n := min(int(first.rec.NumRows())-first.pos, parquetBatchRows-rows)
		if second != nil {
			// The rows of first before second's next row: at least one
			// (its next row is; max keeps a file whose rows are not in
			// the order it declares from stopping the merge).
			n = max(1, sort.Search(n, func(x int) bool { return !before(first, first.pos+x, second, second.pos) }))
		}
		first.rec.Retain()
		pieces = append(pieces, mergePiece{rec: first.rec, cols: first.cols, lo: first.pos, hi: first.pos + n})
		rows += n
		first.pos += n
		if first.pos == int(first.rec.NumRows()) {
			if err := first.advance(ctx, m, in); err != nil {
				return nil, err
			}
		}
	}
	if rows == 0 {
		return nil, nil
	}
	return m.build(pieces, rows)
}

// build makes the batch of pieces' rows, in that order.
func (m *mergeSource) build(pieces []mergePiece, rows int) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, m.out.NumFields())
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	parts := make([]arrow.Array, len(pieces))
	for i, f := range m.out.Fields() {
		for j, p := range pieces {
			if c := p.cols[i]; c >= 0 {
				parts[j] = array.NewSlice(p.rec.Column(c), int64(p.lo), int64(p.hi))
			} else {
				parts[j] = array.MakeArrayOfNull(m.mem, f.Type, p.hi-p.lo)
			}
		}
		var a arrow.Array
		var err error
		if len(parts) == 1 {
			a = parts[0]
			a.Retain()
		} else {
			a, err = array.Concatenate(parts, m.mem)
		}
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(m.out, cols, int64(rows)), nil
}
