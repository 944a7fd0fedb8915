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
// DuckDB never opens a file (see Sandbox): apron_scan reads persisted
// files in Go. A thread that takes a file gets it from the file cache
// (below), reads its footer and skips the row groups whose time
// statistics cannot match the query's bounds (persisted.go). Then, if
// every projected column of every row group left is of a type and an
// encoding Apron's writer produces (pqplan.go: PLAIN, PLAIN_DICTIONARY and
// RLE_DICTIONARY values, RLE levels, no repetition; decided from the
// metadata before anything is read, never half-way), the file is decoded
// natively, one row group at a time: the thread queues the file's other
// row groups for the scan's other threads (pqscan.go), and a thread that
// finds no file left to open waits for the row groups of the files others
// are still opening rather than end its part of the scan (DuckDB does not
// call it again: a table of one file was read on one core); when the query
// wants values of the group's first sort column, or bounds time, only
// the rows that can match are read, from the page that holds the first
// of them (pqrange.go: the lead column's run, the time column's page
// index, the offset index to seek each column, both indexes decoded once
// a row group and kept, pqindex.go: those pages, found through the
// offset index, are kept decompressed in the engine's page cache for the
// next query of the series, pqpages.go); and pages are
// decoded straight into DuckDB's vectors (pqcolumn.go): fixed-width
// values copied (narrowed, or scaled to another timestamp unit, where the
// declared type wants it), dictionaries of fixed-width values gathered,
// definition levels made the validity mask, RLE / bit-packed indices
// decoded by pqrle.go. Strings (pqstrings.go) become a DuckDB dictionary
// vector over the row group's dictionary, made once (and kept per thread
// for the next row groups and files, which repeat it), with the indices
// decoded into its selection; where the file's first sort column is a
// string (Apron sorts files by their string columns first), output is cut
// where its value changes, in runs of at least 256 rows each handed to
// DuckDB as one constant value: a GROUP BY on that column then hashes one
// value per run, not one per row (DuckDB skips hashing only for
// dictionaries of its own storage, which a table function cannot make).
// A page whose encoding contradicts the metadata, or that does not decode
// (an index outside the dictionary, values short), fails the query as a
// corrupt file.
//
// Any other file goes through arrow-go's pqarrow record reader, decoding
// only the projected columns, 8192 rows at a time, into record batches of
// the table's declared types that then go through the same path as
// buffered chunks (strings read as dictionaries; a timestamp's zone or
// unit re-typed or converted). Either way a column a file predates reads
// as NULL, and a query that needs no column reads only the row counts of
// the footer.
//
// # Direct scans
//
// A query that only returns columns of one table as they are (SELECT * or
// SELECT col, … FROM table: no GROUP BY, ORDER BY, LIMIT, DISTINCT,
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
// A WHERE made only of string equalities and comparisons of time with
// constants or now() ± whole intervals, over buffered rows only, is
// filtered by the direct scan itself (direct_where.go), exactly as DuckDB
// compares: the one-series query of a dashboard then never waits for a
// DuckDB worker thread, which was most of its tail latency.
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
// String equalities of that top-level AND (host = 'host-7': prune.go's
// tableRef.equals) narrow further: persisted row groups by their
// statistics, then to the run of their sort order that holds the values
// (pqrange.go); buffered chunks row by row, through their dictionary
// codes, so the scan hands DuckDB only the rows that can match
// (scan_select.go). A chunk's dictionary entries are searched for the
// values by their series ids (buffer.SeriesIDs), the partition's
// numbering of a column's values, when the chunk has them: integers
// compared where each chunk of a key of 100,000 values had 8,192
// strings to compare.
//
// # Counts from metadata
//
// SELECT count(*), min(time), max(time) (any of them, nothing else) over
// one table, with no WHERE clause or one made only of bounds on time, is
// run by DuckDB over the chunks and files that straddle a bound only:
// those whose every row matches for certain are added up from their row
// counts and [MinTime, MaxTime], and DuckDB's single row is completed
// with them (metacount.go). A count of a whole table reads no row.
//
// # The newest rows, the latest per key
//
// ORDER BY time DESC LIMIT n (any columns, bounds on time, string
// equalities) reads only the chunks and files newest first until they
// hold n certain rows (newest.go); so does SELECT max(time) with such a
// WHERE, as LIMIT 1 (when a series last reported). GROUP BY one string
// column with only
// max(time) and arg_max(col, time) and kin, and a WHERE of time bounds
// or none — the latest row per key, without a last-value cache — reads
// only the buffered chunks that hold a key value's latest row: the
// buffer hands over only the chunks of a partition that can (those not
// older than the least of its values' latest times), chunks
// newest first credit each key value of their rows with its latest
// time, and a chunk whose every key value already has a later row is
// left out (latest.go), and so is a persisted file whose key values,
// from its dictionary pages, all have later rows in the chunks
// (latest_files.go). With no WHERE or one of time bounds a direct scan
// evaluates, and no ORDER BY or one of the key or max(time), each key's
// row of the greatest time is picked from those chunks and the files
// left, sorted and cut if need be (latest_order.go), and streamed as a
// direct scan, without DuckDB (latest_direct.go). So is PostgreSQL's
// SELECT DISTINCT ON (key) … ORDER BY key, time DESC, and the key's
// values, SELECT DISTINCT key (latest_distinct.go), and how many there
// are, SELECT count(DISTINCT key) (latest_count.go). A file
// is read once for its latest row of each key value, kept since files
// never change (latest_file_rows.go), read ahead after a persist
// for the tables whose queries needed files (latest_file_warm.go), and
// after a restart for the files whose rows were kept (latest_file_hint.go).
// Chunks are checked by their series ids, against a bound per id of the
// partition's values (latest_series.go), when that costs less than
// looking up each chunk's dictionary by string. GROUP BY two to four
// string columns, or one with equalities of other string columns or a
// count(DISTINCT) of one, is
// pruned by their combinations (latest_multi.go), each combination's
// latest row picked as one key's are (latest_multi_direct.go) or DuckDB
// answering over what is kept; a sealed chunk's combinations are kept
// once found (latest_combos.go). When DuckDB answers (several keys,
// an ORDER BY of an aggregate), it is given each persisted file as its
// latest row of each key value or combination where those stand for
// the file (latest_file_swap.go, latest_multi_pick.go).
//
// # What repeats is not redone
//
// A Flight SQL query is prepared twice (GetFlightInfo, then DoGet), and
// dashboards send the same statements again and again. Parse trees are
// kept by statement text (json_serialize_sql, run through a statement
// prepared once per connection, costs more than the rest of admission),
// the result and parameter schemas of queries by text,
// database and catalog version (so a GetFlightInfo seen before takes no
// slot and prepares nothing on DuckDB), and each pooled connection keeps
// BEGIN TRANSACTION READ ONLY and ROLLBACK prepared (parsecache.go).
// Each pooled connection also keeps DuckDB's plans of the statements it
// ran, by text, database and catalog version, and runs one again instead
// of preparing it anew (plancache.go): a plan holds nothing of the query
// it was made for, as apron_scan's init looks the query's state (View,
// bounds, caller) up by connection. Admission's checks against the
// catalog and the caller's permissions run again on every use.
//
// # Last-value caches
//
// lastvalue.go: the engine fills a table's cache (buffer/lastvalue.go)
// with SELECT * … QUALIFY row_number() OVER (PARTITION BY keys ORDER BY
// time DESC) <= count over a View, on one goroutine of its own (stopped
// by Close). last_value('db.table') reads a ready cache: a table
// function admitted like a table of its database, bound only for
// admitted databases, sharing apron_scan's init and function. A
// statement whose answer depends only on the latest rows per key —
// decided on its parse tree: one SELECT over one table, GROUP BY a
// subset of the keys with only arg_max / max_by / arg_max_null(col,
// time) and max(time) (and the grouped keys, constants, ORDER BY and
// LIMIT of the groups), or ORDER BY time DESC LIMIT k with k at most the
// count; WHERE an AND of conditions on key columns and time > / >=
// constants — runs unchanged, its scan fed the cache's rows (filtered by
// the retention cutoff) instead of the table's, when the cache is ready
// and of the View's table, and, for arg_max / max_by (which skip NULLs),
// when no cached row has a NULL in the column they read. Anything else
// reads the table. Stats.LastValueUses counts the scans so fed.
//
// # Connections
//
// A query runs on a connection of its own, taken from a pool bounded by
// Config.MaxConcurrent; a query that finds no free connection waits up to
// Config.QueueTimeout and then fails with ErrTooManyQueries. A pooled
// connection keeps the current database of its last query (the search
// path unqualified names resolve in); a query takes an idle connection of
// its own database, or a new one while the pool holds fewer than can run
// at once, rather than one that must change database (SET search_path,
// parsed and run by DuckDB: about what the rest of a count(*) answered
// from metadata costs). Clients of different databases interleaved would
// otherwise switch the one idle connection at every query (slots.go,
// pickIdle; Stats.DatabaseSwitches counts the switches).
//
// # Sandbox
//
// Clients' SQL is hostile until checked. Two lines of defense, each
// enough on its own for what it covers:
//
// Admission (admit.go) decides by DuckDB's own parse, never by the text.
// json_serialize_sql serializes SELECT statements only (VALUES, FROM-first,
// TABLE, WITH, set operations, DESCRIBE / SUMMARIZE / SHOW of a table or a
// query, PIVOT / UNPIVOT in FROM): a statement is admitted if it is one
// of those, or EXPLAIN [ANALYZE] [(FORMAT f)] followed by one (the
// explained text must serialize as a SELECT on its own, and what runs is
// "EXPLAIN …" written by Apron followed by exactly that text). Its tree is
// then walked: every table it names must be an Apron table (or a CTE),
// every table function it calls must be on an allow-list (range,
// generate_series, unnest, repeat, repeat_row, json_each, json_tree: no
// file readers, no query / query_table, no apron_scan, no DuckDB catalog
// functions), and its expressions must be small enough to bind in about a
// second (DuckDB's binder cannot be interrupted: maxExpressionDepth,
// maxBindCost, maxSQLBytes). The databases it reads are known then
// (Statement.Databases). INSERT is Apron's own (insert.go): its target is
// read by a strict grammar, its source admitted as a query; DuckDB never
// runs an INSERT. Nor DDL (ddl.go): CREATE / DROP of a table or a schema
// is read whole by a strict grammar (an allow-list of forms; anything
// else is refused) and carried out on the catalog; only a column's type
// words (names, numbers, parentheses, commas: no literal, quote or
// operator) reach DuckDB, inside a prepared, never executed, SELECT
// CAST(NULL AS <type>) that resolves them. DELETE (delete.go) runs as a
// replace of the table by a query admitted like any other, whose
// condition DuckDB's parse shows to be one expression. Statement extraction (duckdb_extract_statements) is not
// used on clients' SQL: it runs pragmas, and IMPORT DATABASE reads files
// there.
//
// DuckDB itself refuses the rest (sandbox.go), whatever got past:
//   - no file access at all: enable_external_access is off with no allowed
//     directory or path and no temp directory (unless --query-temp-dir),
//     so no statement can read or write a file, list a directory, attach a
//     database or load an extension. Persisted files are read by
//     apron_scan in Go; DuckDB never opens one.
//   - the configuration is locked (lock_configuration) once the engine has
//     set it up: no SET or RESET but search_path and schema, which the
//     engine sets per query and DuckDB exempts; max_expression_depth among
//     the settings so fixed.
//   - every query runs in a read-only transaction (BEGIN TRANSACTION READ
//     ONLY, rolled back when its connection returns to the pool): the
//     views of Apron's tables, the system tables and now() cannot be
//     dropped or replaced; apron_scan is an internal catalog entry DuckDB
//     does not drop.
//   - apron_scan binds only tables of the databases the statement was
//     admitted with (queryState.databases): a table reached any other way
//     (a function that runs SQL of its own, apron_scan called directly)
//     fails to bind.
//
// admit_test.go keeps a statement of every DuckDB statement type, each in
// every wrapping found to matter, and checks that each is refused and
// that nothing changed (files, settings, catalog, rows); it also runs
// them on a query's connection without admission, where DuckDB refuses
// them. Every bypass found becomes a case.
package query
