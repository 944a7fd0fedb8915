//go:build duckdb_arrow

package query

import "github.com/apache/arrow-go/v18/arrow"

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
