//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
)

// A scan emits only the rows of a chunk that can match the query's string
// equalities (tableRef.equals: `host = 'host-7'` in the top-level AND of
// the WHERE clause of the table's one reference).
//
// Time pruning leaves whole chunks, and a chunk holds every series' rows
// of its time: a query for one host of 200 kept 8192 rows of a chunk for
// the ~40 it wanted, and DuckDB was handed all of them, 2048 at a time,
// to filter. The chunk's dictionary says which of its codes hold the
// values, its indices which rows do; only those rows go to DuckDB.
//
// DuckDB still applies the whole WHERE clause to what it is handed
// (apron_scan takes no filter pushdown), so a row kept that does not
// match costs only its emission. What must hold is the other way: a row
// left out is one no row of the result can come from. An equality of a
// column with a VARCHAR constant in the top-level AND is false for a row
// whose value is another string or NULL, whatever the rest of the clause
// says. Only columns that are strings in the chunk are looked at (a
// number compared with a string constant is compared as a number: '07'
// = 7), and a column name that matches more than one of the chunk's
// columns, ignoring case, is not used.

// maxSelectShare is the largest share of a chunk's rows a selection
// emits: above it the chunk's rows go to DuckDB as they are, which costs
// less than gathering most of them.
const maxSelectShare = 0.5

// dictHits are the entries of a dictionary that hold one of the values,
// ascending, of its first searched entries.
type dictHits struct {
	searched int
	codes    []int32
}

// dictKey names a buffered dictionary by its memory: the chunks of a
// partition share one growing dictionary, each chunk's a prefix of it, so
// entries searched for one chunk serve the next. Only for dictionaries the
// scan keeps alive to its end (buffered chunks it retains), whose memory
// cannot be reused for another meanwhile.
type dictKey struct {
	offsets, data uintptr
	col           string // the equals column whose values were searched for
}

// selectMemo keeps the dictionaries' hits of one scan (or one pruning):
// searched counts the dictionary entries looked at.
type selectMemo struct {
	hits     map[dictKey]*dictHits
	wanted   map[spaceCol][]int32 // of a series space, by id (seriesHits)
	searched int
}

// spaceCol names a series space and the equals column searched in it.
type spaceCol struct {
	space *buffer.SeriesSpace
	col   string
}

func newSelectMemo() *selectMemo { return &selectMemo{hits: map[dictKey]*dictHits{}} }

// selectRows returns the rows of rec whose columns hold one of the values
// equals gives them (by lower-cased column name; sorted, as
// tableRef.equals keeps them), whether any column of
// equals could be tested (false: every row may match), and whether every
// one was (true: exactly the rows returned match them all). memo may be
// nil (rec's memory is not the buffer's: nothing is kept). series are
// the series ids of rec's dictionaries (a buffered chunk's; nil: none).
func selectRows(rec arrow.RecordBatch, series map[string]buffer.SeriesIDs, equals map[string][]string, memo *selectMemo) (sel []int32, tested, every bool) {
	every = true
	for col, values := range equals {
		ix, ok := uniqueColumnIndex(rec, col)
		if !ok {
			every = false
			continue
		}
		arr := rec.Column(ix)
		var rows []int32
		switch a := arr.(type) {
		case *array.Dictionary:
			idx, ok := a.Indices().(*array.Int32)
			strs, isStr := a.Dictionary().(*array.String)
			if !ok || !isStr {
				every = false
				continue
			}
			var ids *buffer.SeriesIDs
			if sid, ok := series[rec.Schema().Field(ix).Name]; ok && len(sid.IDs) == strs.Len() {
				ids = &sid
			}
			rows = selectCodes(a, idx.Int32Values(), memo.dictHits(strs, ids, col, values), sel, tested)
		case *array.String:
			keep := func(r int) bool { return a.IsValid(r) && hasValue(values, a.Value(r)) }
			rows = selectBy(int(rec.NumRows()), keep, sel, tested)
		default:
			every = false
			continue
		}
		sel, tested = rows, true
	}
	return sel, tested, every && tested
}

// selectCodes returns the rows (of all if !within, else of sel) whose
// dictionary code is one of hits (ascending), null rows left out (a null
// row's code may be any).
func selectCodes(a *array.Dictionary, codes []int32, hits []int32, sel []int32, within bool) []int32 {
	var out []int32
	switch {
	case len(hits) == 0:
		return out
	case within:
		out = sel[:0]
		for _, r := range sel {
			if _, ok := slices.BinarySearch(hits, codes[r]); ok {
				out = append(out, r)
			}
		}
	case len(hits) == 1:
		// One value, the usual case: a comparison a row.
		c := hits[0]
		for r, k := range codes {
			if k == c {
				out = append(out, int32(r))
			}
		}
	default:
		for r, k := range codes {
			if _, ok := slices.BinarySearch(hits, k); ok {
				out = append(out, int32(r))
			}
		}
	}
	if a.NullN() == 0 {
		return out
	}
	kept := out[:0]
	for _, r := range out {
		if a.IsValid(int(r)) {
			kept = append(kept, r)
		}
	}
	return kept
}

// selectBy returns the rows (of n if !within, else of sel) keep keeps.
func selectBy(n int, keep func(int) bool, sel []int32, within bool) []int32 {
	var out []int32
	if within {
		out = sel[:0]
		for _, r := range sel {
			if keep(int(r)) {
				out = append(out, r)
			}
		}
		return out
	}
	for r := range n {
		if keep(r) {
			out = append(out, int32(r))
		}
	}
	return out
}

// uniqueColumn is the one column of rec named col, ignoring case.
func uniqueColumn(rec arrow.RecordBatch, col string) (arrow.Array, bool) {
	i, ok := uniqueColumnIndex(rec, col)
	if !ok {
		return nil, false
	}
	return rec.Column(i), true
}

// uniqueColumnIndex is the index of the one column of rec named col,
// ignoring case.
func uniqueColumnIndex(rec arrow.RecordBatch, col string) (int, bool) {
	found := -1
	for i, f := range rec.Schema().Fields() {
		if strings.EqualFold(f.Name, col) {
			if found >= 0 {
				return 0, false
			}
			found = i
		}
	}
	return found, found >= 0
}

// dictHits returns the entries of strs that are among values (those of
// column col: one scan's are fixed), ascending, searching only the
// entries not searched before for the same memory. ids, when not nil,
// are the series ids of strs' entries: an entry is then searched by its
// id among those of the values in its space (seriesHits), a comparison
// of integers rather than of strings (a key of 100,000 values gives
// each chunk a dictionary of its own, 8,192 entries to search).
func (m *selectMemo) dictHits(strs *array.String, ids *buffer.SeriesIDs, col string, values []string) []int32 {
	n := strs.Len()
	search := func(codes []int32, from int) []int32 {
		if m != nil {
			m.searched += n - from
		}
		if ids != nil && m != nil {
			want := m.seriesHits(ids, col, values)
			switch len(want) {
			case 0:
			case 1: // one value, the usual case
				w := want[0]
				for k, id := range ids.IDs[from:n] {
					if id == w {
						codes = append(codes, int32(from+k))
					}
				}
			default:
				for k, id := range ids.IDs[from:n] {
					if _, ok := slices.BinarySearch(want, id); ok {
						codes = append(codes, int32(from+k))
					}
				}
			}
			return codes
		}
		for k := from; k < n; k++ {
			if strs.IsValid(k) && hasValue(values, strs.Value(k)) {
				codes = append(codes, int32(k))
			}
		}
		return codes
	}
	bufs := strs.Data().Buffers()
	if m == nil || n == 0 || len(bufs) < 3 || bufs[1] == nil || bufs[2] == nil || bufs[1].Len() == 0 {
		return search(nil, 0)
	}
	key := dictKey{
		offsets: uintptr(unsafe.Pointer(unsafe.SliceData(bufs[1].Bytes()))) + uintptr(strs.Data().Offset())*4,
		data:    uintptr(unsafe.Pointer(unsafe.SliceData(bufs[2].Bytes()))),
		col:     col,
	}
	h, ok := m.hits[key]
	if !ok {
		h = &dictHits{}
		m.hits[key] = h
	}
	if h.searched < n {
		h.codes = search(h.codes, h.searched)
		h.searched = n
	}
	// A shorter prefix (an older chunk) has the codes below its length.
	k, _ := slices.BinarySearch(h.codes, int32(n))
	return h.codes[:k:k]
}

// seriesHits returns the ids of ids' space whose values are among values
// (of column col), ascending: those the space has numbered when first
// asked, after the chunks of the scan were made, so that every value of
// theirs has its id.
func (m *selectMemo) seriesHits(ids *buffer.SeriesIDs, col string, values []string) []int32 {
	if m.wanted == nil {
		m.wanted = map[spaceCol][]int32{}
	}
	key := spaceCol{ids.Space, col}
	codes, ok := m.wanted[key]
	if !ok {
		codes = []int32{}
		for _, v := range values {
			if id, ok := ids.Space.Lookup(v); ok {
				codes = append(codes, id)
			}
		}
		slices.Sort(codes)
		m.wanted[key] = codes
	}
	return codes
}

// takeColumns gathers the rows sel of cols into new arrays (for the
// columns that go to DuckDB through the Arrow conversion).
func takeColumns(mem memory.Allocator, cols []arrow.Array, sel []int32) ([]arrow.Array, error) {
	var indices arrow.Array // for compute.Take, made when a column needs it
	defer func() {
		if indices != nil {
			indices.Release()
		}
	}()
	ctx := compute.WithAllocator(context.Background(), mem)
	out := make([]arrow.Array, 0, len(cols))
	for _, c := range cols {
		if t := takeFixed(mem, c, sel); t != nil {
			out = append(out, t)
			continue
		}
		if t := takeBinary(mem, c, sel); t != nil {
			out = append(out, t)
			continue
		}
		if indices == nil {
			b := array.NewInt32Builder(mem)
			b.AppendValues(sel, nil)
			indices = b.NewArray()
			b.Release()
		}
		t, err := compute.TakeArray(ctx, c, indices)
		if err != nil {
			for _, o := range out {
				o.Release()
			}
			return nil, fmt.Errorf("selecting a chunk's rows: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// takeBinary is the rows sel of a string or binary column, nil for a
// column of another type. arrow-go's Take of such columns (v18.8.0)
// checks the room left for values against the capacity of the slice its
// allocator returned but copies within the slice's length, and the
// direct scan's buffer.Recycler returns a power-of-two buffer cut to the
// length asked: values were cut short without a word, then Take panicked
// ("slice bounds out of range"; first met on strings of persisted files,
// direct_files.go, but buffered binary columns took the same path). This
// copies the values into a buffer sized for them first.
func takeBinary(mem memory.Allocator, c arrow.Array, sel []int32) arrow.Array {
	switch a := c.(type) {
	case *array.String:
		return takeValues(array.NewStringBuilder(mem), a, sel, a.ValueLen, a.Value)
	case *array.Binary:
		return takeValues(array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), a, sel, a.ValueLen, a.Value)
	}
	return nil
}

// valuesBuilder is a builder of variable-length values of type V.
type valuesBuilder[V any] interface {
	array.Builder
	ReserveData(int)
	Append(V)
}

// takeValues builds the rows sel of a with b (which it releases): their
// values' bytes reserved first.
func takeValues[V any, B valuesBuilder[V]](b B, a arrow.Array, sel []int32, size func(int) int, value func(int) V) arrow.Array {
	defer b.Release()
	n := 0
	for _, r := range sel {
		n += size(int(r))
	}
	b.Reserve(len(sel))
	b.ReserveData(n)
	for _, r := range sel {
		if a.IsNull(int(r)) {
			b.AppendNull()
		} else {
			b.Append(value(int(r)))
		}
	}
	return b.NewArray()
}
