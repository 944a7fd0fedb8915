// Package buffer is Apron's write path: it validates writes against the
// catalog, makes them durable in the WAL (package wal), buffers their rows
// in memory in segments of per-table, per-day Arrow chunks, and persists
// closed segments to an object store (package objstore) as Parquet.
//
// # Segments
//
// The open segment takes writes; it rolls over after SegmentDuration or at
// half of MemLimit. A closed segment is sealed once the writes still in
// flight into it are buffered, and from then on never changes. Each segment
// has one WAL file, <data-dir>/wal/<id %020d>.wal.
//
// # Object layout
//
// With Config.Store set, closed segments are persisted, in id order, to
// these objects (names are deterministic, so a retried persist finds its
// own earlier uploads):
//
//	catalogs/<version %020d>.json
//	    the catalog file (catalog/doc.go) of that version, byte for byte
//	dbs/<db>/<table>/<YYYY-MM-DD>/<segment %020d>.parquet
//	    one table's rows of one UTC day written during one segment
//	segments/<segment %020d>.json
//	    the segment file: the commit point of a segment's persist
//
// Table names are path-escaped (url.PathEscape: "/" is %2F) and a leading
// "." becomes %2E; database names need no escaping.
//
// # Parquet files
//
// Written by arrow-go's pqarrow: Parquet format 2.6, data pages v1, zstd,
// statistics on every column, dictionary encoding (but for time), row
// groups of at most 1Mi rows and about 128 MiB of Arrow data. Columns are
// the table's columns at persist time, in catalog order, so a file may have
// columns null throughout. time is INT64 TIMESTAMP(isAdjustedToUTC=false,
// NANOS) (DuckDB: TIMESTAMP_NS; pyarrow: timestamp[ns]); strings are
// BYTE_ARRAY UTF8; other types map as pqarrow maps them. No Arrow schema is
// stored in the file. Rows are sorted by the string columns in column order
// (nulls last), then time, then buffer order; the file's metadata declares
// this in each row group's sorting_columns. Nothing time-dependent goes
// into a file: the same buffered rows give the same bytes.
//
// # Segment file
//
// JSON (format_version 1; unknown fields or another version are refused):
//
//	{
//	  "format_version": 1,
//	  "segment_id": 12,
//	  "catalog_version": 7,        // catalogs/<this>.json describes every file
//	  "first_sequence": 1001,      // WAL sequence numbers of the segment
//	  "last_sequence": 1450,
//	  "rows": 123456,
//	  "files": [                   // sorted by path
//	    {"path": "dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet",
//	     "size": 1048576, "crc32c": 1234567, "rows": 100000,
//	     "min_time": 1764410400000000000, "max_time": 1764413999000000000,  // ns, inclusive
//	     "database": "metrics", "table": "cpu", "partition": "2026-11-29"}
//	  ]
//	}
//
// # Persist protocol
//
// For each closed segment, oldest first, by one background goroutine:
//
//  1. the catalog, if its version is newer than the newest in the store;
//  2. every table and day of the segment as Parquet, PersistConcurrency
//     files at once: written to <data-dir>/persist/ (the CRC32C computed on
//     the way), then uploaded with that CRC32C;
//  3. the segment file;
//  4. then, and only then, the segment's WAL file is deleted and the WAL
//     directory fsynced.
//
// Every upload uses PutOptions.MustNotExist. On ErrExists the object's size
// and CRC32C are compared with ours: equal means an earlier attempt landed
// (a crash, or a success reported as a failure) and the step is done. For a
// catalog or segment file, unequal is an error (another writer?). For a
// Parquet file, unequal means an orphan of an earlier attempt (the rows may
// differ, e.g. columns added since), which no segment file lists, since the
// segment file comes last: it is replaced.
//
// Each step is retried on any error with exponential backoff (from
// PersistRetryMin to PersistRetryMax, equal jitter), forever, logging every
// failure with its attempt count; Close stops it. Writes to the open segment
// never wait for persistence. While persistence fails, closed segments stay
// in memory, until MemLimit refuses writes with ErrBufferFull, whose message
// carries the last persist error.
//
// # Startup
//
// Before the WAL is replayed: the newest catalogs/ object is installed as
// the local catalog file if it is newer than the local one (or that one is
// missing); segments/ is read; the WAL files of persisted segments (a crash
// between steps 3 and 4) are deleted; Parquet objects that no segment file
// lists (a crash before step 3) are deleted; leftovers in
// <data-dir>/persist/ are removed. Then the remaining WAL files are
// replayed: their segments are persisted again. Persisted segments are not
// loaded into memory, and new segment ids are above theirs.
//
// # Reading
//
// A query takes a View: the buffered segments (open and closed) and the
// persisted segments not among them, at one instant, so every row is in
// exactly one of the two. With Config.ReleasePersisted, a persisted segment
// leaves the buffer (and View.Buffered) once its segment file is durable;
// its memory is freed once the last View holding it is released.
package buffer
