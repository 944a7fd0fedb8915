package persist

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
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
// A string column whose values, over every input, fit one dictionary
// (maxDictValues, maxDictBytes) is written, as a segment's file is, with
// one dictionary for the file, its values sorted: a first pass reads the
// inputs' dictionaries (mergeDictionaries), the merge reads the column
// dictionary-encoded and compares ranks in that dictionary instead of
// strings, and the writer takes indices instead of hashing every value
// (which took a quarter of a merge's CPU). Others go to the writer plain.

// mergeBatchRows is the rows of an input read at a time. The column
// readers' buffers are sized by it, and are most of an input's memory:
// merging 24 files of 14.4M rows in all (BenchmarkCompaction), peak heap
// 240-244 MB with 4Ki, 305 with 8Ki, 394-430 with 16Ki; 3.9-4.0 s
// against 3.8 s with 16Ki, run by run.
const mergeBatchRows = 4 << 10

// mergeDictValues bounds the values of a merged file's dictionary, as
// maxDictValues a segment file's; a variable for tests.
var mergeDictValues = maxDictValues

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
	m := &mergeSource{mem: in.Mem, minTime: math.MaxInt64, maxTime: math.MinInt64}
	defer m.release()
	for i, f := range out.Fields() {
		if f.Type.ID() == arrow.STRING {
			m.keys = append(m.keys, i)
		}
	}
	dicts, err := mergeDictionaries(ctx, inputs, in, out, m.keys)
	if err != nil {
		return partFile{}, err
	}
	m.setDictionaries(dicts, in.Mem)
	fields := out.Fields()
	inDict := map[string]bool{}
	for k, col := range m.keys {
		if m.dicts[k] != nil {
			fields[col].Type = dictType
			inDict[fields[col].Name] = true
		}
	}
	m.out = arrow.NewSchema(fields, nil)
	for i, f := range inputs {
		rr, err := f.records(ctx, in, mergeBatchRows, func(name string) bool { return inDict[name] }, nil)
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
	sw := sortedWrite{out: m.out, keys: m.keys, plain: plain, raw: raw, maxGroupRows: RowGroupRows, pace: in.Pace, slots: s.slots,
		timeRange: func() (int64, int64) { return m.minTime, m.maxTime }}
	return sw.write(w, in.Mem, func() (arrow.RecordBatch, error) { return m.next(ctx, in) })
}

// mergeDictionaries returns, for each key k (output column keys[k]), the
// merged file's dictionary of it: the distinct values of the inputs'
// dictionaries, sorted; nil where they are more than maxDictValues or
// maxDictBytes (mergeDictValues), or an input holds the column without a
// dictionary.
func mergeDictionaries(ctx context.Context, inputs []*compactFile, in CompactInput, out *arrow.Schema, keys []int) ([][]string, error) {
	sets := make([]map[string]struct{}, len(keys))
	sizes := make([]int, len(keys))
	for k := range keys {
		sets[k] = map[string]struct{}{}
	}
	for _, f := range inputs {
		md := f.pf.MetaData()
		var leaves []int
		key := map[string]int{}
		for k, col := range keys {
			name := out.Field(col).Name
			c := md.Schema.ColumnIndexByName(name)
			if c < 0 || sets[k] == nil {
				continue
			}
			for g := range md.NumRowGroups() {
				if cc, err := md.RowGroup(g).ColumnChunk(c); err != nil || !cc.HasDictionaryPage() {
					sets[k] = nil
					break
				}
			}
			if sets[k] != nil {
				leaves = append(leaves, c)
				key[name] = k
			}
		}
		if len(leaves) == 0 {
			continue
		}
		rr, err := f.records(ctx, in, 64<<10, everyString, leaves)
		if err != nil {
			return nil, err
		}
		for rr.Next() {
			rec := rr.RecordBatch()
			for i, fld := range rec.Schema().Fields() {
				k, ok := key[fld.Name]
				if !ok || sets[k] == nil {
					continue
				}
				d, ok := rec.Column(i).(*array.Dictionary)
				if !ok {
					rr.Release()
					return nil, fmt.Errorf("%w %s: column %q read as %s", errCompactionInput, f.f.Path, fld.Name, rec.Column(i).DataType())
				}
				// Every batch's: the reader may reuse a dictionary's
				// buffers for the next row group's, so they tell nothing.
				dict := d.Dictionary().(*array.String)
				for j := range dict.Len() {
					v := dict.Value(j)
					if _, ok := sets[k][v]; !ok {
						sets[k][strings.Clone(v)] = struct{}{}
						sizes[k] += len(v)
					}
				}
				if len(sets[k]) > mergeDictValues || sizes[k] > maxDictBytes {
					sets[k] = nil
				}
			}
			if in.Pace != nil {
				if err := in.Pace(); err != nil {
					rr.Release()
					return nil, err
				}
			}
		}
		err = rr.Err()
		rr.Release()
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.f.Path, err)
		}
	}
	dicts := make([][]string, len(keys))
	for k, set := range sets {
		if len(set) == 0 {
			continue // too many values, or no input has the column
		}
		dicts[k] = make([]string, 0, len(set))
		for v := range set {
			dicts[k] = append(dicts[k], v)
		}
		slices.Sort(dicts[k])
	}
	return dicts, nil
}

// mergeSource is the merge of its cursors, a batch at a time.
type mergeSource struct {
	out     *arrow.Schema
	keys    []int // out's string columns
	cursors []*mergeCursor
	mem     memory.Allocator
	// dicts[k] is the file's dictionary of key k (values sorted, so an
	// index is a rank), nil if it is written plain; rankOf[k] its values'
	// ranks.
	dicts  []arrow.Array
	rankOf []map[string]int32
	// minTime and maxTime are the range of the batches the cursors read.
	minTime, maxTime int64
}

func (m *mergeSource) setDictionaries(dicts [][]string, mem memory.Allocator) {
	m.dicts = make([]arrow.Array, len(dicts))
	m.rankOf = make([]map[string]int32, len(dicts))
	for k, vals := range dicts {
		if vals == nil {
			continue
		}
		b := array.NewStringBuilder(mem)
		b.AppendValues(vals, nil)
		m.dicts[k] = b.NewArray()
		b.Release()
		m.rankOf[k] = make(map[string]int32, len(vals))
		for i, v := range vals {
			m.rankOf[k][v] = int32(i)
		}
	}
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
	// input predates it.
	cols  []int
	keys  []cursorKey
	times []int64
}

// cursorKey is a key column of a cursor's batch: its rows' ranks in the
// file's dictionary (nullRank for a null) when the file has one, else
// its strings; both nil when the input predates the column.
type cursorKey struct {
	rank []int32
	str  *array.String
	// ranks[i] is the rank of value i of the batch's dictionary, -1 until
	// a row refers to it.
	ranks []int32
}

func (m *mergeSource) release() {
	for _, d := range m.dicts {
		if d != nil {
			d.Release()
		}
	}
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
		m.minTime, m.maxTime = min(m.minTime, ch.MinTime), max(m.maxTime, ch.MaxTime)
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
	// A new slice each batch: pieces of the batch being built keep the
	// last one's.
	c.cols = make([]int, 0, m.out.NumFields())
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
	if c.keys == nil {
		c.keys = make([]cursorKey, len(m.keys))
	}
	for k, col := range m.keys {
		ck := &c.keys[k]
		ck.str = nil
		if c.cols[col] < 0 {
			ck.rank = nil
			continue
		}
		a := c.rec.Column(c.cols[col])
		if m.dicts[k] == nil {
			ck.str = a.(*array.String)
			continue
		}
		if err := ck.rankRows(a.(*array.Dictionary), m.rankOf[k]); err != nil {
			return fmt.Errorf("%w %s: column %q: %w", errCompactionInput, c.src.f.Path, m.out.Field(col).Name, err)
		}
	}
	return nil
}

// rankRows sets k.rank to the ranks of d's rows in the file's dictionary,
// whose values' ranks are rankOf.
func (k *cursorKey) rankRows(d *array.Dictionary, rankOf map[string]int32) error {
	dict := d.Dictionary().(*array.String)
	k.ranks = slices.Grow(k.ranks[:0], dict.Len())[:dict.Len()]
	for i := range k.ranks {
		k.ranks[i] = -1
	}
	// A new slice each batch: pieces of the batch being built keep the
	// last one's.
	n := d.Len()
	k.rank = make([]int32, n)
	idx := valuesOf[int32](d.Indices())
	for i := range n {
		if d.IsNull(i) {
			k.rank[i] = nullRank
			continue
		}
		v := idx[i]
		if v < 0 || int(v) >= len(k.ranks) {
			return fmt.Errorf("a dictionary index out of range")
		}
		if k.ranks[v] < 0 {
			r, ok := rankOf[dict.Value(int(v))]
			if !ok {
				return fmt.Errorf("value %q not in the inputs' dictionaries", dict.Value(int(v)))
			}
			k.ranks[v] = r
		}
		k.rank[i] = k.ranks[v]
	}
	return nil
}

// before says whether row i of a comes before row j of b in the merged
// file: the keys (nulls, and inputs without the column, last), then time,
// then the earlier input.
func (m *mergeSource) before(a *mergeCursor, i int, b *mergeCursor, j int) bool {
	for k := range a.keys {
		ka, kb := &a.keys[k], &b.keys[k]
		if m.dicts[k] != nil {
			ra, rb := int32(nullRank), int32(nullRank)
			if ka.rank != nil {
				ra = ka.rank[i]
			}
			if kb.rank != nil {
				rb = kb.rank[j]
			}
			if ra != rb {
				return ra < rb
			}
			continue
		}
		na, nb := ka.str == nil || ka.str.IsNull(i), kb.str == nil || kb.str.IsNull(j)
		switch {
		case na && nb:
			continue
		case na:
			return false
		case nb:
			return true
		}
		if c := strings.Compare(ka.str.Value(i), kb.str.Value(j)); c != 0 {
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
	// ranks[k] are key k's ranks of rows [lo, hi) where it is written
	// with the file's dictionary.
	ranks [][]int32
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
			case first == nil || m.before(c, c.pos, first, first.pos):
				first, second = c, first
			case second == nil || m.before(c, c.pos, second, second.pos):
				second = c
			}
		}
		if first == nil {
			break
		}
		n := min(int(first.rec.NumRows())-first.pos, parquetBatchRows-rows)
		if second != nil {
			// The rows of first before second's next row: at least one,
			// its next row, even in a file whose rows are not in the
			// order it declares (the search returns 0 only if that row
			// did not come first).
			n = sort.Search(n, func(x int) bool { return !m.before(first, first.pos+x, second, second.pos) })
		}
		first.rec.Retain()
		p := mergePiece{rec: first.rec, cols: first.cols, lo: first.pos, hi: first.pos + n, ranks: make([][]int32, len(m.keys))}
		for k := range m.keys {
			if r := first.keys[k].rank; m.dicts[k] != nil && r != nil {
				p.ranks[k] = r[p.lo:p.hi]
			}
		}
		pieces = append(pieces, p)
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
	key := make(map[int]int, len(m.keys))
	for k, col := range m.keys {
		key[col] = k
	}
	for i, f := range m.out.Fields() {
		if k, ok := key[i]; ok && m.dicts[k] != nil {
			cols = append(cols, m.gatherRanks(k, pieces, rows))
			continue
		}
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

// gatherRanks builds key k's column of pieces' rows: indices in the
// file's dictionary, which are its ranks.
func (m *mergeSource) gatherRanks(k int, pieces []mergePiece, rows int) arrow.Array {
	data, out := newRanks(rows, m.mem)
	at := 0
	for _, p := range pieces {
		if p.ranks[k] == nil {
			for i := range p.hi - p.lo {
				out[at+i] = nullRank
			}
		} else {
			copy(out[at:], p.ranks[k])
		}
		at += p.hi - p.lo
	}
	return rankColumn(data, out, m.dicts[k], m.mem)
}
