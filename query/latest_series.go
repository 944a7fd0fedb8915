//go:build duckdb_arrow

package query

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apron-db/apron/buffer"
)

// Checking chunks by series ids.
//
// A key of many values (100,000 hosts) gives each chunk a dictionary of
// its own, and the pruning of latest.go looked up each chunk's values by
// string to check it: 8,192 map lookups a chunk, 5M for 5M rows, ~250 ms
// a query. The buffer numbers a partition's values of a string column
// across its dictionaries (buffer.SeriesIDs), so the bounds are kept
// once for all the values of a space (spaceMemo: a bound per id), and a
// chunk is checked by reading them by index: at once when every value of
// the space has a bound after the chunk's rows (a series reporting in
// turn: every chunk older than the newest of each series), otherwise row
// by row, two slice reads a row.
//
// A space's memo is made by looking up each of its values once, which
// pays when the chunks of the space checked hold at least as many
// values between them (useSpaces): a query of the last minutes of a
// day's 100,000 hosts keeps checking its two chunks by their own
// dictionaries. Credit raises a memo in place, by id, when the chunk
// credited is of its space and it was current; any other raise makes
// it stale, and it is made again when next used.

// spaceMemo is, at a version of the bounds, the bound of each id of a
// series space (math.MaxInt64: needs none, a value the WHERE does not
// admit) and the least of them.
type spaceMemo struct {
	bounds  []int64
	values  []string // of the ids of bounds: the longest list seen
	least   int64
	stale   bool // least is to be found again
	version int  // -1: to be made again
}

// latestKeysOf is each chunk's key column col (latestKeyOf) with its
// series ids, and whether it has one: found once for all that looks at
// them (a query of 5M rows has ~600 chunks).
//
// Its cost is per chunk, whatever the chunk's rows (~300 ns a chunk,
// 0.18 ms a query of the peer table's 611 chunks, before the column's
// place was remembered across chunks and the ids were kept in one
// slice; ~150 after), so it does the least it can for each.
func latestKeysOf(chunks []buffer.Chunk, col string) ([]latestKey, []bool) {
	keys, has := make([]latestKey, len(chunks)), make([]bool, len(chunks))
	series := make([]buffer.SeriesIDs, len(chunks)) // keys[i].series points into it
	at := columnFinder{col: col, i: -1}
	for i, c := range chunks {
		if k, ok := latestKeyAt(c.Rec, at.find(c.Rec)); ok {
			if ids, ok := c.Series[col]; ok && k.dict != nil && len(ids.IDs) == k.dict.Len() {
				series[i] = ids
				k.series = &series[i]
			}
			keys[i], has[i] = k, true
		}
	}
	return keys, has
}

// columnFinder finds column col of batch after batch, trying first
// where it was in the last (a table's chunks mostly share a schema's
// order): a name compared rather than a schema's map looked up.
type columnFinder struct {
	col string
	i   int // where it was last; -1: not yet found
}

// find is col's index in rec, -1 when it has none.
func (f *columnFinder) find(rec arrow.RecordBatch) int {
	if f.i >= 0 && f.i < int(rec.NumCols()) && rec.ColumnName(f.i) == f.col {
		return f.i
	}
	ix := rec.Schema().FieldIndices(f.col)
	if len(ix) == 0 {
		return -1
	}
	f.i = ix[0]
	return f.i
}

// useSpaces decides which series spaces the chunks (their keys) are
// checked by.
func (b *latestBounds) useSpaces(keys []latestKey) {
	type use struct{ values, dictValues int }
	var uses map[*buffer.SeriesSpace]*use
	for _, k := range keys {
		if k.series == nil {
			continue
		}
		if uses == nil {
			uses = map[*buffer.SeriesSpace]*use{}
		}
		u := uses[k.series.Space]
		if u == nil {
			u = &use{}
			uses[k.series.Space] = u
		}
		u.values = max(u.values, len(k.series.Values))
		u.dictValues += len(k.series.IDs)
	}
	for sp, u := range uses {
		if u.dictValues >= u.values {
			if b.spaces == nil {
				b.spaces = map[*buffer.SeriesSpace]*spaceMemo{}
			}
			b.spaces[sp] = &spaceMemo{version: -1}
		}
	}
}

// keysHint is keyValuesHint of the chunks' keys.
func keysHint(chunks []buffer.Chunk, keys []latestKey) int {
	hint, rows := 0, 0
	for i, k := range keys {
		rows += int(chunks[i].Rec.NumRows())
		if k.dict != nil {
			hint = max(hint, k.dict.Len())
		}
		if k.series != nil {
			hint = max(hint, len(k.series.Values))
		}
	}
	return min(hint, rows)
}

// keyValuesHint is how many values of key column col the chunks may
// hold, to make room for: the most of a dictionary's or of a series
// space's (a key of many values gives each chunk a dictionary of its
// own, the partition's space holds them all), and no more than their
// rows.
func keyValuesHint(chunks []buffer.Chunk, col string) int {
	hint, rows := 0, 0
	for _, c := range chunks {
		rows += int(c.Rec.NumRows())
		if k, ok := latestKeyOf(c.Rec, col); ok && k.dict != nil {
			hint = max(hint, k.dict.Len())
		}
		if ids, ok := c.Series[col]; ok {
			hint = max(hint, len(ids.Values))
		}
	}
	return min(hint, rows)
}

// oneSeriesSpace is the series space every chunk's key column col has
// ids of, nil when not every chunk has them, or they are of several.
func oneSeriesSpace(chunks []buffer.Chunk, col string) *buffer.SeriesSpace {
	var space *buffer.SeriesSpace
	for _, c := range chunks {
		d := dictOf(c.Rec, col)
		ids, ok := c.Series[col]
		if !ok || d == nil || len(ids.IDs) != d.Len() || space != nil && ids.Space != space {
			return nil
		}
		space = ids.Space
	}
	return space
}

// dictOf is rec's dictionary of key column col, nil if none.
func dictOf(rec arrow.RecordBatch, col string) *array.String {
	k, ok := latestKeyOf(rec, col)
	if !ok {
		return nil
	}
	return k.dict
}

// seriesHint is how many ids the chunks' key column col may have.
func seriesHint(chunks []buffer.Chunk, col string) int {
	n := 0
	for _, c := range chunks {
		n = max(n, len(c.Series[col].Values))
	}
	return n
}

// seriesOf is chunk c's series ids of key column col (key k), nil when
// it has none that name k's dictionary.
func seriesOf(c buffer.Chunk, col string, k latestKey) *buffer.SeriesIDs {
	ids, ok := c.Series[col]
	if !ok || k.dict == nil || len(ids.IDs) != k.dict.Len() {
		return nil
	}
	return &ids
}

// coveredBySeries is covered for a chunk whose key k has series ids, by
// the memo m of their space.
func (b *latestBounds) coveredBySeries(k latestKey, m *spaceMemo, maxTime int64) bool {
	b.spaceMemo(m, k.series)
	if m.least > maxTime {
		return true
	}
	b.work += len(k.idx)
	ids := k.series.IDs
	for r, v := range k.idx {
		if m.bounds[ids[v]] <= maxTime && (k.arr.NullN() == 0 || k.arr.IsValid(r)) {
			return false
		}
	}
	return true
}

// spaceMemo brings m, the memo of ids' space, to the bounds' version.
func (b *latestBounds) spaceMemo(m *spaceMemo, ids *buffer.SeriesIDs) {
	if b.single != nil && ids.Space == b.single {
		b.extendSingle(m, ids)
		return
	}
	if m.version != b.version || len(m.bounds) < len(ids.Values) {
		if cap(m.bounds) < len(ids.Values) {
			m.bounds = make([]int64, len(ids.Values))
		}
		m.bounds = m.bounds[:len(ids.Values)]
		m.values = ids.Values
		for id, s := range ids.Values {
			if b.only != nil && !b.only[s] {
				m.bounds[id] = math.MaxInt64
				continue
			}
			v, ok := b.bound[s]
			if !ok {
				v = math.MinInt64
			}
			m.bounds[id] = v
		}
		b.work += len(ids.Values)
		m.version, m.stale = b.version, true
	}
	m.findLeast()
}

// currentSpaceMemo is the memo of k's space when it is used and current,
// to be raised in place by a credit of k's chunk; nil otherwise.
func (b *latestBounds) currentSpaceMemo(k latestKey) *spaceMemo {
	if k.series == nil {
		return nil
	}
	m := b.spaces[k.series.Space]
	if m == nil || m.version != b.version {
		return nil
	}
	return m
}

// raise sets the bound of id to t (a value the WHERE admits: credit
// skips the others).
func (m *spaceMemo) raise(id int32, t int64) {
	if m.version < 0 {
		return
	}
	if int(id) >= len(m.bounds) {
		m.version = -1 // made again from a longer list of values
		return
	}
	m.bounds[id] = t
	m.stale = true
}

// findLeast finds the least bound again when a raise may have moved it.
func (m *spaceMemo) findLeast() {
	if !m.stale {
		return
	}
	m.least = math.MaxInt64
	for _, v := range m.bounds {
		m.least = min(m.least, v)
	}
	m.stale = false
}

// One space.
//
// When every chunk's key has ids of one space (a day's rows in one
// segment), the space's memo holds the bounds themselves: a credit
// raises them by id, and the strings' map is not written (100,000 series:
// 13 ms of map writes a query). Files, checked by value, come after the
// chunks: the bounds are then written to the map (leaveSingle).

// useSingle makes the one space of every chunk (their keys, has: which
// chunks have one), if there is one and it is used, the bounds' own.
func (b *latestBounds) useSingle(keys []latestKey, has []bool) {
	var sp *buffer.SeriesSpace
	for i, k := range keys {
		if !has[i] || k.series == nil || sp != nil && k.series.Space != sp {
			return
		}
		sp = k.series.Space
	}
	if sp == nil || b.spaces[sp] == nil {
		return
	}
	b.single = sp
	m := b.spaces[sp]
	m.bounds, m.values, m.least, m.version = m.bounds[:0], nil, math.MinInt64, b.version
}

// extendSingle gives the single space's memo m a bound for each of ids'
// values it has none for: none yet, or none needed.
func (b *latestBounds) extendSingle(m *spaceMemo, ids *buffer.SeriesIDs) {
	if n := len(m.bounds); n < len(ids.Values) {
		for _, s := range ids.Values[n:] {
			v := int64(math.MinInt64)
			if b.only != nil && !b.only[s] {
				v = math.MaxInt64
			}
			m.bounds = append(m.bounds, v)
		}
		m.values = ids.Values
		m.least = math.MinInt64
		b.work += len(ids.Values) - n
	}
	m.findLeast()
	m.version = b.version
}

// creditSingle raises, for a chunk of the single space, the bounds of
// its key's values to best (by dictionary index; math.MinInt64: no row);
// false when the chunk is not of it.
func (b *latestBounds) creditSingle(k latestKey, best []int64) bool {
	if b.single == nil || k.series == nil || k.series.Space != b.single {
		return false
	}
	m := b.spaces[b.single]
	b.extendSingle(m, k.series)
	raised := false
	for i, t := range best {
		if t == math.MinInt64 {
			continue
		}
		b.latest = max(b.latest, t)
		id := k.series.IDs[i]
		if t > m.bounds[id] && m.bounds[id] != math.MaxInt64 {
			m.bounds[id], raised, m.stale = t, true, true
		}
	}
	if raised {
		b.version++
		m.version = b.version
	}
	return true
}

// leaveSingle writes the single space's bounds to the strings' map, and
// checks chunks by it from then on.
func (b *latestBounds) leaveSingle() {
	if b.single == nil {
		return
	}
	m := b.spaces[b.single]
	b.single = nil
	for id, t := range m.bounds {
		if t == math.MinInt64 || t == math.MaxInt64 {
			continue
		}
		s := m.values[id]
		if old, ok := b.bound[s]; !ok || t > old {
			b.bound[s] = t
		}
	}
	b.version++
}
