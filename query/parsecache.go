//go:build duckdb_arrow

package query

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/apache/arrow-go/v18/arrow"
)

// The engine keeps caches of what repeats from one run of a statement
// to the next (a dashboard's query every few seconds; every Flight SQL
// query twice, at GetFlightInfo and again at DoGet):
//
// parseCache holds parse trees by statement text. A parse depends on the
// text alone (json_serialize_sql resolves no name), so what admission then
// checks against the catalog and the caller's permissions is checked
// again on every use, on the cached tree. Trees are shared between
// goroutines and never modified: every reader of a tree (admission,
// pruning, column metadata, direct scans, DELETE) only reads it. Errors
// of the parse (not a SELECT; a syntax error) are kept too: they are as
// deterministic as trees. The cost of an entry is the size of its
// serialized tree, a fair measure of its memory.
//
// shapeCache holds the result and parameter schemas of queries by
// statement text, current database and catalog version: Prepare (Flight
// SQL GetFlightInfo, CreatePreparedStatement) of a query seen before at
// this catalog version is admitted again but not prepared on DuckDB. The
// schemas depend on nothing else: the views' columns change only with the
// catalog's version, and DuckDB's settings are locked.
//
// The values of constant time bounds (literals and casts, not now() and
// kin) are kept by their serialized expression (evalTimes).
//
// They are caches, not limits: a client that sends many distinct
// statements only pushes out older entries, at the cost of parsing them
// again; nothing is refused.
type (
	parseCache = lru[string, *parsed]
	shapeCache = lru[shapeKey, *shape]
)

type parsed struct {
	tree map[string]any
	err  error
}

type shapeKey struct {
	sql, database string
	version       uint64
}

type shape struct {
	schema, params *arrow.Schema
	untypedResult  bool
}

const (
	// defaultParseCacheBytes bounds the parse cache: 16 MiB of serialized
	// trees, a few hundred dashboard queries, ~50-80 MiB of heap at most.
	defaultParseCacheBytes = 16 << 20
	// defaultShapeCacheEntries bounds the shape cache (each costs 1).
	defaultShapeCacheEntries = 4096
	// defaultBoundValueBytes bounds the values of constant time bounds
	// kept (by the size of their serialized expressions).
	defaultBoundValueBytes = 1 << 20
)

// whereFreeShape is the key of a query's shape with its top-level WHERE
// clause left out: a WHERE filters rows and cannot change the columns or
// their types, so `… WHERE host = 'a'` and `… WHERE host = 'b'` share a
// shape. Dashboards and clients that prepare every statement (ADBC's
// Python DB-API, JDBC) send the same query with other constants; without
// this each one was planned by DuckDB twice, at prepare and at execute.
// It is "" for what it does not cover: several statements, anything but
// a plain SELECT, parameters (the WHERE decides their schema), EXPLAIN.
// A WHERE that DuckDB would refuse then fails at execute, not at prepare,
// with the same error.
func whereFreeShape(a *admitted) string {
	if a.explain {
		return ""
	}
	stmts, _ := a.tree["statements"].([]any)
	if len(stmts) != 1 {
		return ""
	}
	st, _ := stmts[0].(map[string]any)
	if params, _ := st["named_param_map"].([]any); len(params) > 0 {
		return ""
	}
	node, _ := st["node"].(map[string]any)
	if node["type"] != "SELECT_NODE" || node["where_clause"] == nil {
		return ""
	}
	where, err := json.Marshal(node["where_clause"])
	if err != nil || bytes.Contains(where, []byte(`"PARAMETER"`)) {
		return ""
	}
	n := maps.Clone(node)
	n["where_clause"] = nil
	s := maps.Clone(st)
	s["node"] = n
	key, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return "where-free\x00" + string(key)
}
