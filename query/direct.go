//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A direct scan is a query that returns columns of one table as they are
// stored: SELECT * or SELECT col, … FROM table, with no WHERE (but the
// filters of direct_where.go), GROUP BY, ORDER BY, LIMIT, DISTINCT, join
// or parameter. It is the whole-table
// export that dataframe clients and ETL jobs send, and DuckDB would add
// nothing to it but a conversion of every value into its vectors and back
// to Arrow, on one thread. Such a query is still parsed, bound and checked
// by DuckDB (so errors and the result schema are DuckDB's), then streamed
// straight from the buffer's chunks and the persisted files.

// The same holds of SELECT * or columns FROM last_value('db.table'): the
// rows of the table's last-value cache (lastvalue.go) are streamed as the
// cache holds them.

// directScan is the table and columns of a direct scan.
type directScan struct {
	table     *catalog.Table
	cols      []int // table column of each output column
	lastValue bool  // the rows are its last-value cache's
	// where, if not nil, is the WHERE clause the rows are filtered by
	// (direct_where.go), and shape what decides the result schema
	// (direct_shape.go).
	where *directWhere
	shape string
	// use, with lastValue, is the query whose answer the cache's rows are
	// (lastValueUse.project); nil for a read of last_value.
	use *lastValueUse
	// latest, if not nil, says the rows are the latest of each key of
	// the table, found in its chunks and files (latest_direct.go).
	latest *latestPrune
}

// directScanOf recognizes a direct scan in a statement parsed by
// json_serialize_sql; db is the current database. Anything it does not
// recognize is left to DuckDB.
func directScanOf(tree map[string]any, db string, cat *catalog.Catalog) (*directScan, bool) {
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 {
		return nil, false
	}
	st, _ := stmts[0].(map[string]any)
	if params, _ := st["named_param_map"].([]any); len(params) > 0 {
		return nil, false
	}
	node, _ := st["node"].(map[string]any)
	if node["type"] != "SELECT_NODE" || !empty(node["modifiers"]) || !empty(node["group_expressions"]) ||
		!empty(node["group_sets"]) || node["having"] != nil ||
		node["sample"] != nil || node["qualify"] != nil || node["aggregate_handling"] != "STANDARD_HANDLING" {
		return nil, false
	}
	if ctes, _ := node["cte_map"].(map[string]any); ctes == nil || !empty(ctes["map"]) {
		return nil, false
	}
	from, ok := selectFrom(node, db, cat)
	lastValue := false
	if !ok {
		if from, ok = lastValueFrom(node, cat); !ok {
			return nil, false
		}
		lastValue = true
	}
	d := &directScan{table: from.table, lastValue: lastValue}
	if where := node["where_clause"]; where != nil {
		ft, _ := node["from_table"].(map[string]any)
		alias, _ := ft["alias"].(string)
		name, _ := ft["table_name"].(string)
		if lastValue {
			return nil, false
		}
		if d.where, ok = directWhereOf(where, from, alias, name); !ok {
			return nil, false
		}
		d.shape = directShapeOf(node)
	}
	list, _ := node["select_list"].([]any)
	for _, item := range list {
		e, _ := item.(map[string]any)
		cols, ok := from.columns(e)
		if !ok || slices.Contains(cols, -1) {
			return nil, false
		}
		d.cols = append(d.cols, cols...)
	}
	return d, len(d.cols) > 0
}

// lastValueFrom finds the table of a FROM clause that is last_value of a
// string constant naming it, as its bind does (apron_last_value_bind).
func lastValueFrom(node map[string]any, cat *catalog.Catalog) (*fromTable, bool) {
	from, _ := node["from_table"].(map[string]any)
	if from["type"] != "TABLE_FUNCTION" || from["sample"] != nil || !empty(from["column_name_alias"]) ||
		from["with_ordinality"] != "WITHOUT_ORDINALITY" {
		return nil, false
	}
	f, _ := from["function"].(map[string]any)
	name, _ := f["function_name"].(string)
	if !strings.EqualFold(name, lastValueFunction) || f["schema"] != "" || f["catalog"] != "" {
		return nil, false
	}
	children, _ := f["children"].([]any)
	if len(children) != 1 {
		return nil, false
	}
	arg, _ := children[0].(map[string]any)
	v, _ := arg["value"].(map[string]any)
	typ, _ := v["type"].(map[string]any)
	str, _ := v["value"].(string)
	if arg["class"] != "CONSTANT" || typ["id"] != "VARCHAR" || v["is_null"] != false {
		return nil, false
	}
	db, table, ok := strings.Cut(str, ".")
	if !ok {
		return nil, false
	}
	t, ok := cat.Table(db, table)
	if !ok {
		return nil, false
	}
	alias, _ := from["alias"].(string)
	if alias == "" {
		alias = lastValueFunction
	}
	return newFromTable(t, alias)
}

// findTable finds db.table as DuckDB would, ignoring case, or nil when
// it is not exactly one Apron table.
func findTable(cat interface{ Databases() []*catalog.Database }, db, table string) *catalog.Table {
	var found *catalog.Table
	for _, d := range cat.Databases() {
		if !strings.EqualFold(d.Name, db) {
			continue
		}
		for _, t := range d.TableList() {
			if strings.EqualFold(t.Name, table) {
				if found != nil {
					return nil
				}
				found = t
			}
		}
	}
	return found
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// fits says whether schema, DuckDB's result schema of the statement, is
// what the scan streams: the table's column types, strings as utf8.
func (d *directScan) fits(schema *arrow.Schema) bool {
	if d.latest != nil && d.latest.countKeys {
		return schema.NumFields() == 1 && schema.Field(0).Type.ID() == arrow.INT64
	}
	if schema.NumFields() != len(d.cols) {
		return false
	}
	for i, f := range schema.Fields() {
		if !arrow.TypeEqual(f.Type, d.table.Columns[d.cols[i]].Type) {
			return false
		}
	}
	return true
}

// directReader streams a direct scan: the table's chunks in the View, then
// its persisted files, each batch projected onto the result schema.
type directReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	sub    *arrow.Schema // schema with the table's column names
	ctx    context.Context
	mem    memory.Allocator
	g      *scanGlobal // for the persisted files' reader
	chunks []buffer.Chunk
	files  []persist.File
	file   *fileReader
	filter *directFilter // nil: every row
	pq     *directFiles  // the persisted files of a filtered scan (direct_files.go)
	cur    arrow.RecordBatch
	// ready is the answer made whole before the first Next (a count of
	// keys, latest_count.go), handed out first.
	ready  arrow.RecordBatch
	err    error
	onDone func()
}

// newDirectReader starts streaming d over view, which it releases when
// done, as it calls the reader's onDone. false: the scan of a last-value
// cache cannot be read directly; view is released.
func (e *Engine) newDirectReader(ctx context.Context, d *directScan, schema *arrow.Schema, view *buffer.View) (*directReader, bool) {
	var r *directReader
	defer func() {
		// A panic (a bug) lets go of the View before start recovers it
		// (panics.go): held, it would keep its segments in memory.
		if p := recover(); p != nil {
			if r != nil {
				r.finish()
			} else {
				view.Release()
			}
			panic(p)
		}
	}()
	if h := panicTestHooks.Load(); h != nil && h.reader != nil {
		h.reader(d)
	}
	key := buffer.TableKey{Database: d.table.Database, Table: d.table.Name}
	fields := make([]arrow.Field, len(d.table.Columns))
	for i, f := range d.table.ArrowSchema().Fields() {
		if f.Type.ID() == arrow.STRING {
			f.Type = stringDictType
		}
		fields[i] = f
	}
	g := &scanGlobal{bind: &bindData{e: e, key: key, fields: fields}, bounds: allTime, proj: d.cols, ctx: ctx, view: view}
	subFields := make([]arrow.Field, schema.NumFields())
	for i, f := range schema.Fields() {
		subFields[i] = arrow.Field{Name: fields[d.cols[i]].Name, Type: f.Type, Nullable: true}
	}
	r = &directReader{schema: schema, sub: arrow.NewSchema(subFields, nil), ctx: ctx, mem: e.scanMem, g: g}
	r.refs.Store(1)
	if h := panicTestHooks.Load(); h != nil && h.built != nil {
		h.built(d)
	}
	if d.lastValue {
		g.bind.lastValue = d.use == nil
		chunks, ok, err := e.cacheChunks(view, g.bind, d.use)
		if err != nil || !ok {
			r.finish()
			return nil, false
		}
		r.chunks = chunks
		return r, true
	}
	if d.latest != nil {
		chunks, ok := e.latestRowsOf(ctx, view, d)
		if !ok {
			r.finish()
			return nil, false
		}
		if d.latest.countKeys {
			r.ready = countKeys(chunks, d.latest.col, schema, r.mem) // latest_count.go
			return r, true
		}
		r.chunks = chunks
		return r, true
	}
	bounds := allTime
	if d.where != nil {
		b, ok := d.where.interval(e, time.Now())
		if !ok {
			r.finish()
			return nil, false
		}
		bounds = b
		r.filter = &directFilter{b: b, equals: d.where.equals, memo: newSelectMemo()}
	}
	bounds = withCutoff(view, key, bounds)
	if bounds.min > bounds.max {
		return r, true // no time admitted: no rows
	}
	r.files = e.persistedFiles(view, key, bounds)
	if r.filter != nil && len(r.files) > 0 {
		if !leadEqual(d.table, r.filter.equals) {
			// The files' row groups cannot be narrowed to a series:
			// DuckDB's threads read them whole, in parallel.
			r.finish()
			return nil, false
		}
		// Read through the scan DuckDB would call, which narrows row
		// groups to pages (direct_files.go).
		pq, err := e.newDirectFiles(ctx, g.bind, d.cols, r.filter, bounds, r.files)
		if err != nil {
			e.log.Debug("a filtered direct scan of persisted files runs on DuckDB instead", "table", d.table.Database+"."+d.table.Name, "err", err)
			r.finish()
			return nil, false
		}
		r.pq, r.files = pq, nil
		e.directFileScans.Add(1)
	}
	r.chunks = e.snapshot(view, key, bounds)
	return r, true
}

func (r *directReader) Schema() *arrow.Schema          { return r.schema }
func (r *directReader) Err() error                     { return r.err }
func (r *directReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *directReader) Record() arrow.RecordBatch      { return r.cur }
func (r *directReader) Retain()                        { r.refs.Add(1) }

func (r *directReader) Release() {
	if r.refs.Add(-1) > 0 {
		return
	}
	r.finish()
}

// finish releases everything the reader holds; idempotent.
func (r *directReader) finish() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.ready != nil {
		r.ready.Release()
		r.ready = nil
	}
	for _, c := range r.chunks {
		c.Rec.Release()
	}
	r.chunks = nil
	r.files = nil
	if r.file != nil {
		r.file.close()
		r.file = nil
	}
	if r.pq != nil {
		r.pq.close()
		r.pq = nil
	}
	if r.g != nil {
		r.g.destroy() // releases the View
		r.g = nil
	}
	if r.onDone != nil {
		r.onDone()
		r.onDone = nil
	}
}

func (r *directReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for r.err == nil {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			break
		}
		if r.ready != nil {
			r.cur, r.ready = r.ready, nil
			return true
		}
		var c buffer.Chunk
		switch {
		case r.file != nil:
			next, ok, err := r.file.next()
			if err != nil {
				r.err = err
				continue
			}
			if !ok {
				r.file.close()
				r.file = nil
				continue
			}
			c = next
		case len(r.chunks) == 0 && r.pq != nil:
			// A batch's worth of the files' rows, filtered as buffered
			// chunks are.
			for rows := int64(0); rows < directBatchRows && r.pq != nil; {
				c, ok, err := r.pq.next()
				if err != nil {
					r.err = err
					break
				}
				if !ok {
					r.pq.close()
					r.pq = nil
					break
				}
				r.chunks = append(r.chunks, c)
				rows += c.Rec.NumRows()
			}
			continue
		case len(r.chunks) > 0 && r.filter != nil:
			rec, err := r.nextFiltered()
			if err != nil {
				r.err = err
				continue
			}
			if rec == nil {
				continue
			}
			r.cur = rec
			return true
		case len(r.chunks) > 0:
			k, rows := 0, int64(0)
			for k < len(r.chunks) && (k == 0 || rows+r.chunks[k].Rec.NumRows() <= directBatchRows) {
				rows += r.chunks[k].Rec.NumRows()
				k++
			}
			rec, err := r.project(r.chunks[:k])
			for _, c := range r.chunks[:k] {
				c.Rec.Release()
			}
			r.chunks = r.chunks[k:]
			if err != nil {
				r.err = err
				continue
			}
			if rec.NumRows() == 0 {
				rec.Release()
				continue
			}
			r.cur = rec
			return true
		case len(r.files) > 0:
			f := r.files[0]
			r.files = r.files[1:]
			if r.file, r.err = r.g.openFile(f); r.err != nil {
				r.err = fmt.Errorf("table %s.%s: %w", f.Database, f.Table, r.err)
			}
			continue
		default:
			r.finish()
			return false
		}
		rec, err := r.project([]buffer.Chunk{c})
		c.Rec.Release()
		if err != nil {
			r.err = err
			continue
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		r.cur = rec
		return true
	}
	r.finish()
	return false
}

// nextFiltered returns the rows the filter keeps of the next chunks, up
// to directBatchRows of them (at least one chunk's), as one batch of the
// result; nil when those chunks kept none.
func (r *directReader) nextFiltered() (arrow.RecordBatch, error) {
	var kept []buffer.Chunk
	defer func() {
		for _, c := range kept {
			c.Rec.Release()
		}
	}()
	rows := int64(0)
	for len(r.chunks) > 0 && (len(kept) == 0 || rows < directBatchRows) {
		c := r.chunks[0]
		r.chunks = r.chunks[1:]
		rec, err := r.filter.rows(c, r.mem)
		c.Rec.Release()
		if err != nil {
			return nil, err
		}
		if rec != nil {
			kept = append(kept, buffer.Chunk{Rec: rec})
			rows += rec.NumRows()
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	rec, err := r.project(kept)
	if err != nil {
		return nil, err
	}
	if rec.NumRows() == 0 {
		rec.Release()
		return nil, nil
	}
	return rec, nil
}

// directBatchRows is how many rows of buffered chunks a direct scan joins
// into one batch: chunks of that size (the buffer's) go out one by one, with
// their fixed-width columns not copied at all; smaller ones (the open
// chunk's, a small partition's) are joined, each value copied once.
const directBatchRows = 8 << 10

// project returns the rows of chunks, one after the other, as one batch
// of the result schema: columns the chunks lack are null, dictionary
// strings decoded. Each value is copied once (a single chunk's
// fixed-width columns not at all).
func (r *directReader) project(chunks []buffer.Chunk) (arrow.RecordBatch, error) {
	var n int64
	for _, c := range chunks {
		n += c.Rec.NumRows()
	}
	cols := make([]arrow.Array, r.sub.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(chunks))
	for i, f := range r.sub.Fields() {
		strs := false
		for j, c := range chunks {
			parts[j] = nil
			if idx := c.Rec.Schema().FieldIndices(f.Name); len(idx) > 0 {
				parts[j] = c.Rec.Column(idx[0])
				if !arrow.TypeEqual(parts[j].DataType(), f.Type) {
					d, ok := parts[j].(*array.Dictionary)
					if !ok || f.Type.ID() != arrow.STRING {
						return nil, fmt.Errorf("column %q is %s in the buffer, %s in the result", f.Name, parts[j].DataType(), f.Type)
					}
					if _, ok := d.Dictionary().(*array.String); !ok {
						return nil, fmt.Errorf("column %q is %s in the buffer, %s in the result", f.Name, parts[j].DataType(), f.Type)
					}
					strs = true
				}
			}
		}
		var err error
		if strs {
			cols[i] = decodeStrings(parts, chunks, r.mem)
		} else {
			cols[i], err = concatColumn(parts, chunks, f.Type, r.mem)
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return array.NewRecordBatch(r.schema, cols, n), nil
}

// decodeStrings joins string columns, plain or dictionaries of utf8 (nil:
// the chunk lacks the column), into one utf8 array: sized in a first pass,
// then filled by copying each value's bytes, with no per-value builder
// call (that was half of a direct scan's CPU).
func decodeStrings(parts []arrow.Array, chunks []buffer.Chunk, mem memory.Allocator) arrow.Array {
	type part struct {
		rows   int
		offs   []int32 // of the values: a plain column's, or the dictionary's
		data   []byte
		idx    []int32 // dictionary indices; nil for a plain column
		arr    arrow.Array
		absent bool
	}
	ps := make([]part, len(parts))
	rows, size, nulls := 0, 0, 0
	for j, p := range parts {
		n := int(chunks[j].Rec.NumRows())
		ps[j] = part{rows: n, arr: p}
		rows += n
		switch p := p.(type) {
		case nil:
			ps[j].absent = true
			nulls += n
			continue
		case *array.String:
			ps[j].offs, ps[j].data = p.ValueOffsets(), p.ValueBytes()
		case *array.Dictionary:
			dict := p.Dictionary().(*array.String)
			ps[j].offs, ps[j].data = dict.ValueOffsets(), dict.ValueBytes()
			if p.Indices().DataType().ID() == arrow.INT32 {
				ps[j].idx = int32Values(p.Indices())
			} else {
				ps[j].idx = make([]int32, n)
				for k := range n {
					ps[j].idx[k] = int32(p.GetValueIndex(k))
				}
			}
		}
		nulls += p.NullN()
		for k := range n {
			if p.NullN() > 0 && p.IsNull(k) {
				continue
			}
			v := k
			if ps[j].idx != nil {
				v = int(ps[j].idx[k])
			}
			size += int(ps[j].offs[v+1] - ps[j].offs[v])
		}
	}
	offsetsBuf := memory.NewResizableBuffer(mem)
	offsetsBuf.Resize((rows + 1) * 4)
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(size)
	offsets := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offsetsBuf.Bytes()))), rows+1)
	data := dataBuf.Bytes()
	var validBuf *memory.Buffer
	var valid []byte
	if nulls > 0 {
		validBuf = memory.NewResizableBuffer(mem)
		validBuf.Resize(int(bitutil.BytesForBits(int64(rows))))
		valid = validBuf.Bytes()
	}
	row, pos := 0, int32(0)
	for _, p := range ps {
		if p.absent {
			for k := range p.rows {
				offsets[row+k] = pos
			}
			if valid != nil {
				bitutil.SetBitsTo(valid, int64(row), int64(p.rows), false)
			}
			row += p.rows
			continue
		}
		hasNulls := p.arr.NullN() > 0
		if valid != nil {
			if hasNulls {
				bitutil.CopyBitmap(p.arr.NullBitmapBytes(), p.arr.Data().Offset(), p.rows, valid, row)
			} else {
				bitutil.SetBitsTo(valid, int64(row), int64(p.rows), true)
			}
		}
		for k := range p.rows {
			offsets[row] = pos
			row++
			if hasNulls && p.arr.IsNull(k) {
				continue
			}
			v := k
			if p.idx != nil {
				v = int(p.idx[k])
			}
			pos += int32(copy(data[pos:], p.data[p.offs[v]:p.offs[v+1]]))
		}
	}
	offsets[rows] = pos
	d := array.NewData(arrow.BinaryTypes.String, rows, []*memory.Buffer{validBuf, offsetsBuf, dataBuf}, nil, nulls, 0)
	defer d.Release()
	for _, b := range []*memory.Buffer{validBuf, offsetsBuf, dataBuf} {
		if b != nil {
			b.Release()
		}
	}
	return array.MakeFromData(d)
}

// concatColumn joins a column of the chunks (nil: the chunk lacks it,
// nulls) into one array.
func concatColumn(parts []arrow.Array, chunks []buffer.Chunk, dt arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	if len(parts) == 1 && parts[0] != nil {
		parts[0].Retain()
		return parts[0], nil
	}
	arrs := make([]arrow.Array, len(parts))
	for j, p := range parts {
		if p == nil {
			arrs[j] = array.MakeArrayOfNull(mem, dt, int(chunks[j].Rec.NumRows()))
			defer arrs[j].Release()
			continue
		}
		arrs[j] = p
	}
	return array.Concatenate(arrs, mem)
}

// direct starts stmt, just prepared on c, as a direct scan when it is one;
// otherwise it returns nil and stmt is left as it was. The scan holds c
// until it is done, as a query run by DuckDB would: it counts against
// --max-concurrent-queries and shows in system.queries.
func (e *Engine) direct(ctx context.Context, c *conn, stmt duck.PreparedStatement) array.RecordReader {
	v, ok := e.qstate.Load(c.id)
	if !ok || v.(*queryState).direct == nil {
		return nil
	}
	qs := v.(*queryState)
	d := qs.direct
	schema, err := c.resultSchemaOf(stmt)
	if err != nil || !d.fits(schema) {
		return nil
	}
	e.keepShape(c, qs, schema)
	return e.directRead(ctx, c, d, schema, &stmt)
}

// directRead streams d with the result schema on c, if it still can be
// (false: DuckDB runs the query); stmt, DuckDB's prepared statement of
// the query, is kept for the next run of its text (nil: there is none).
func (e *Engine) directRead(ctx context.Context, c *conn, d *directScan, schema *arrow.Schema, stmt *duck.PreparedStatement) array.RecordReader {
	view := e.wb.View()
	if t, ok := view.Catalog().Table(d.table.Database, d.table.Name); !ok || t.ID != d.table.ID {
		// Dropped or replaced since the statement was parsed: DuckDB
		// binds it again.
		view.Release()
		return nil
	}
	if !d.lastValue && straddlesCutoff(view, buffer.TableKey{Database: d.table.Database, Table: d.table.Name}) {
		view.Release()
		return nil // retention.go
	}
	r, ok := e.newDirectReader(ctx, d, schema, view)
	if !ok {
		// The cache is filling, or gone: DuckDB's run says so.
		return nil
	}
	if stmt != nil {
		c.keepPlan(stmt) // the next direct scan of the text needs no Prepare
	}
	e.directScans.Add(1)
	untrack := e.track(c)
	r.onDone = func() {
		untrack()
		e.release(c)
	}
	return r
}
