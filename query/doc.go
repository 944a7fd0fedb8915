// Package query is Apron's SQL engine: it runs DuckDB queries over the rows
// held in the write buffer, without copying the buffer into DuckDB.
//
// # Build
//
// The package links DuckDB statically through
// github.com/duckdb/duckdb-go-bindings (CGO_ENABLED=1 and a C/C++ toolchain)
// and uses the bindings' Arrow functions, which exist only with the build
// tag duckdb_arrow. Every file but this one carries that tag, so without it
// the package is empty:
//
//	go test -tags duckdb_arrow -race ./query/
//	go build -tags duckdb_arrow ./cmd/apron
//
// # How a table is read
//
// One in-memory DuckDB database holds no data. Each Apron database is a
// DuckDB schema, each table a view
//
//	CREATE VIEW "db"."table" AS SELECT * FROM apron_scan('db', 'table', ncols)
//
// over the table function apron_scan, registered from Go. ncols is the
// number of the table's columns when the view was made: columns are only
// ever appended, so the view's columns stay exactly the first ncols of the
// table even while writers add more. Views are (re)made before a query
// whenever the catalog's version has changed since the last sync.
//
// Every scan of a table in a query (a self-join reads it twice) is its own
// instance of apron_scan: its init takes a snapshot of the table's buffered
// chunks (retained; released when DuckDB destroys the scan's state, also
// when the query is cancelled), and each call of its function hands DuckDB
// at most 2048 rows of one chunk: the chunk is sliced, converted with
// duckdb_data_chunk_from_arrow (which references the Arrow buffers rather
// than copying fixed-width values) and its vectors are referenced into the
// output. Columns a chunk predates read as NULL. Projection pushdown means
// only the columns a query uses are converted.
//
// # Time pruning
//
// DuckDB's C API has no filter pushdown for table functions, so before a
// query runs, its statement is parsed with json_serialize_sql and simple
// bounds on "time" (comparisons and BETWEEN against constants, in the
// top-level AND of the WHERE clause of a SELECT over exactly one table) are
// found for each table. They are handed to that query's scans through
// per-connection state, and a scan skips chunks whose [MinTime, MaxTime]
// lies outside them. DuckDB still applies the WHERE clause to the rows
// that remain, so pruning only has to be conservative, never exact.
//
// # Connections
//
// A query runs on a connection of its own, taken from a pool bounded by
// Config.MaxConcurrent; a query that finds no free connection waits up to
// Config.QueueTimeout and then fails with ErrTooManyQueries.
package query
