//go:build duckdb_arrow

package query

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// How many series: SELECT count(DISTINCT key) FROM t [WHERE …], what a
// dashboard's "hosts reporting" shows. The key values counted are those
// of the latest rows per key (latest.go), NULL not counted: pruned and
// picked as those when the WHERE is bounds on time and values of the key,
// or none, and the number of the picked rows' non-NULL keys is the
// answer; DuckDB counted every row's (53 ms for the peer benchmark's 5M
// rows). With a WHERE only the pruning understands, DuckDB counts the
// rows pruning keeps: every key value left out has a later row kept.

// latestCountOf recognizes SELECT count(DISTINCT key) FROM … in node
// (nothing else in the list, no modifiers) into p; nil: not that form.
func latestCountOf(node map[string]any, t *catalog.Table, sh *shapeCheck, p *latestPrune, eq map[string][]string) *latestPrune {
	if mods, _ := node["modifiers"].([]any); len(mods) > 0 {
		return nil
	}
	list, _ := node["select_list"].([]any)
	if len(list) != 1 {
		return nil
	}
	m, _ := list[0].(map[string]any)
	arg, ok := countDistinctArg(m)
	if !ok {
		return nil
	}
	i, ok, direct := p.keyAndWhere(node, sh, t, arg, eq)
	switch {
	case !ok:
		return nil
	case direct:
		p.project, p.table, p.countKeys = []int{i}, t, true
	}
	return p
}

// countDistinctArg is the argument of m when m is count(DISTINCT arg),
// of no FILTER, ORDER BY or schema.
func countDistinctArg(m map[string]any) (any, bool) {
	if m == nil || m["class"] != "FUNCTION" || m["distinct"] != true || m["filter"] != nil || m["export_state"] != false {
		return nil, false
	}
	if s, _ := m["schema"].(string); s != "" {
		return nil, false
	}
	if ob, _ := m["order_bys"].(map[string]any); ob != nil {
		if o, _ := ob["orders"].([]any); len(o) > 0 {
			return nil, false
		}
	}
	if name, _ := m["function_name"].(string); !strings.EqualFold(name, "count") {
		return nil, false
	}
	children, _ := m["children"].([]any)
	if len(children) != 1 {
		return nil, false
	}
	return children[0], true
}

// countKeys releases chunks, the latest rows per key, and returns the
// answer of schema (one int64 column): how many of them have a key (col)
// that is not NULL.
func countKeys(chunks []buffer.Chunk, col string, schema *arrow.Schema, mem memory.Allocator) arrow.RecordBatch {
	var n int64
	for _, c := range chunks {
		rows := c.Rec.NumRows()
		if ix := c.Rec.Schema().FieldIndices(col); len(ix) > 0 {
			n += rows - int64(c.Rec.Column(ix[0]).NullN())
		}
		c.Rec.Release()
	}
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Append(n)
	a := b.NewArray()
	defer a.Release()
	return array.NewRecordBatch(schema, []arrow.Array{a}, 1)
}
