//go:build duckdb_arrow

package query

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// ORDER BY and LIMIT of the latest rows picked in Go (latest_direct.go).
//
// A dashboard's table of the latest value per host sorts it by host, or
// by how recently each reported: ORDER BY the key column, or by
// max(time) (its output name or position), ASC or DESC, NULLS FIRST or
// LAST (DuckDB's default: ASC, NULLS LAST), then LIMIT and OFFSET of
// constants. The rows are few (one a key value): they are sorted here,
// strings by their bytes as DuckDB's default collation compares them,
// and cut. Any other ORDER BY (another column, an expression) is left
// to DuckDB.

// latestOrder is one ORDER BY item: by the key (else by time), DESC,
// NULLS FIRST.
type latestOrder struct {
	byKey, desc, nullsFirst bool
}

// latestCut is the ORDER BY and LIMIT of a latest-row query.
type latestCut struct {
	order         []latestOrder
	limit, offset int64 // limit -1: none
}

// latestCutOf reads the modifiers of a latest-row query whose outputs
// are of the table columns project (list its select list, key its key
// column); false: one DuckDB must apply.
func latestCutOf(mods []any, sh *shapeCheck, list []any, project []int, t *catalog.Table, key string) (*latestCut, bool) {
	c := &latestCut{limit: -1}
	for i, x := range mods {
		m, _ := x.(map[string]any)
		switch {
		case m == nil:
			return nil, false
		case m["type"] == "ORDER_MODIFIER" && i == 0:
			orders, _ := m["orders"].([]any)
			for _, o := range orders {
				lo, ok := latestOrderOf(o, sh, list, project, t, key)
				if !ok {
					return nil, false
				}
				c.order = append(c.order, lo)
			}
		case m["type"] == "LIMIT_MODIFIER" && i == len(mods)-1:
			if !c.limitOf(m) {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return c, true
}

// limitOf reads a LIMIT modifier's limit and offset, constants or
// none, into c.
func (c *latestCut) limitOf(m map[string]any) bool {
	var ok bool
	if c.limit, ok = constantCount(m["limit"]); !ok {
		return false
	}
	if c.offset, ok = constantCount(m["offset"]); !ok {
		return false
	}
	c.offset = max(c.offset, 0)
	return true
}

// latestOrderOf reads one ORDER BY item: an output (by its alias, or
// its position) that is the key or the time, or the key column itself.
func latestOrderOf(o any, sh *shapeCheck, list []any, project []int, t *catalog.Table, key string) (latestOrder, bool) {
	om, _ := o.(map[string]any)
	if om == nil {
		return latestOrder{}, false
	}
	lo, ok := orderDirection(om)
	if !ok {
		return latestOrder{}, false
	}
	e, _ := om["expression"].(map[string]any)
	out := -1
	switch e["class"] {
	case "CONSTANT":
		k, ok := constantCount(e)
		if !ok || k < 1 || k > int64(len(project)) {
			return latestOrder{}, false
		}
		out = int(k - 1)
	case "COLUMN_REF":
		names, _ := e["column_names"].([]any)
		if len(names) == 0 {
			return latestOrder{}, false
		}
		n, _ := names[0].(string)
		if len(names) == 1 {
			// An output's alias first, as DuckDB binds ORDER BY.
			for i, x := range list {
				m, _ := x.(map[string]any)
				if a, _ := m["alias"].(string); a != "" && strings.EqualFold(a, n) {
					if out >= 0 {
						return latestOrder{}, false // two outputs of that name
					}
					out = i
				}
			}
		}
		if out < 0 {
			// The key column itself (GROUP BY's).
			name, ok := sh.colRef(e)
			if col, found := findColumn(t, name); !ok || !found || col != key {
				return latestOrder{}, false
			}
			lo.byKey = true
			return lo, true
		}
	default:
		return latestOrder{}, false
	}
	switch col := t.Columns[project[out]].Name; col {
	case key:
		lo.byKey = true
	case buffer.TimeColumn:
	default:
		return latestOrder{}, false
	}
	return lo, true
}

// orderDirection is an ORDER BY item's direction and NULLs' place.
func orderDirection(om map[string]any) (latestOrder, bool) {
	var lo latestOrder
	switch om["type"] {
	case "ASCENDING", "ORDER_DEFAULT":
	case "DESCENDING":
		lo.desc = true
	default:
		return latestOrder{}, false
	}
	switch om["null_order"] {
	case "NULLS LAST", "ORDER_DEFAULT":
	case "NULLS FIRST":
		lo.nullsFirst = true
	default:
		return latestOrder{}, false
	}
	return lo, true
}

// constantCount is the value of a constant integer ≥ 0 (-1 for none: e
// nil); false for anything else.
func constantCount(e any) (int64, bool) {
	if e == nil {
		return -1, true
	}
	m, _ := e.(map[string]any)
	if m == nil || m["class"] != "CONSTANT" {
		return 0, false
	}
	v, _ := m["value"].(map[string]any)
	if v == nil || v["is_null"] != false {
		return 0, false
	}
	ty, _ := v["type"].(map[string]any)
	switch ty["id"] {
	case "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT":
	default:
		return 0, false
	}
	num, ok := v["value"].(json.Number)
	if !ok {
		return 0, false
	}
	k, err := num.Int64()
	return k, err == nil && k >= 0
}

// apply sorts the rows of chunks (the picked rows, a key value each),
// keeps those of the LIMIT and OFFSET, and returns them as slices of
// chunks in that order; chunks are released.
func (c *latestCut) apply(chunks []buffer.Chunk, key string) []buffer.Chunk {
	type row struct {
		chunk, row int
		key        string
		null       bool
		time       int64
	}
	var rows []row
	for ci, ch := range chunks {
		k, _ := latestKeyOf(ch.Rec, key)
		ts, _ := timeColumn(ch.Rec)
		for r := range int(ch.Rec.NumRows()) {
			x := row{chunk: ci, row: r, null: k.arr == nil || k.arr.IsNull(r), time: int64(ts.Value(r))}
			if !x.null {
				x.key = k.dict.Value(int(k.idx[r]))
			}
			rows = append(rows, x)
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		for _, o := range c.order {
			var d int
			if o.byKey {
				switch {
				case a.null && b.null:
				case a.null != b.null:
					if a.null == o.nullsFirst {
						return -1
					}
					return 1
				default:
					d = strings.Compare(a.key, b.key)
				}
			} else {
				d = cmp.Compare(a.time, b.time)
			}
			if o.desc {
				d = -d
			}
			if d != 0 {
				return d
			}
		}
		return 0
	})
	// Both are at most MaxInt64: compared with the rows left, never
	// added (LIMIT 9223372036854775807 OFFSET 1 would overflow).
	rows = rows[min(c.offset, int64(len(rows))):]
	if c.limit >= 0 && c.limit < int64(len(rows)) {
		rows = rows[:c.limit]
	}
	var out []buffer.Chunk
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].chunk == rows[i].chunk && rows[j].row == rows[j-1].row+1 {
			j++
		}
		ch := chunks[rows[i].chunk]
		s := ch.Rec.NewSlice(int64(rows[i].row), int64(rows[j-1].row+1))
		span := timeBounds{rows[i].time, rows[i].time}
		for _, r := range rows[i:j] {
			span.min, span.max = min(span.min, r.time), max(span.max, r.time)
		}
		out = append(out, buffer.Chunk{Rec: s, MinTime: span.min, MaxTime: span.max})
		i = j
	}
	for _, ch := range chunks {
		ch.Rec.Release()
	}
	return out
}
