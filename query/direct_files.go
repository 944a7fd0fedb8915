//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A filtered direct scan (direct_where.go) whose bounds leave persisted
// files to read reads them itself, as DuckDB's run of the query would:
// through the scan DuckDB calls (scanLocal.fill: files and row groups
// pruned by their statistics, row groups narrowed to the series' run and
// the time range's pages, those pages from the page cache, pqpages.go),
// into a DuckDB chunk of the projected columns (and of the columns the
// WHERE compares), which DuckDB's own Arrow export turns into a batch of
// the result's types; the filter then keeps exactly the rows the WHERE
// admits, as it does of buffered chunks. What is left out is DuckDB's
// run: the Prepare of a text not seen before (a dashboard's query of
// another series), the transaction, the pipeline its worker thread
// picks up (most of a small query's p99 on a busy machine).

// Only when the WHERE pins the files' first sort column (the table's first
// string column: persist sorts a file by its string columns in table
// order, then time) to a value: each row group is then narrowed to that
// series' run. Any other filter would have the direct scan decode whole
// row groups on one thread, and convert every row to Arrow before
// filtering, where DuckDB's threads read them in parallel and filter
// them as vectors.

// leadEqual says whether equals (lower-cased column → values) pins t's
// first string column.
func leadEqual(t *catalog.Table, equals map[string][]string) bool {
	for _, c := range t.Columns {
		if c.Type.ID() == arrow.STRING {
			_, ok := equals[strings.ToLower(c.Name)]
			return ok
		}
	}
	return false
}

// directFiles reads the persisted files of a filtered direct scan.
type directFiles struct {
	g      *scanGlobal
	l      *scanLocal
	chunk  duck.DataChunk
	opts   duck.ArrowOptions
	schema *arrow.Schema // of the batches: table column names, the result's types
}

// errDirectFilesTypes: DuckDB's Arrow export of a column is not the type
// the filter reads (the time column as timestamp[ns], strings as utf8):
// DuckDB runs the query instead.
var errDirectFilesTypes = errors.New("query: the Arrow export of a persisted column is not the type the direct scan filters")

// newDirectFiles reads files, the persisted files of a table (bind's)
// within bounds, projected on cols and the columns f compares.
func (e *Engine) newDirectFiles(ctx context.Context, bind *bindData, cols []int, f *directFilter, bounds timeBounds, files []persist.File) (*directFiles, error) {
	proj := append([]int(nil), cols...)
	need := []string{buffer.TimeColumn}
	for col := range f.equals {
		need = append(need, col)
	}
	for _, name := range need {
		tc := slices.IndexFunc(bind.fields, func(f arrow.Field) bool { return strings.EqualFold(f.Name, name) })
		if tc < 0 {
			return nil, fmt.Errorf("%w: no column %q", errDirectFilesTypes, name)
		}
		if !slices.Contains(proj, tc) {
			proj = append(proj, tc)
		}
	}
	fields := make([]arrow.Field, len(proj))
	names := make([]string, len(proj))
	for i, tc := range proj {
		fields[i], names[i] = bind.fields[tc], bind.fields[tc].Name
	}
	// Converted once per list of column types (bindTypes), not per query:
	// 7% of the server's CPU under a loop of one-host queries.
	types, done, err := e.bindTypes(fields)
	if err != nil {
		return nil, err
	}
	if done != nil {
		defer done()
	}
	d := &directFiles{}
	duck.ConnectionGetArrowOptions(e.conv, &d.opts)
	schema, ed := duck.NewArrowSchema(d.opts, types, names)
	if err := errorData(ed); err != nil {
		duck.DestroyArrowOptions(&d.opts)
		return nil, err
	}
	for i, fl := range schema.Fields() {
		switch {
		case strings.EqualFold(names[i], buffer.TimeColumn):
			if ts, ok := fl.Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Nanosecond {
				err = fmt.Errorf("%w: %s is %s", errDirectFilesTypes, names[i], fl.Type)
			}
		case fields[i].Type.ID() == arrow.DICTIONARY && fl.Type.ID() != arrow.STRING:
			err = fmt.Errorf("%w: %s is %s", errDirectFilesTypes, names[i], fl.Type)
		}
	}
	if err != nil {
		duck.DestroyArrowOptions(&d.opts)
		return nil, err
	}
	d.schema = schema
	d.chunk = duck.CreateDataChunk(types)
	d.g = &scanGlobal{bind: bind, bounds: bounds, equals: f.equals, proj: proj, files: files, ctx: ctx}
	d.l = &scanLocal{g: d.g}
	return d, nil
}

// next returns the next chunk of the files' rows that can match (the
// filter still to be applied), as a buffer chunk without time bounds;
// false at the end.
func (d *directFiles) next() (buffer.Chunk, bool, error) {
	duck.DataChunkReset(d.chunk)
	if err := d.l.fill(d.chunk); err != nil {
		return buffer.Chunk{}, false, err
	}
	if duck.DataChunkGetSize(d.chunk) == 0 {
		return buffer.Chunk{}, false, nil
	}
	rec, ed := duck.DataChunkToArrowArray(d.opts, d.schema, d.chunk)
	if err := errorData(ed); err != nil {
		return buffer.Chunk{}, false, err
	}
	return buffer.Chunk{Rec: rec, MinTime: math.MinInt64, MaxTime: math.MaxInt64}, true, nil
}

func (d *directFiles) close() {
	d.l.destroy()
	d.g.destroy()
	duck.DestroyDataChunk(&d.chunk)
	duck.DestroyArrowOptions(&d.opts)
}
