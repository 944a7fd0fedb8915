package buffer

import (
	"strings"
	"sync"
)

// Series ids.
//
// A partition's chunks share a string column's dictionary while it is
// small, so a reader that needs each chunk's values by content (the
// latest row per key, in query) looks up a dictionary's values once for
// all the chunks that share it. A column of many values (100,000 hosts:
// each chunk holds 8,192 of them) gives each chunk a dictionary of its
// own (dictsToRetire), and such a reader looked up every chunk's values
// by string: 5M map lookups for 5M rows.
//
// So a partition also numbers each string column's distinct values
// across its successive dictionaries: a SeriesSpace. The dictionary
// taking values looks them up through the space instead of a map of its
// own, and keeps beside its values their ids (stringDict.ids): no more
// lookups than before, and for a dictionary per chunk fewer inserts (a
// value is numbered once per partition, not once per chunk). A Chunk
// carries the ids (Chunk.Series), so a reader turns a chunk's keys into
// ids by index and reads per-id state from slices.
//
// A column of (nearly) unique values, which no reader would key on,
// would grow its space without end: past maxSeries values the space is
// full, and the dictionary taking values then, and those after, intern
// through maps of their own and have no ids.

// maxSeries bounds a partition's ids of one column; the space then holds
// at most a few MiB.
const maxSeries = 1 << 17

// SeriesSpace numbers the distinct values of one string column of one
// partition: the same pointer, the same numbering. Readers use it as a
// name only.
//
// The dictionary that takes the column's values now (one at a time: the
// partition's, until it is retired) looks its values up through the
// space rather than a map of its own: local[id] is the value's index in
// that dictionary when stamp[id] is the dictionary's gen. A dictionary
// of its own for each chunk then costs no map of its own to fill, and a
// value already numbered costs one lookup, as in the dictionary's map.
type SeriesSpace struct {
	// mu guards index against Lookup: the partition's writer (under its
	// table's lock) reads it without, and writes it under mu.
	mu     sync.RWMutex
	index  map[string]int32
	values []string // values[id]
	bytes  int64    // of values
	full   bool
	local  []int32
	stamp  []uint32
	gen    uint32
}

func newSeriesSpace() *SeriesSpace {
	return &SeriesSpace{index: make(map[string]int32)}
}

// Lookup is v's id, false when v has none (yet). An id a chunk's
// SeriesIDs do not reach (at or past len(Values)) is of a value numbered
// after the chunk was made, which none of its rows holds.
func (s *SeriesSpace) Lookup(v string) (int32, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.index[v]
	return id, ok
}

// begin makes d the dictionary that takes the space's values.
func (s *SeriesSpace) begin(d *stringDict) {
	s.gen++
	if s.gen == 0 { // wrapped: no stamp may name an older dictionary
		clear(s.stamp)
		s.gen = 1
	}
	d.series, d.gen = s, s.gen
}

// internSeries is intern through d's space; false once the space is
// full, d then interning through its own index.
func (d *stringDict) internSeries(v string) (int32, bool) {
	s := d.series
	sid, ok := s.index[v]
	if ok && s.stamp[sid] == d.gen {
		return s.local[sid], true
	}
	if !ok {
		if s.full || len(s.values) >= maxSeries {
			s.full = true
			d.leaveSeries()
			return 0, false
		}
		// v may point into an Arrow buffer released after the write: the
		// space's copy must own its bytes.
		sid = int32(len(s.values))
		key := strings.Clone(v)
		s.mu.Lock()
		s.index[key] = sid
		s.mu.Unlock()
		s.values = append(s.values, key)
		s.local = append(s.local, 0)
		s.stamp = append(s.stamp, 0)
		s.bytes += int64(len(key))
	}
	id := d.add(v)
	d.ids = append(d.ids, sid)
	s.local[sid], s.stamp[sid] = id, d.gen
	return id, true
}

// leaveSeries makes d intern through an index of its own, of the values
// it has (the space's copies as keys).
func (d *stringDict) leaveSeries() {
	for i, sid := range d.ids {
		d.index[d.series.values[sid]] = int32(i)
	}
	d.series, d.ids = nil, nil
}

// size counts the map entries, the values (whose bytes the dictionaries
// share) and the local lookup.
func (s *SeriesSpace) size() int64 {
	return int64(len(s.index))*48 + int64(cap(s.values))*16 + s.bytes + int64(cap(s.local))*4 + int64(cap(s.stamp))*4
}

// SeriesIDs are the ids of a chunk's dictionary of one string column.
type SeriesIDs struct {
	Space *SeriesSpace
	// Values holds the value of every id the space had numbered when the
	// chunk was made, and so of every id of IDs: Values[id].
	Values []string
	// IDs[i] is the id of the dictionary's i-th value.
	IDs []int32
}

// seriesIDs are the ids of the column's dictionary as array(n) gives it
// now; false when it has none.
func (c *stringColumn) seriesIDs() (SeriesIDs, bool) {
	d := c.dict
	if d.series == nil {
		return SeriesIDs{}, false
	}
	n, m := d.len(), len(d.series.values)
	return SeriesIDs{Space: d.series, Values: d.series.values[:m:m], IDs: d.ids[:n:n]}, true
}
