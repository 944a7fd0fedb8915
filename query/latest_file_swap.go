//go:build duckdb_arrow

package query

import (
	"context"
	"math"
	"time"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// Persisted files read as their latest rows, when DuckDB answers a latest
// row per key.
//
// A query of latest.go's shape that is not answered in Go (an ORDER BY
// of an aggregate, equalities of a column not grouped by, …) is run by
// DuckDB over the chunks and files the pruning keeps, and DuckDB read
// each file whole: the latest row per host of a region, or per (host,
// region) in order of time, over the peer benchmark's 5M rows persisted
// in one file took 180 ms, where the latest row per host took 0.6. Its answer
// depends on a file only through each key's (each combination's) latest
// row there, the file's latest rows (latest_file_rows.go), read once and
// kept: DuckDB is given those, as a chunk, instead of the file, when
// they stand for it:
//
//   - The WHERE is bounds on time (with equalities of the key for one
//     key), and every row of the file is within its upper bound (exact:
//     the file's greatest time at most its end). The lower bound, and a
//     retention cutoff, filter a key's rows from its oldest on: if its
//     latest row in the file is cut, so are the others, and DuckDB cuts
//     it from the chunk as it would from the file.
//   - The select list is keys, constants, max(time) and arg_max of time
//     (latestOf), which read each key's rows of the greatest time alone,
//     but arg_max (and max_by) skip rows where the column is NULL: a file
//     whose latest rows hold a NULL in such a column is read whole.
//
// A file whose latest rows cannot be read (a column of another type than
// the table's) is read whole too.

// fileRowsInstead replaces the files of p's query that their latest rows
// stand for by those rows, appended to chunks (retained), and returns
// the files left for DuckDB to read.
func (e *Engine) fileRowsInstead(ctx context.Context, p *latestPrune, chunks []buffer.Chunk, files []persist.File) ([]buffer.Chunk, []persist.File) {
	if len(files) == 0 || p.tab == nil {
		return chunks, files
	}
	cols := p.cols
	if len(cols) == 0 {
		cols = []string{p.col}
	}
	left := files[:0:0]
	newest := int64(math.MinInt64)
	for _, f := range files {
		newest = max(newest, f.MaxTime)
		if f.Rows == 0 || f.MaxTime > p.exact.max {
			left = append(left, f)
			continue
		}
		fr, _, err := e.fileRowsOf(ctx, f, cols, p.tab, true)
		if err == nil {
			err = fr.unusable
		}
		if err != nil {
			e.log.Debug("latest row per key: a file's latest rows not read; DuckDB reads the file", "file", f.Path, "err", err)
			left = append(left, f)
			continue
		}
		if fr.chunk.Rec == nil || fr.chunk.Rec.NumRows() == 0 {
			e.latestFileSwaps.Add(1)
			continue // no rows
		}
		if !nonNullIn(fr.chunk, p.nonNull) {
			left = append(left, f)
			continue
		}
		fr.chunk.Rec.Retain()
		chunks = append(chunks, fr.chunk)
		e.latestFileSwaps.Add(1)
	}
	if len(left) < len(files) {
		// Read ahead after the next persists, as for the answers in Go.
		e.latestWarm.want(latestWant{p.tab.Database, p.tab.Name, keySpec(cols)}, newest, time.Now())
	}
	return chunks, left
}

// nonNullIn says whether no row of c is NULL in a column of nonNull (a
// column c lacks is NULL in every row).
func nonNullIn(c buffer.Chunk, nonNull []string) bool {
	for _, name := range nonNull {
		ix := c.Rec.Schema().FieldIndices(name)
		if len(ix) == 0 || c.Rec.Column(ix[0]).NullN() > 0 {
			return false
		}
	}
	return true
}
