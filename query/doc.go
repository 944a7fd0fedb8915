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
// # What a query reads: one View
//
// A table is the union of its buffered segments and its persisted
// Parquet files. When a query is prepared, the engine takes one
// buffer.View (per-connection query state, next to the time bounds): the
// segments in memory and the persisted segments not in memory, split at
// one instant, so that a segment being persisted (in memory and in the
// store at once) is read once, from memory. Every scan of the query (a
// self-join reads a table twice, each its own instance of apron_scan)
// reads that View: buffered chunks with Segment.Snapshot, persisted files
// of its table. The View is released when the query's connection goes
// back to the pool, on every path (end, error, cancellation, a Prepare
// that never runs), so dropped segments leave memory once no query holds
// them.
//
// A scan's init takes the View's buffered chunks of its table (retained;
// released when DuckDB destroys the scan's state, also when the query is
// cancelled) and the list of its persisted files. Threads take chunks and
// files one at a time; each call of the function hands DuckDB at most
// 2048 rows of one chunk: the chunk is sliced, converted with
// duckdb_data_chunk_from_arrow (which references the Arrow buffers rather
// than copying fixed-width values) and its vectors are referenced into the
// output. Columns a chunk predates read as NULL. Projection pushdown means
// only the columns a query uses are converted.
//
// # Persisted files
//
// A thread that takes a file gets it from the file cache (below), opens it
// with arrow-go's parquet reader, skips the row groups whose time
// statistics cannot match the query's bounds, and decodes only the
// projected columns (pqarrow record reader), 8192 rows at a time, into
// record batches of the table's declared types, which then go through the
// same path as buffered chunks. Strings are read as dictionaries (the
// files store them dictionary-encoded: the indices are taken over), which
// is how the scan declares them; a column a file predates reads as NULL;
// other type differences Parquet introduces (a timestamp's zone) are
// re-typed or cast. A query that needs no column (count(*)) reads only the
// row counts of the footer.
//
// Reading with DuckDB's read_parquet (native.go). Each table's view is
// in fact
//
//	SELECT * FROM apron_scan('db', 'table', ncols)
//	UNION ALL SELECT * FROM temp.main.apron_files_<id>()
//
// where apron_files_<id> is a TEMP table macro, private to each
// connection. Before a query is bound, on its connection, the macro of
// each table the statement names (as the time-bounds parser finds them)
// is set from the query's View: a read_parquet over the table's files
// that can match the query's bounds (file [MinTime, MaxTime] and row-group
// statistics read from the footer), fetched into the cache and pinned
// until the query ends, each column cast to the view's type (NULL for the
// columns a file predates; one read_parquet per set of columns). Every
// other macro is an empty SELECT of the view's types. apron_scan skips the
// persisted files of exactly the tables whose macro reads them
// (queryState.native), so each row is read once; when the statement is not
// understood (a table function in FROM, a name the parser does not
// resolve, a path DuckDB may not read) the scan reads the files as above.
// DuckDB may read only the cache directory and a local store's directory
// (allowed_directories, set before enable_external_access is turned off
// at Open). Views and macros are kept consistent by a lock held from
// setting the macros until the statement is bound.
//
// # Direct scans
//
// A query that only returns columns of one table as they are (SELECT * or
// SELECT col, … FROM table: no WHERE, GROUP BY, ORDER BY, LIMIT, DISTINCT,
// join, CTE or parameter; direct.go) is parsed, bound and typed by DuckDB
// as any other, so its errors and result schema are DuckDB's, but it is
// not executed there: its rows are streamed from the View's chunks and
// persisted files, the buffer's chunks one by one with their fixed-width
// columns not copied, dictionary strings decoded into batches allocated
// from a Recycler (freed once sent, and reused). DuckDB would add nothing
// to such a query but a conversion of every value to its vectors and back
// to Arrow, on one thread. It holds its connection until it ends, so it
// counts against --max-concurrent-queries and shows in system.queries;
// Stats.DirectScans counts them.
//
// # File cache
//
// Files are fetched whole from the object store with Get into a temporary
// file in Config.CacheDir, checked against the size and CRC32C the segment
// file lists, and renamed into place under their object name. Concurrent
// fetches of one file are one fetch. Config.CacheSize bounds the bytes
// kept; the least recently used file goes first, and a file a running scan
// has open is never evicted (it may hold the cache over its size for that
// long). Files left by an earlier run are adopted at Open (their size is
// checked when used). Objects of a local store (file:// URIs) are read in
// place, not copied.
//
// # Time pruning
//
// DuckDB's C API has no filter pushdown for table functions, so before a
// query runs, its statement is parsed with json_serialize_sql and simple
// bounds on "time" (comparisons and BETWEEN against constants, in the
// top-level AND of the WHERE clause of a SELECT over exactly one table) are
// found for each table. They are handed to that query's scans through
// per-connection state, and a scan skips chunks and persisted files whose
// [MinTime, MaxTime] lies outside them (such files are neither fetched nor
// read), and row groups whose time statistics do. Engine.Stats counts
// what was read and what was skipped. DuckDB still applies the WHERE clause to the rows
// that remain, so pruning only has to be conservative, never exact.
//
// # Connections
//
// A query runs on a connection of its own, taken from a pool bounded by
// Config.MaxConcurrent; a query that finds no free connection waits up to
// Config.QueueTimeout and then fails with ErrTooManyQueries.
package query
