//go:build duckdb_arrow

package query

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A filtered direct scan (direct_where.go) of a text not seen before is
// not prepared on DuckDB when one of the same shape was: the same select
// list and FROM, over the same catalog version and current database,
// differing only in its WHERE clause. A dashboard asks for each host with
// its own text (host = 'host-7', host = 'host-8', …), and preparing each
// (parse, bind, plan) was 0.9 ms of a 2.2 ms query (p50, one host of 200
// over the last 10 minutes): more than the rows cost.
//
// The result schema, what the Prepare gave, depends only on the shape:
// the columns' names come from the select list, their types from the
// table. What the WHERE clause could make DuckDB refuse is refused here
// as well, or left to DuckDB: directWhereOf admits only columns of the
// table that are strings, and interval (direct_where.go) only bounds whose
// exact value is known; anything else (a bound that does not parse as a
// time, of another type, NULL) makes the query go through DuckDB's
// Prepare, which says what is wrong. Admission (permissions, the
// sandbox) ran on the text itself, before.

// defaultDirectShapeEntries bounds the shapes kept (each a schema of a
// few fields and its key).
const defaultDirectShapeEntries = 4096

// directShapeKey names a filtered direct scan's shape.
type directShapeKey struct {
	shape    string // the select list and FROM, serialized without positions
	database string // current when it was prepared
	catalog  uint64 // the catalog version it was prepared at
}

// directShapeOf serializes what of a SELECT node decides a direct scan's
// result schema: its select list and its FROM clause.
func directShapeOf(node map[string]any) string {
	k, _ := treeKey([]any{node["select_list"], node["from_table"]})
	return k
}

// keepShape keeps the result schema DuckDB gave a filtered direct scan
// prepared on c, for the next one of its shape.
func (e *Engine) keepShape(c *conn, qs *queryState, schema *arrow.Schema) {
	if k, ok := shapeKeyOf(c, qs); ok {
		e.directShapes.put(k, schema, 1)
	}
}

// shapeKeyOf is the shape key of the filtered direct scan readied on c
// with qs; false: the query is not one.
func shapeKeyOf(c *conn, qs *queryState) (directShapeKey, bool) {
	d := qs.direct
	if d == nil || d.where == nil || d.shape == "" || qs.view == nil {
		return directShapeKey{}, false
	}
	return directShapeKey{shape: d.shape, database: c.schema, catalog: qs.view.Catalog().Version()}, true
}

// directUnprepared streams the admitted statement a, readied on c with
// the query state qs, as a filtered direct scan without preparing it, if
// one of its shape was prepared before; nil: it must be prepared.
func (e *Engine) directUnprepared(ctx context.Context, c *conn, a *admitted, qs *queryState) array.RecordReader {
	k, ok := shapeKeyOf(c, qs)
	if a.explain || !ok {
		return nil
	}
	schema, ok := e.directShapes.get(k)
	if !ok || !qs.direct.fits(schema) {
		return nil
	}
	r := e.directRead(ctx, c, qs.direct, schema, nil)
	if r != nil {
		e.directUnprep.Add(1)
	}
	return r
}
