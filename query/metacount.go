//go:build duckdb_arrow

package query

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// Counts and time extremes from metadata.
//
// A query of the shape
//
//	SELECT count(*) | min(time) | max(time), … FROM table [WHERE bounds on time]
//
// (nothing else in its select list, no GROUP BY, HAVING, ORDER BY, LIMIT,
// DISTINCT; a WHERE clause that is a conjunction of comparisons of time
// with constants) still runs on DuckDB, unchanged, but its scan does not
// hand DuckDB the chunks and persisted files whose every row matches the
// WHERE clause for certain (their time range lies within the bounds'
// exact interval, scanBounds, and after the table's retention cutoff
// with a clock's slack): it adds up their row counts and time extremes
// from their metadata instead. DuckDB then reads only the chunks and files
// that straddle a bound, and the single row it answers is completed with
// what the metadata gave: count + rows, min(min, oldest), max(max, newest).
// What is in the buffer and what is persisted count alike; a count over
// the whole table reads no row at all.
//
// The answer is DuckDB's own over the rows that remain plus exact counts
// of rows that match for certain, so it is exactly the full scan's: the
// row counts of chunks and files are exact (a DELETE rewrites files, a
// dropped table's segments are not in the View, a segment being
// persisted is read once, from memory), and every time in a chunk or file
// lies within its [MinTime, MaxTime].

// metaItem is what one output column of such a query is.
type metaItem int

const (
	metaCount metaItem = iota
	metaMin
	metaMax
)

// metaAgg is the metadata part of one such query: its shape, found when
// the query is prepared, and what its scan's init adds up.
type metaAgg struct {
	key   buffer.TableKey // lower-cased
	items []metaItem
	exact timeBounds // rows within match the WHERE clause for certain

	mu     sync.Mutex
	claims int // scans that added up (must be at most 1)
	rows   int64
	oldest int64
	newest int64
}

// metaAggOf returns the metadata part of the statement tree, or nil if its
// shape is not one metadata can serve. exact is scanBounds'.
func metaAggOf(tree map[string]any, db string, exact map[buffer.TableKey]timeBounds) *metaAgg {
	sel, ok := plainTableSelect(tree, db, exact)
	if !ok || !emptyList(sel.node["modifiers"]) {
		return nil
	}
	node, key, b, alias, table := sel.node, sel.key, sel.exact, sel.alias, sel.table
	list, _ := node["select_list"].([]any)
	if len(list) == 0 {
		return nil
	}
	m := &metaAgg{key: key, exact: b, oldest: math.MaxInt64, newest: math.MinInt64}
	for _, x := range list {
		f, _ := x.(map[string]any)
		if f == nil || f["class"] != "FUNCTION" || f["filter"] != nil || f["distinct"] != false || f["export_state"] != false ||
			f["schema"] != "" || f["catalog"] != "" || f["is_operator"] != false {
			return nil
		}
		if ob, _ := f["order_bys"].(map[string]any); ob != nil && !emptyList(ob["orders"]) {
			return nil
		}
		children, _ := f["children"].([]any)
		switch name, _ := f["function_name"].(string); {
		case name == "count_star" && len(children) == 0:
			m.items = append(m.items, metaCount)
		case (name == "min" || name == "max") && len(children) == 1 && isTimeColumn(children[0], alias, table):
			if name == "min" {
				m.items = append(m.items, metaMin)
			} else {
				m.items = append(m.items, metaMax)
			}
		default:
			return nil
		}
	}
	return m
}

// tableSelect is a SELECT of one table whose WHERE clause, if any, is
// bounds on time (plainTableSelect).
type tableSelect struct {
	node         map[string]any
	key          buffer.TableKey // lower-cased
	exact        timeBounds      // rows within match the WHERE clause for certain
	alias, table string          // as the FROM clause names it
}

// plainTableSelect is the one statement of tree when it is a SELECT of
// one table of a database (no join, subquery in FROM, sample, CTE, GROUP
// BY, HAVING, QUALIFY …) with exact bounds (scanBounds: its WHERE clause
// is bounds on time, or none).
func plainTableSelect(tree map[string]any, db string, exact map[buffer.TableKey]timeBounds) (tableSelect, bool) {
	var none tableSelect
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 {
		return none, false
	}
	stmt, _ := stmts[0].(map[string]any)
	node, _ := stmt["node"].(map[string]any)
	if node == nil || node["type"] != "SELECT_NODE" || !emptyList(node["group_expressions"]) || !emptyList(node["group_sets"]) ||
		node["having"] != nil || node["qualify"] != nil || node["sample"] != nil || node["aggregate_handling"] != "STANDARD_HANDLING" {
		return none, false
	}
	if cte, _ := node["cte_map"].(map[string]any); cte == nil || !emptyList(cte["map"]) {
		return none, false
	}
	from, _ := node["from_table"].(map[string]any)
	if from == nil || from["type"] != "BASE_TABLE" || from["sample"] != nil || from["at_clause"] != nil || !emptyList(from["column_name_alias"]) {
		return none, false
	}
	w := &walker{db: db}
	key, ok := w.key(from)
	if !ok || strings.EqualFold(key.Database, SystemSchema) {
		return none, false
	}
	b, ok := exact[key]
	if !ok {
		return none, false
	}
	alias, _ := from["alias"].(string)
	table, _ := from["table_name"].(string)
	return tableSelect{node: node, key: key, exact: b, alias: alias, table: table}, true
}

func emptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// isTimeColumn says whether e is the time column of the table named table
// (or aliased alias).
func isTimeColumn(e any, alias, table string) bool {
	name, ok := columnOf(e, alias, table)
	return ok && name == buffer.TimeColumn
}

// sure says whether every row of a chunk or file with rows in
// [minTime, maxTime] matches the query, given the retention cutoff of the
// View (math.MinInt64: none). The cutoff DuckDB applies is now() at the
// query's start minus the retention, which may differ from the View's by
// the moments between them: clockSlack covers it.
func (m *metaAgg) sure(minTime, maxTime, cutoff int64) bool {
	if cutoff != math.MinInt64 && minTime < satAdd(cutoff, clockSlack) {
		return false
	}
	return minTime >= m.exact.min && maxTime <= m.exact.max
}

// claim takes out of chunks and files those whose rows all match, adding
// up their rows and times; it returns the rest. Chunks taken out are
// released.
func (m *metaAgg) claim(chunks []buffer.Chunk, files []persist.File, cutoff int64) (_ []buffer.Chunk, _ []persist.File, nchunks, nfiles int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims++
	if m.claims > 1 {
		return chunks, files, 0, 0 // the answer is refused (see adjust)
	}
	keptChunks := chunks[:0]
	for _, c := range chunks {
		if m.take(c.Rec.NumRows(), c.MinTime, c.MaxTime, cutoff) {
			nchunks++
			c.Rec.Release()
			continue
		}
		keptChunks = append(keptChunks, c)
	}
	keptFiles := files[:0]
	for _, f := range files {
		if m.take(f.Rows, f.MinTime, f.MaxTime, cutoff) {
			nfiles++
			continue
		}
		keptFiles = append(keptFiles, f)
	}
	return keptChunks, keptFiles, nchunks, nfiles
}

// take adds rows rows of times within [oldest, newest] if there are any
// and they all match for certain (sure); it says whether it did. The
// caller holds m.mu.
func (m *metaAgg) take(rows, oldest, newest, cutoff int64) bool {
	if rows == 0 || !m.sure(oldest, newest, cutoff) {
		return false
	}
	m.rows += rows
	m.oldest = min(m.oldest, oldest)
	m.newest = max(m.newest, newest)
	return true
}

// added says whether the metadata counted any row.
func (m *metaAgg) added() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rows > 0 || m.claims > 1
}

// adjust completes DuckDB's answer rec (one row, the columns of m.items)
// with what the metadata added up. It returns rec itself (retained) when
// the scan added nothing.
func (m *metaAgg) adjust(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims > 1 {
		return nil, fmt.Errorf("query: internal error: a count from metadata was read by %d scans", m.claims)
	}
	if m.rows == 0 {
		rec.Retain()
		return rec, nil
	}
	if int(rec.NumCols()) != len(m.items) || rec.NumRows() != 1 {
		return nil, fmt.Errorf("query: internal error: a count from metadata got %d columns and %d rows from DuckDB, want %d and 1", rec.NumCols(), rec.NumRows(), len(m.items))
	}
	cols := make([]arrow.Array, len(m.items))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, it := range m.items {
		col := rec.Column(i)
		switch it {
		case metaCount:
			c, ok := col.(*array.Int64)
			if !ok {
				return nil, fmt.Errorf("query: internal error: count(*) came back as %s", col.DataType())
			}
			b := array.NewInt64Builder(mem)
			b.Append(c.Value(0) + m.rows)
			cols[i] = b.NewArray()
			b.Release()
		case metaMin, metaMax:
			c, ok := col.(*array.Timestamp)
			if !ok || c.DataType().(*arrow.TimestampType).Unit != arrow.Nanosecond {
				return nil, fmt.Errorf("query: internal error: min/max(time) came back as %s", col.DataType())
			}
			v := m.oldest
			if it == metaMax {
				v = m.newest
			}
			if c.IsValid(0) {
				if it == metaMin {
					v = min(v, int64(c.Value(0)))
				} else {
					v = max(v, int64(c.Value(0)))
				}
			}
			b := array.NewTimestampBuilder(mem, c.DataType().(*arrow.TimestampType))
			b.Append(arrow.Timestamp(v))
			cols[i] = b.NewArray()
			b.Release()
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, 1), nil
}

// metaReader is the reader of a query served partly from metadata: it
// completes DuckDB's single row (adjust).
type metaReader struct {
	array.RecordReader
	m        *metaAgg
	mem      memory.Allocator
	cur      arrow.RecordBatch
	adjusted bool
	err      error
}

func (r *metaReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil {
		return false
	}
	if !r.RecordReader.Next() {
		if r.RecordReader.Err() == nil && !r.adjusted && r.m.added() {
			r.err = fmt.Errorf("query: internal error: DuckDB answered no row to a count served from metadata")
		}
		return false
	}
	rec := r.RecordReader.RecordBatch()
	if rec.NumRows() == 0 {
		rec.Retain()
		r.cur = rec
		return true
	}
	if r.adjusted {
		r.err = fmt.Errorf("query: internal error: DuckDB answered more than one row to a count served from metadata")
		return false
	}
	rec, err := r.m.adjust(rec, r.mem)
	if err != nil {
		r.err = err
		return false
	}
	r.adjusted = true
	r.cur = rec
	return true
}

func (r *metaReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *metaReader) Record() arrow.RecordBatch      { return r.cur }

func (r *metaReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.RecordReader.Err()
}

// withMeta wraps r, the reader of the query prepared on c, if its answer
// is completed from metadata.
func (e *Engine) withMeta(c *conn, r array.RecordReader) array.RecordReader {
	v, ok := e.qstate.Load(c.id)
	if !ok || v.(*queryState).meta == nil {
		return r
	}
	return &metaReader{RecordReader: r, m: v.(*queryState).meta, mem: e.wb.Allocator()}
}

func (r *metaReader) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.RecordReader.Release()
}
