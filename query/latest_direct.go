//go:build duckdb_arrow

package query

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// The latest row per key answered without DuckDB.
//
// When the query of latest.go selects nothing but its key, max(time) and
// arg_max (or max_by, arg_max_null) of columns by time, has no WHERE or
// one of bounds on time that a filtered direct scan understands
// (direct_where.go: constants, now() ± whole intervals, evaluated from
// the Go clock), with or without equalities of the key (only the rows
// of those values are picked: latestPrune.only), and no ORDER BY or one
// of the key or max(time), with or without LIMIT (latest_order.go), its
// answer is, for each key value,
// one row of the greatest time within the bounds, sorted and cut: what a
// last-value cache of one row per key holds, and what lastvalue.go
// streams from one (lastValueUse.project). Without a cache, those rows
// are found here among the chunks pruning keeps and the latest rows of
// each persisted file it leaves (read once a file, latest_file_rows.go),
// and streamed the same way (direct.go), instead of DuckDB's aggregate
// over the kept chunks: its hash table, aggregate states and tasks cost
// 2-3 ms a query on 2 cores for the 200 hosts and 8 aggregates of the
// peer benchmark (bench/peer), however few the rows: handing it only
// each key's latest rows of the kept chunks was tried, and was no faster
// (BenchmarkLastValue, "latest": 1.47-1.79 ms against 1.36-1.53). Picked
// here: 0.29-0.31 ms.
//
// A key's row is its first of the greatest time (DuckDB's pick among
// ties is as arbitrary). Under bounds, rows outside them are passed
// over; a file's latest rows stand for its rows within them only if none
// of its rows is past the upper bound (a key's latest row in the file is
// then its latest within the bounds, or before them: the key has none
// there), else DuckDB answers. arg_max(col, time) skips rows whose col
// is NULL: if a row picked holds a NULL where arg_max reads, the answer
// may be an older row, and DuckDB runs the query, as it does when a
// file's latest rows cannot be read (a column's type not the table's), a
// chunk's key is not dictionary-encoded strings, or a chunk or a file
// straddles the retention cutoff (directRead).

// latestRowsOf returns the rows of the latest row per key query d, from
// the View, as chunks in the answer's order. ok false: DuckDB must
// answer.
func (e *Engine) latestRowsOf(ctx context.Context, view *buffer.View, d *directScan) (_ []buffer.Chunk, ok bool) {
	p := d.latest
	key := buffer.TableKey{Database: d.table.Database, Table: d.table.Name}
	within := allTime
	if p.where != nil {
		b, ok := p.where.interval(e, time.Now())
		if !ok {
			return nil, false
		}
		within = b
	}
	bounds := withCutoff(view, key, within)
	cutoff := view.Cutoff(key.Database)
	if len(p.cols) > 0 {
		chunks := e.snapshot(view, key, bounds)
		files := e.persistedFiles(view, key, bounds)
		return e.latestMultiRowsOf(ctx, d, within, cutoff, chunks, files) // latest_multi_direct.go
	}
	chunks := e.latestSnapshot(view, key, bounds, p.col, bounds.max)
	files := e.persistedFiles(view, key, bounds)
	defer func() {
		for _, c := range chunks {
			c.Rec.Release()
		}
	}()
	newest := int64(math.MinInt64) // of the files
	for _, f := range files {
		newest = max(newest, f.MaxTime)
	}
	keysOf := e.fileKeysFunc(ctx, p.col, "its latest rows are read")
	// Files' latest rows, read to credit in the pruning, then picked
	// among: kept here, not looked up twice (one too large for the cache
	// would be read twice).
	rows := map[footerKey]*fileRows{}
	rowsOf := func(f persist.File) (*fileRows, error) {
		if fr, ok := rows[fileKey(f)]; ok {
			return fr, nil
		}
		fr, _, err := e.fileRowsOf(ctx, f, []string{p.col}, p.table, true)
		if err == nil {
			err = fr.unusable
		}
		if err != nil {
			return nil, err
		}
		rows[fileKey(f)] = fr
		return fr, nil
	}
	credit := func(f persist.File) (buffer.Chunk, bool) {
		if f.MaxTime > within.max {
			return buffer.Chunk{}, false
		}
		fr, err := rowsOf(f)
		if err != nil || fr.chunk.Rec == nil {
			return buffer.Chunk{}, false
		}
		return fr.chunk, true
	}
	var nc, nf int
	chunks, files, nc, nf = p.prune(chunks, files, cutoff, keysOf, credit)
	e.latestChunks.Add(int64(nc))
	e.latestFiles.Add(int64(nf))
	if len(files) > 0 {
		e.latestWarm.want(latestWant{d.table.Database, d.table.Name, p.col}, newest, time.Now())
	}
	for _, f := range files {
		if f.Rows == 0 {
			continue
		}
		if f.MaxTime > within.max {
			// The file's latest row of a key may be past the WHERE's
			// upper bound, and one within it not among those kept.
			return nil, false
		}
		fr, err := rowsOf(f)
		if err != nil {
			e.log.Debug("latest row per key: a file's latest rows not read; DuckDB answers", "file", f.Path, "err", err)
			return nil, false
		}
		if fr.chunk.Rec != nil && fr.chunk.Rec.NumRows() > 0 {
			fr.chunk.Rec.Retain()
			chunks = append(chunks, fr.chunk)
		}
	}
	picks, ok := pickLatest(chunks, p.col, within, p.only)
	if !ok || !picksHold(chunks, picks, p.nonNull) {
		return nil, false
	}
	out, err := gatherPicks(chunks, picks, e.wb.Allocator())
	if err != nil {
		e.log.Debug("latest row per key: gathering rows failed; DuckDB answers", "err", err)
		return nil, false
	}
	if p.cut != nil {
		out = p.cut.apply(out, p.col)
	}
	return out, true
}

// gatherPicks returns the rows picks of chunks: one chunk of them per
// chunk they come from, its time range theirs.
func gatherPicks(chunks []buffer.Chunk, picks []latestPick, mem memory.Allocator) ([]buffer.Chunk, error) {
	sels := make([][]int32, len(chunks))
	span := make([]timeBounds, len(chunks)) // of each chunk's picked rows
	for _, pk := range picks {
		if len(sels[pk.chunk]) == 0 {
			span[pk.chunk] = timeBounds{pk.time, pk.time}
		}
		sels[pk.chunk] = append(sels[pk.chunk], pk.row)
		span[pk.chunk].min = min(span[pk.chunk].min, pk.time)
		span[pk.chunk].max = max(span[pk.chunk].max, pk.time)
	}
	var out []buffer.Chunk
	for i, sel := range sels {
		if len(sel) == 0 {
			continue
		}
		slices.Sort(sel)
		c := chunks[i]
		cols, err := takeColumns(mem, c.Rec.Columns(), sel)
		if err != nil {
			for _, o := range out {
				o.Rec.Release()
			}
			return nil, err
		}
		rec := array.NewRecordBatch(c.Rec.Schema(), cols, int64(len(sel)))
		for _, a := range cols {
			a.Release()
		}
		out = append(out, buffer.Chunk{Rec: rec, MinTime: span[i].min, MaxTime: span[i].max})
	}
	return out, nil
}

// latestPick is the row a key value's answer comes from.
type latestPick struct {
	chunk int
	row   int32
	time  int64
}

// pickLatest returns, for each key value of chunks' rows within within
// (NULL included), its first row of the greatest time; of the values of
// only alone when it is not nil. ok false: a chunk's key is not
// dictionary-encoded strings, or its times hold a NULL.
func pickLatest(chunks []buffer.Chunk, col string, within timeBounds, only map[string]bool) (_ []latestPick, ok bool) {
	// One series space for every chunk (a partition's, the usual case):
	// values are told apart by id (latest_series.go).
	space := oneSeriesSpace(chunks, col)
	hint := 0
	if space == nil {
		hint = keyValuesHint(chunks, col)
	}
	p := newLatestPicker(col, hint, false)
	p.within = within
	if space != nil {
		p.byID = make([]int32, 0, seriesHint(chunks, col))
	}
	for ci, c := range chunks {
		var ids *buffer.SeriesIDs
		if space != nil {
			ids = seriesOf(c, col, latestKey{dict: dictOf(c.Rec, col)})
		}
		if !p.add(ci, c.Rec, ids) {
			return nil, false
		}
	}
	if only == nil {
		return p.picks, true
	}
	picks := make([]latestPick, 0, len(only))
	for v := range only {
		i, ok := p.byValue[v]
		if space != nil {
			var id int32
			if id, ok = space.Lookup(v); ok && int(id) < len(p.byID) && p.byID[id] > 0 {
				i = int(p.byID[id]) - 1
			} else {
				ok = false
			}
		}
		if ok {
			picks = append(picks, p.picks[i])
		}
	}
	return picks, true
}

// latestPicker picks each key value's first row of the greatest time
// among the batches it is given one after the other.
type latestPicker struct {
	col     string
	byValue map[string]int // index in picks
	// byID, when not nil, is in byValue's place: 1 + the index in picks
	// of each series id (0: none), every batch's key having ids of one
	// space.
	byID    []int32
	picks   []latestPick
	best    []int32 // a batch's best row of each dictionary index, -1 between batches
	touched []int32 // the dictionary indices a batch set in best
	null    int     // the NULL key's index in picks, -1 before one
	// within are the times of the rows picked among (allTime: all).
	within timeBounds
	// clone copies the key values kept, which otherwise point into the
	// batches' dictionaries: set when these may be reused or freed
	// before the picker is done.
	clone bool
	// limit bounds the values picked (maxPicks): a GROUP BY of a column
	// of a value a row would otherwise hold a pick, and a copy of the
	// value, a row of every file read. Past it, add says false and DuckDB
	// answers.
	limit int
}

func newLatestPicker(col string, hint int, clone bool) *latestPicker {
	return &latestPicker{col: col, byValue: make(map[string]int, hint), picks: make([]latestPick, 0, hint+1), null: -1, within: allTime, clone: clone, limit: maxPicks}
}

// full says whether p holds as many picks as it may: a new value is
// not taken. The batch's best rows left in best are cleared (the picker
// is not used again).
func (p *latestPicker) full(best []int32) bool {
	if len(p.picks) < p.limit {
		return false
	}
	for _, v := range p.touched {
		best[v] = -1
	}
	return true
}

// take makes pk the pick at index slot (-1: a new one) if it is later,
// and returns the index.
func (p *latestPicker) take(slot int, pk latestPick) int {
	if slot < 0 {
		p.picks = append(p.picks, pk)
		return len(p.picks) - 1
	}
	if pk.time > p.picks[slot].time {
		p.picks[slot] = pk
	}
	return slot
}

// add picks among rec's rows, rec being batch ci, ids the series ids of
// its key's dictionary (nil: none; not nil for every batch or none);
// false if its key is not dictionary-encoded strings, its times hold a
// NULL, or its values would be more than p.limit.
func (p *latestPicker) add(ci int, rec arrow.RecordBatch, ids *buffer.SeriesIDs) bool {
	if p.byID != nil && ids == nil {
		return false // a batch without ids: the caller said every one has them
	}
	k, ok := latestKeyOf(rec, p.col)
	if !ok {
		return false
	}
	times, ok := timesOf(rec)
	if !ok {
		return false
	}
	lo, hi := arrow.Timestamp(p.within.min), arrow.Timestamp(p.within.max)
	clip := p.within != allTime
	if k.dict == nil {
		best := -1
		for r, t := range times {
			if clip && (t < lo || t > hi) {
				continue
			}
			if best < 0 || t > times[best] {
				best = r
			}
		}
		if best >= 0 {
			p.null = p.take(p.null, latestPick{ci, int32(best), int64(times[best])})
		}
		return true
	}
	// The batch's best row of each dictionary value, then of each value
	// across batches. best is kept for the next batch, all -1 again: a
	// partition's dictionary (100,000 series: as many entries) is shared
	// by its chunks.
	for len(p.best) < k.dict.Len() {
		p.best = append(p.best, -1)
	}
	best := p.best
	p.touched = p.touched[:0]
	nullBest := -1
	nulls := k.arr.NullN() > 0
	for r, t := range times {
		if clip && (t < lo || t > hi) {
			continue
		}
		if nulls && k.arr.IsNull(r) {
			if nullBest < 0 || t > times[nullBest] {
				nullBest = r
			}
			continue
		}
		v := k.idx[r]
		switch {
		case best[v] < 0:
			p.touched = append(p.touched, v)
			best[v] = int32(r)
		case t > times[best[v]]:
			best[v] = int32(r)
		}
	}
	if nullBest >= 0 {
		p.null = p.take(p.null, latestPick{ci, int32(nullBest), int64(times[nullBest])})
	}
	if p.byID != nil {
		for _, v := range p.touched {
			r := best[v]
			best[v] = -1
			id := ids.IDs[v]
			for int(id) >= len(p.byID) {
				p.byID = append(p.byID, 0)
			}
			if p.byID[id] == 0 && p.full(best) {
				return false
			}
			p.byID[id] = int32(p.take(int(p.byID[id])-1, latestPick{ci, r, int64(times[r])})) + 1
		}
		return true
	}
	for _, v := range p.touched {
		r := best[v]
		best[v] = -1
		s := k.dict.Value(int(v))
		slot, seen := p.byValue[s]
		if !seen {
			if p.full(best) {
				return false
			}
			slot = -1
			if p.clone {
				s = strings.Clone(s)
			}
		}
		p.byValue[s] = p.take(slot, latestPick{ci, r, int64(times[r])})
	}
	return true
}

// picksHold says whether no picked row is NULL in a column of nonNull
// (which arg_max would skip for an older row).
func picksHold(chunks []buffer.Chunk, picks []latestPick, nonNull []string) bool {
	cols := make([]arrow.Array, len(chunks))
	for _, name := range nonNull {
		for i, c := range chunks {
			cols[i] = nil
			if ix := c.Rec.Schema().FieldIndices(name); len(ix) > 0 {
				cols[i] = c.Rec.Column(ix[0])
			}
		}
		for _, pk := range picks {
			a := cols[pk.chunk]
			if a == nil || a.NullN() > 0 && a.IsNull(int(pk.row)) {
				return false
			}
		}
	}
	return true
}

// timesOf is rec's times; false when it has no time column, or a NULL
// in it.
func timesOf(rec arrow.RecordBatch) ([]arrow.Timestamp, bool) {
	ts, ok := timeColumn(rec)
	if !ok || ts.NullN() > 0 {
		return nil, false
	}
	return ts.TimestampValues(), true
}

// timeColumn is rec's time column.
func timeColumn(rec arrow.RecordBatch) (*array.Timestamp, bool) {
	ix := rec.Schema().FieldIndices(buffer.TimeColumn)
	if len(ix) == 0 {
		return nil, false
	}
	ts, ok := rec.Column(ix[0]).(*array.Timestamp)
	return ts, ok
}
