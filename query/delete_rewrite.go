//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A DELETE of a table that has persisted files, whose condition reads
// nothing but the row it is evaluated on (no subquery: rowLocal), runs as
// a rewrite of those files (buffer/rewrite.go) rather than a replace of
// the whole table through memory: the table's buffered rows are
// persisted first, then each of its files is read on its own through the
// delete's query of the rows that stay (the same admitted statement,
// restricted to that file: admitted.only), and a file that loses rows is
// replaced by a file of the rows that stay; all of them are committed at
// once. Memory holds the rows of two files at most (one is read while
// the one before is written, rewriteJob), writes go on (rows
// written after the DELETE began are not deleted), and readers see the
// table before the delete or after it. Files the condition's time bounds
// exclude are not read; of the others, only those in which the condition
// finds a row (asked first, through the scan's pruning) are read whole.
// Functions of the moment (now()) are evaluated once per file, so across
// files the instant they stand for may differ by the time the delete
// takes.

// onlySource restricts the scans of one table to one of its persisted
// files.
type onlySource struct {
	key  buffer.TableKey // lowerKey
	path string
}

// onlyFor is q's restriction of the scans of k, if any.
func (q *queryState) onlyFor(k buffer.TableKey) *onlySource {
	if q == nil || q.only == nil || q.only.key != lowerKey(k.Database, k.Table) {
		return nil
	}
	return q.only
}

// filter is the file of files that o names (none if not among them).
func (o *onlySource) filter(files []persist.File) []persist.File {
	for _, f := range files {
		if f.Path == o.path {
			return []persist.File{f}
		}
	}
	return nil
}

// rowLocal says whether the admitted delete query reads one table, once,
// and no subquery: its condition is then a function of each row alone,
// and may be evaluated over one file at a time.
func rowLocal(tree map[string]any) bool {
	tables, other := 0, false
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			switch {
			case x["class"] == "SUBQUERY":
				other = true
			case x["type"] == "BASE_TABLE":
				tables++
			case x["type"] == "TABLE_FUNCTION", x["type"] == "JOIN", x["type"] == "SUBQUERY", x["type"] == "EXPRESSION_LIST":
				other = true
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(tree)
	return tables == 1 && !other
}

// deleteByRewrite runs the admitted delete query keep (and its check,
// for time bounds) as a rewrite of the table's persisted files; it
// returns buffer.ErrNoRewrite, having done nothing, when this server
// cannot.
func (e *Engine) deleteByRewrite(ctx context.Context, p *deletePlan, keep, check *admitted, database string) (int64, error) {
	rw, err := e.wb.BeginRewrite(ctx, p.db, p.table)
	if err != nil {
		return 0, err
	}
	defer rw.Abort()
	// The time bounds of the condition: a file outside them loses no row.
	key := lowerKey(p.db, p.table)
	bounds := allTime
	var probe *admitted
	if check != nil {
		if bounds, err = e.boundsOf(ctx, check, database, key); err != nil {
			return 0, err
		}
		if probe, err = e.admitProbe(ctx, p, check, database); err != nil {
			return 0, err
		}
	}
	cutoff := rw.View().Cutoff(p.db)
	// The files are read (DuckDB) and written (the Parquet encoder) in
	// turn, one ahead: while a file's rows that stay are written, the next
	// file's are read. So memory holds two files' rows at most.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan rewriteJob)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(jobs)
		for _, src := range rw.Sources() {
			f := src.File
			if f.MaxTime < bounds.min || f.MinTime > bounds.max || f.MaxTime < cutoff {
				e.deleteFilesSkipped.Add(1)
				continue
			}
			j := e.readForRewrite(rctx, p, rw, src, keep, probe, cutoff, database)
			if j.skip {
				e.deleteFilesSkipped.Add(1)
				continue
			}
			select {
			case jobs <- j:
			case <-rctx.Done():
				releasePersistChunks(j.chunks)
				return
			}
			if j.err != nil {
				return
			}
		}
	})
	defer func() {
		cancel()
		for j := range jobs {
			releasePersistChunks(j.chunks)
		}
		wg.Wait()
	}()
	var deleted int64
	for j := range jobs {
		if j.err != nil {
			return 0, j.err
		}
		e.deleteFilesRead.Add(1)
		if j.kept == j.visible {
			releasePersistChunks(j.chunks)
			continue
		}
		if j.kept > j.visible {
			releasePersistChunks(j.chunks)
			return 0, fmt.Errorf("query: internal error, nothing deleted: %d rows of %s would stay of the %d it holds", j.kept, j.src.File.Path, j.visible)
		}
		err := rw.Replace(ctx, j.src, j.chunks)
		releasePersistChunks(j.chunks)
		if err != nil {
			return 0, err
		}
		deleted += j.visible - j.kept
	}
	if err := ctx.Err(); err != nil {
		return 0, err // the reader stopped early
	}
	if err := rw.Commit(ctx); err != nil {
		return 0, err
	}
	return deleted, nil
}

// rewriteJob is one persisted file read for a DELETE by rewrite: the
// rows of it that stay (kept of the visible it holds), or skip when the
// condition matches none of its rows, or the error that stopped the read.
type rewriteJob struct {
	src           buffer.RewriteSource
	chunks        []persist.Chunk
	kept, visible int64
	skip          bool
	err           error
}

// readForRewrite reads src for the DELETE by rewrite rw: first, if probe
// is set, whether any of its rows match (through the scan's pruning: row
// group and page statistics, dictionaries; a host that the file does not
// hold costs its footer, not a read of its rows; one it holds, the
// condition's columns up to the first match), then the rows of it that
// stay (keep, restricted to the file).
func (e *Engine) readForRewrite(ctx context.Context, p *deletePlan, rw *buffer.Rewrite, src buffer.RewriteSource, keep, probe *admitted, cutoff int64, database string) rewriteJob {
	f := src.File
	only := &onlySource{key: lowerKey(p.db, p.table), path: f.Path}
	j := rewriteJob{src: src, visible: f.Rows}
	if probe != nil {
		m := *probe
		m.view, m.only = rw.View(), only
		hit, err := e.anyRow(ctx, &m, database)
		if err != nil || !hit {
			j.err, j.skip = err, err == nil
			return j
		}
	}
	one := *keep
	one.view, one.only = rw.View(), only
	if f.MinTime < cutoff {
		// Some of its rows have expired: count those the query sees.
		if j.visible, j.err = e.countVisible(ctx, p, &one, database); j.err != nil {
			return j
		}
	}
	j.chunks, j.kept, j.err = e.keptRows(ctx, &one, database, rw.Table())
	return j
}

// boundsOf is the hull of the time bounds a's WHERE puts on table k
// (scanBounds), allTime if none.
func (e *Engine) boundsOf(ctx context.Context, a *admitted, database string, k buffer.TableKey) (timeBounds, error) {
	c, err := e.acquire(ctx, false, database)
	if err != nil {
		return allTime, err
	}
	defer e.release(c)
	if err := c.use(database); err != nil {
		return allTime, err
	}
	b, _, _, _, err := e.scanBounds(c, a.tree)
	if err != nil {
		e.log.Debug("DELETE: the condition's time bounds are not known; every file is read", "err", err)
		return allTime, nil
	}
	if tb, ok := b[k]; ok {
		return tb, nil
	}
	return allTime, nil
}

// anyRow says whether a returns a row; it stops reading at the first.
func (e *Engine) anyRow(ctx context.Context, a *admitted, database string) (bool, error) {
	rdr, err := e.runAdmitted(ctx, a, database, 0, nil)
	if err != nil {
		return false, err
	}
	defer rdr.Release()
	for rdr.Next() {
		if rdr.RecordBatch().NumRows() > 0 {
			return true, nil
		}
	}
	return false, rdr.Err()
}

// countVisible counts the rows of the file a (restricted by only) reads.
func (e *Engine) countVisible(ctx context.Context, p *deletePlan, a *admitted, database string) (int64, error) {
	count, err := e.admit(ctx, "SELECT count(*) FROM "+quoteIdent(p.db)+"."+quoteIdent(p.table), database)
	if err != nil {
		return 0, err
	}
	count.view, count.only = a.view, a.only
	rdr, err := e.runAdmitted(ctx, count, database, 0, nil)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		if rec := rdr.RecordBatch(); rec.NumRows() > 0 {
			n = rec.Column(0).(*array.Int64).Value(0)
		}
	}
	return n, rdr.Err()
}

// keptRows runs a, the rows of one file that stay, and returns them as
// chunks in the table's column types, with their count.
func (e *Engine) keptRows(ctx context.Context, a *admitted, database string, tbl *catalog.Table) (_ []persist.Chunk, rows int64, err error) {
	rdr, err := e.runAdmitted(ctx, a, database, 0, nil)
	if err != nil {
		return nil, 0, err
	}
	defer rdr.Release()
	var out []persist.Chunk
	defer func() {
		if err != nil {
			releasePersistChunks(out)
			out = nil
		}
	}()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		conv, err := asFileTypes(ctx, rec, tbl, e.wb.Allocator())
		if err != nil {
			return nil, 0, err
		}
		c, err := persist.ChunkOf(conv)
		if err != nil {
			conv.Release()
			return nil, 0, err
		}
		out = append(out, c)
		rows += conv.NumRows()
	}
	if err := rdr.Err(); err != nil {
		return nil, 0, err
	}
	return out, rows, nil
}

// toFileType is a in type want, strings dictionary-encoded.
func toFileType(ctx context.Context, a arrow.Array, want arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	if !arrow.TypeEqual(a.DataType(), want) {
		cast, err := compute.CastArray(compute.WithAllocator(ctx, mem), a, compute.SafeCastOptions(want))
		if err != nil {
			return nil, err
		}
		a = cast
	} else {
		a.Retain()
	}
	if want.ID() != arrow.STRING {
		return a, nil
	}
	defer a.Release()
	strs := a.(*array.String)
	b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	b.Reserve(strs.Len())
	for i := range strs.Len() {
		if strs.IsNull(i) {
			b.AppendNull()
		} else if err := b.AppendString(strs.Value(i)); err != nil {
			return nil, err
		}
	}
	return b.NewArray(), nil
}

func releasePersistChunks(cs []persist.Chunk) {
	for _, c := range cs {
		c.Rec.Release()
	}
}

// asFileTypes is rec (rows of the table as DuckDB returns them) in the
// types the Parquet writer takes (as the buffer holds them): the table's,
// strings as dictionaries of int32 indices.
func asFileTypes(ctx context.Context, rec arrow.RecordBatch, tbl *catalog.Table, mem memory.Allocator) (arrow.RecordBatch, error) {
	conv, err := asTableTypes(ctx, rec, tbl, mem)
	if err != nil {
		return nil, err
	}
	cols := conv.Columns()
	var fields []arrow.Field
	var out []arrow.Array
	changed := false
	for i, a := range cols {
		want := tbl.Columns[i].Type
		ok := arrow.TypeEqual(a.DataType(), want) && want.ID() != arrow.STRING
		if d, isDict := a.(*array.Dictionary); isDict && want.ID() == arrow.STRING {
			ok = d.Dictionary().DataType().ID() == arrow.STRING && d.Indices().DataType().ID() == arrow.INT32
		}
		if ok {
			a.Retain()
		} else {
			enc, err := toFileType(ctx, a, want, mem)
			if err != nil {
				for _, c := range out {
					c.Release()
				}
				conv.Release()
				return nil, fmt.Errorf("column %q: %w", tbl.Columns[i].Name, err)
			}
			a, changed = enc, true
		}
		fields = append(fields, arrow.Field{Name: tbl.Columns[i].Name, Type: a.DataType(), Nullable: true})
		out = append(out, a)
	}
	if !changed {
		for _, c := range out {
			c.Release()
		}
		return conv, nil
	}
	conv.Release()
	res := array.NewRecordBatch(arrow.NewSchema(fields, nil), out, rec.NumRows())
	for _, c := range out {
		c.Release()
	}
	return res, nil
}
