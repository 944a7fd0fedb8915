//go:build duckdb_arrow

package query

import (
	"strings"

	"github.com/apron-db/apron/catalog"
)

// The latest row per key in PostgreSQL's idiom:
//
//	SELECT DISTINCT ON (host) * FROM cpu ORDER BY host, time DESC [LIMIT n]
//
// keeps, for each value of host, its first row in the order of host then
// time descending: the row of the greatest time, whole, NULLs included
// (no arg_max skips them). Its answer depends only on each value's
// latest row, as the GROUP BY form's (latest.go): it is pruned the same
// way and, when the select list is * or columns of the table and the
// WHERE bounds on time and equalities of the key, or none, picked
// without DuckDB (latest_direct.go), in the key's order
// (latest_order.go).
//
// So is SELECT DISTINCT key FROM … (latestValuesOf): the values of key
// are those of its latest rows.

// latestDistinctOf recognizes the DISTINCT ON form of node (a SELECT of
// table t), or the plain DISTINCT of the key, into p; nil: neither.
func latestDistinctOf(node map[string]any, t *catalog.Table, sh *shapeCheck, p *latestPrune, eq map[string][]string) *latestPrune {
	mods, _ := node["modifiers"].([]any)
	if len(mods) == 0 || len(mods) > 3 {
		return nil
	}
	dm, _ := mods[0].(map[string]any)
	if dm == nil || dm["type"] != "DISTINCT_MODIFIER" {
		return nil
	}
	targets, _ := dm["distinct_on_targets"].([]any)
	if len(targets) == 0 {
		return latestValuesOf(node, t, sh, p, eq, mods[1:])
	}
	if len(mods) < 2 {
		return nil
	}
	om, _ := mods[1].(map[string]any)
	if om == nil || om["type"] != "ORDER_MODIFIER" {
		return nil
	}
	orders, _ := om["orders"].([]any)
	if len(targets) != 1 || len(orders) != 2 {
		return nil
	}
	g, ok := p.keyOf(sh, t, targets[0], eq)
	if !ok {
		return nil
	}
	// ORDER BY the key (either way), then time DESC.
	first, _ := orders[0].(map[string]any)
	second, _ := orders[1].(map[string]any)
	if first == nil || second == nil || second["type"] != "DESCENDING" || !sh.isTime(second["expression"]) {
		return nil
	}
	if n, ok := sh.colRef(first["expression"]); !ok || n != g {
		return nil
	}
	lo, ok := orderDirection(first)
	if !ok {
		return nil
	}
	lo.byKey = true
	cut := &latestCut{order: []latestOrder{lo}, limit: -1}
	if len(mods) == 3 {
		lm, _ := mods[2].(map[string]any)
		if lm == nil || lm["type"] != "LIMIT_MODIFIER" || !cut.limitOf(lm) {
			return nil
		}
	}
	// The select list: * or columns of the table, each the latest row's.
	// Nothing else, not even to prune: an expression may read every row
	// (count(*) OVER () is computed before DISTINCT ON keeps one).
	list, _ := node["select_list"].([]any)
	var project []int
	for _, x := range list {
		m, _ := x.(map[string]any)
		switch {
		case m == nil:
			return nil
		case m["class"] == "STAR":
			rel, _ := m["relation_name"].(string)
			if !rowwiseStar(m) || !empty(m["exclude_list"]) || rel != "" && !strings.EqualFold(rel, sh.alias) && !(sh.alias == "" && strings.EqualFold(rel, sh.table)) {
				return nil
			}
			for i := range t.Columns {
				project = append(project, i)
			}
		case m["class"] == "COLUMN_REF":
			n, ok := sh.colRef(m)
			if !ok {
				return nil
			}
			i, ok := columnIndex(t, n)
			if !ok {
				return nil
			}
			project = append(project, i)
		default:
			return nil
		}
	}
	if w := node["where_clause"]; w != nil {
		if !p.whereOf(w, t, sh) {
			return p
		}
	}
	p.project, p.table, p.cut = project, t, cut
	return p
}

// keyAndWhere takes e as p's key (keyOf) and node's WHERE (whereOf), and
// returns the key's column of t. ok false: e is no key p can have; direct
// false: p prunes, and DuckDB answers over what it keeps.
func (p *latestPrune) keyAndWhere(node map[string]any, sh *shapeCheck, t *catalog.Table, e any, eq map[string][]string) (col int, ok, direct bool) {
	g, ok := p.keyOf(sh, t, e, eq)
	if !ok {
		return 0, false, false
	}
	if w := node["where_clause"]; w != nil && !p.whereOf(w, t, sh) {
		return 0, true, false
	}
	col, direct = columnIndex(t, g)
	return col, true, direct
}

// latestValuesOf recognizes SELECT DISTINCT key FROM t [WHERE …]
// [ORDER BY key] [LIMIT n] (rest: the modifiers after DISTINCT), the
// values of a tag a dashboard lists in its drop-down: the key values of
// the latest rows per key, NULL included as DISTINCT keeps it, pruned
// and picked as those (one output column, the key; nothing to hold for
// arg_max). nil: not that form.
func latestValuesOf(node map[string]any, t *catalog.Table, sh *shapeCheck, p *latestPrune, eq map[string][]string, rest []any) *latestPrune {
	list, _ := node["select_list"].([]any)
	if len(list) != 1 {
		return nil
	}
	i, ok, direct := p.keyAndWhere(node, sh, t, list[0], eq)
	if !ok {
		return nil
	}
	if !direct {
		return p
	}
	project := []int{i}
	var cut *latestCut
	if len(rest) > 0 {
		if cut, ok = latestCutOf(rest, sh, list, project, t, p.col); !ok {
			return p
		}
	}
	p.project, p.table, p.cut = project, t, cut
	return p
}
