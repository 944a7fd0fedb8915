//go:build duckdb_arrow

package query

import duckdb "github.com/duckdb/duckdb-go-bindings"

// DuckDBVersion is the version of the DuckDB library linked in, e.g.
// v1.5.6.
func DuckDBVersion() string { return duckdb.LibraryVersion() }
