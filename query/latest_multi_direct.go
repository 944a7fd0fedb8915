//go:build duckdb_arrow

package query

import (
	"context"
	"math"
	"time"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// The latest row per combination of several key columns, answered
// without DuckDB: as for one key (latest_direct.go), when the select list
// is the keys, max(time) and arg_max of columns by time, the WHERE bounds
// on time a direct scan understands with equalities of the keys or none,
// and there is no ORDER BY or LIMIT. Each combination's row of the
// greatest time within the bounds is picked (multiPicker) among the
// chunks the pruning keeps (latest_multi.go) and every persisted file's
// latest rows (latest_file_rows.go, read once a file): for 200
// combinations, DuckDB's aggregate over the kept chunks costs ~2 ms a
// query on 2 cores, where the picking costs a fraction of one. DuckDB
// answers, as for one key, when a file has rows past the upper bound, a
// file's rows cannot be read, a key is not dictionary-encoded strings,
// a chunk's combinations are too many to number (maxMultiCodes), or a
// picked row is NULL where arg_max reads.

// latestMultiRowsOf is latestRowsOf for several key columns, given the
// rows' times within, the View's cutoff and the table's chunks within
// them (retained: released here) and files.
func (e *Engine) latestMultiRowsOf(ctx context.Context, d *directScan, within timeBounds, cutoff int64, chunks []buffer.Chunk, files []persist.File) (_ []buffer.Chunk, ok bool) {
	p := d.latest
	defer func() {
		for _, c := range chunks {
			c.Rec.Release()
		}
	}()
	var nc int
	chunks, files, nc, _ = p.pruneMulti(chunks, files, cutoff)
	e.latestChunks.Add(int64(nc))
	newest := int64(math.MinInt64)
	for _, f := range files {
		if f.Rows == 0 {
			continue
		}
		if f.MaxTime > within.max {
			// A combination's latest row in the file may be past the
			// upper bound, and one within it not among those kept.
			return nil, false
		}
		rows, ok := e.multiFileRows(ctx, f, p)
		if !ok {
			return nil, false
		}
		newest = max(newest, f.MaxTime)
		if rows.Rec != nil && rows.Rec.NumRows() > 0 {
			rows.Rec.Retain()
			chunks = append(chunks, rows)
		}
	}
	if newest != math.MinInt64 {
		e.latestWarm.want(latestWant{d.table.Database, d.table.Name, keySpec(p.cols)}, newest, time.Now())
	}
	picker := newMultiPicker(p.cols)
	picker.within, picker.only = within, p.colOnly
	for ci, c := range chunks {
		if !picker.add(ci, c.Rec) {
			return nil, false
		}
	}
	if !picksHold(chunks, picker.picks, p.nonNull) {
		return nil, false
	}
	out, err := gatherPicks(chunks, picker.picks, e.wb.Allocator())
	if err != nil {
		e.log.Debug("latest row per key: gathering rows failed; DuckDB answers", "err", err)
		return nil, false
	}
	return out, true
}

// multiFileRows is f's latest row of each combination of p's key
// columns; false when they cannot be read.
func (e *Engine) multiFileRows(ctx context.Context, f persist.File, p *latestPrune) (buffer.Chunk, bool) {
	fr, _, err := e.fileRowsOf(ctx, f, p.cols, p.tab, true)
	if err == nil {
		err = fr.unusable
	}
	if err != nil {
		e.log.Debug("latest row per key: a file's latest rows not read; DuckDB answers", "file", f.Path, "err", err)
		return buffer.Chunk{}, false
	}
	return fr.chunk, true
}
