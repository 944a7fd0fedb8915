package buffer

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// The latest time of each series of a partition.
//
// The latest row per value of a string column (query's latest row per
// key: arg_max(…, time) GROUP BY host) is in the newest chunks of a
// partition whose series all report, yet a reader that knows only each
// chunk's time range must look at every chunk to see which values it
// holds: ~600 chunks for 5M rows, 0.2-0.3 ms a query of touching each
// one's column and series ids (cache misses, not rows), where the
// answer is in the last one or two.
//
// So a partition keeps, for each string column whose chunks have series
// ids, the greatest time of its sealed chunks' rows of each id, and of
// their NULL rows: folded in as a chunk is sealed (a pass over its
// indices and times, beside the seal's copy of its buffers). The least
// of these, L, says which sealed chunks can hold a value's latest row: a
// chunk whose rows all precede L holds for every value (and NULL) only
// rows older than one in a chunk of time at or after L, or in the open
// chunk. Segment.SnapshotLatest leaves the others out.
//
// Rows of a value all older than L are older than the value's latest
// row: what is left out is never the latest row of a value, whatever
// WHERE bounds the times from below. Bounds from above, or a latest row
// a reader passes over (arg_max skips a row whose argument is NULL), are
// the reader's to check: it takes every chunk then.

// seriesLatest is, for one string column of a partition, the greatest
// time of the sealed chunks' rows of each series id and of NULL.
type seriesLatest struct {
	space *SeriesSpace
	times []int64 // by id; math.MinInt64: no sealed row
	null  int64   // math.MinInt64: no sealed NULL
	// least is the least of times (of ids with a row) and null, when
	// known; found again after a fold.
	least   int64
	leastOK bool
	// broken: a sealed chunk's column had no ids of space (its space was
	// full, or of another), so L cannot be told.
	broken  bool
	scratch []int64 // fold's, by dictionary index
}

// foldLatest folds chunk c, being sealed, into the partition's latest
// times of each string column: one seriesLatest per column of the
// partition's series spaces, made at the first seal after the space (the
// chunks sealed before lack the column, NULL in every row; folded all
// the same).
func (p *partition) foldLatest(c Chunk) {
	for col, space := range p.series {
		sl := p.latest[col]
		if sl == nil {
			if p.latest == nil {
				p.latest = map[string]*seriesLatest{}
			}
			sl = &seriesLatest{space: space, null: math.MinInt64}
			for _, old := range p.sealed {
				sl.fold(old, col)
			}
			p.latest[col] = sl
		}
		sl.fold(c, col)
	}
}

// fold raises sl by chunk c's column col.
func (sl *seriesLatest) fold(c Chunk, col string) {
	if sl.broken {
		return
	}
	sl.leastOK = false
	ix := c.Rec.Schema().FieldIndices(col)
	if len(ix) == 0 {
		sl.null = max(sl.null, c.MaxTime)
		return
	}
	ti := c.Rec.Schema().FieldIndices(TimeColumn)
	d, ok := c.Rec.Column(ix[0]).(*array.Dictionary)
	ids, ok2 := c.Series[col]
	if len(ti) == 0 || !ok || !ok2 || ids.Space != sl.space {
		sl.broken = true
		return
	}
	idx, ok := d.Indices().(*array.Int32)
	ts, ok2 := c.Rec.Column(ti[0]).(*array.Timestamp)
	if !ok || !ok2 || ts.NullN() > 0 || d.Dictionary().Len() != len(ids.IDs) {
		sl.broken = true
		return
	}
	if n := len(ids.Values); len(sl.times) < n {
		for range n - len(sl.times) {
			sl.times = append(sl.times, math.MinInt64)
		}
	}
	// Each dictionary index's greatest time first (a small array, in
	// cache), then each id's: one load a row rather than two.
	times, keys := ts.TimestampValues(), idx.Int32Values()
	best := sl.scratch[:0]
	for range len(ids.IDs) {
		best = append(best, math.MinInt64)
	}
	sl.scratch = best
	if d.NullN() > 0 {
		for r, v := range keys {
			t := int64(times[r])
			if d.IsNull(r) {
				sl.null = max(sl.null, t)
			} else if t > best[v] {
				best[v] = t
			}
		}
	} else {
		for r, v := range keys {
			if t := int64(times[r]); t > best[v] {
				best[v] = t
			}
		}
	}
	for v, t := range best {
		if id := ids.IDs[v]; t > sl.times[id] {
			sl.times[id] = t
		}
	}
}

// leastTime is L: the least latest time of a series (NULL included) of
// the sealed chunks; false when it cannot be told, or no chunk is
// sealed.
func (sl *seriesLatest) leastTime() (int64, bool) {
	if sl.broken {
		return 0, false
	}
	if !sl.leastOK {
		sl.least = math.MaxInt64
		for _, t := range sl.times {
			if t != math.MinInt64 {
				sl.least = min(sl.least, t)
			}
		}
		if sl.null != math.MinInt64 {
			sl.least = min(sl.least, sl.null)
		}
		sl.leastOK = true
	}
	return sl.least, sl.least != math.MaxInt64
}

// latestLeast is L of column col of p's sealed chunks (series_latest.go),
// false when it cannot be told or does not hold for rows of times at most
// upper (a sealed row is past upper).
func (p *partition) latestLeast(col string, upper int64) (int64, bool) {
	sl := p.latest[col]
	if sl == nil || len(p.sealed) == 0 || p.sealedStat.MaxTime > upper {
		return 0, false
	}
	return sl.leastTime()
}

// size is the memory the latest times hold.
func (sl *seriesLatest) size() int64 { return int64(cap(sl.times)+cap(sl.scratch)) * 8 }
