//go:build duckdb_arrow

package query

import (
	"math"

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
	least   int64
	stale   bool // least is to be found again
	version int  // -1: to be made again
}

// useSpaces decides which series spaces the chunks (of key column col)
// are checked by.
func (b *latestBounds) useSpaces(chunks []buffer.Chunk, col string) {
	type use struct{ values, dictValues int }
	var uses map[*buffer.SeriesSpace]*use
	for _, c := range chunks {
		ids, ok := c.Series[col]
		if !ok {
			continue
		}
		if uses == nil {
			uses = map[*buffer.SeriesSpace]*use{}
		}
		u := uses[ids.Space]
		if u == nil {
			u = &use{}
			uses[ids.Space] = u
		}
		u.values = max(u.values, len(ids.Values))
		u.dictValues += len(ids.IDs)
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
	if m.version != b.version || len(m.bounds) < len(ids.Values) {
		if cap(m.bounds) < len(ids.Values) {
			m.bounds = make([]int64, len(ids.Values))
		}
		m.bounds = m.bounds[:len(ids.Values)]
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
	if m.stale {
		m.least = math.MaxInt64
		for _, v := range m.bounds {
			m.least = min(m.least, v)
		}
		m.stale = false
	}
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

// raise sets the bound of id, value s, to t.
func (m *spaceMemo) raise(id int32, s string, t int64, only map[string]bool) {
	if m.version < 0 {
		return
	}
	if int(id) >= len(m.bounds) {
		m.version = -1 // made again from a longer list of values
		return
	}
	if only != nil && !only[s] {
		return
	}
	m.bounds[id] = t
	m.stale = true
}
