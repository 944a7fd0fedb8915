//go:build duckdb_arrow

package query

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// multiPicker picks, among batches, the first row of the greatest time of
// each combination of values of several key columns (NULL a value of its
// own in each): what latestPicker does for one key, for a persisted
// file's latest rows (latest_file_rows.go) and for the answer picked
// without DuckDB (latest_multi_direct.go). Within a batch, combinations
// are numbered from the dictionaries' indices (multiCols) and each
// number's best row found in one pass; across batches, whose row groups
// have dictionaries of their own, they are named by their values
// (multiCols.key).
type multiPicker struct {
	find  multiColsFinder
	picks []latestPick
	// within are the times of the rows picked among (allTime: every
	// row), only the values each column admits (nil: any; see
	// latestPrune.colOnly).
	within timeBounds
	only   []map[string]bool
	// byKey is each combination's pick, by its values; at most limit
	// (maxPicks) of them.
	byKey map[string]int
	limit int
	// best is, per combination number of the batch being read, its best
	// row (-1: none yet); touched the numbers set.
	best    []int32
	touched []int32
	codes   []int32
	buf     []byte
}

// maxPicks bounds the combinations a multiPicker holds, and the values
// a latestPicker does (some 100 bytes each): a query grouping by a column
// of a value a row (a request id) would otherwise hold one a row of every
// file it reads. Past it, DuckDB answers, within its memory limit.
const maxPicks = 1 << 18

func newMultiPicker(cols []string) *multiPicker {
	return &multiPicker{find: multiColsFinder{cols: cols}, byKey: map[string]int{}, within: allTime, limit: maxPicks}
}

// add picks among rec's rows, rec being batch ci; false if a key column
// is not dictionary-encoded strings, its combinations are too many
// (maxMultiCodes in the batch, p.limit in all), or a time is NULL.
func (p *multiPicker) add(ci int, rec arrow.RecordBatch) bool {
	m, ok := p.find.of(rec)
	if !ok {
		return false
	}
	times, ok := timesOf(rec)
	if !ok {
		return false
	}
	p.codes = m.codesOf(len(times), p.codes)
	for len(p.best) < m.codes {
		p.best = append(p.best, -1)
	}
	best := p.best
	p.touched = p.touched[:0]
	lo, hi := arrow.Timestamp(p.within.min), arrow.Timestamp(p.within.max)
	clip := p.within != allTime
	for r, c := range p.codes {
		if clip && (times[r] < lo || times[r] > hi) {
			continue
		}
		switch b := best[c]; {
		case b < 0:
			p.touched = append(p.touched, c)
			best[c] = int32(r)
		case times[r] > times[b]:
			best[c] = int32(r)
		}
	}
	for _, c := range p.touched {
		r := best[c]
		best[c] = -1
		if p.only != nil && !m.admits(int(c), p.only) {
			continue
		}
		p.buf = m.key(int(c), p.buf)
		pk := latestPick{ci, r, int64(times[r])}
		slot, seen := p.byKey[string(p.buf)]
		switch {
		case !seen:
			if len(p.picks) == p.limit {
				return false
			}
			// string(p.buf) as a new key is a copy: the batch's
			// dictionaries may go.
			p.byKey[string(p.buf)] = len(p.picks)
			p.picks = append(p.picks, pk)
		case pk.time > p.picks[slot].time:
			p.picks[slot] = pk
		}
	}
	return true
}
