// Package persist is Apron's persisted data: the objects that closed
// segments become in an object store (package objstore), how they are
// named and written, and how startup reads them back. The data goes
// flightsvc → buffer → persist → objstore; queries read buffer (rows in
// memory) and persist (Parquet files).
//
// # Design
//
// persist knows nothing of the buffer, and does not import it. It takes a
// segment's rows as Parts, one per table and UTC day: Chunks (Arrow record
// batches as the buffer holds them) and the catalog table they belong to.
// It gives back the File entries and the Segment that the segment file
// lists. A Store (one per data dir) holds what the steps share: the object
// store, the data dir's writer id, the temporary directory and the newest
// catalog version in the store.
//
// The steps of the persist protocol and of startup are methods of Store,
// each doing one thing once. The buffer's persister (buffer/persist.go) is
// what runs the protocol: it chooses the segment, runs the steps in order,
// retries each with backoff and a timeout on every attempt, reports
// failures, and deletes the WAL file; it keeps the persisted segments in an
// Index, from which its View takes those that are no longer buffered.
// Work on what is persisted (compaction, retention, deletes, dropping
// tables) belongs here, beside the layout and the rules it must keep.
// Deleting files (of dropped tables, of expired rows) rewrites segment
// files first and deletes after (sweep.go); the buffer decides when. A
// compaction (compact.go) merges files that are each sorted as it
// reads them, a batch of each at a time (compact_merge.go), so its
// memory is bounded by its inputs' count, not their rows.
//
// # Object layout
//
// Closed segments are persisted, in id order, to these objects (names are
// deterministic, so a retried persist finds its own earlier uploads):
//
//	catalogs/<version %020d>.json
//	    the catalog file (catalog/doc.go) of that version, byte for byte
//	dbs/<db>/<table>/<YYYY-MM-DD>/<segment %020d>.parquet
//	    one table's rows of one UTC day written during one segment
//	segments/<segment %020d>.json
//	    the segment file: the commit point of a segment's persist
//	dbs/<db>/<table>/<YYYY-MM-DD>/c<generation %020d>.parquet
//	    a compaction's merged file (compaction.go)
//	dbs/<db>/<table>/<YYYY-MM-DD>/r<generation %020d>-<n %06d>.parquet
//	    a file a DELETE rewrote (rewrite.go), committed as a compaction
//	compactions/<generation %020d>.json
//	    the compaction file: the commit point of a compaction (or rewrite)
//
// Table names are path-escaped (url.PathEscape: "/" is %2F) and a leading
// "." becomes %2E; database names need no escaping.
//
// # Parquet files
//
// Written by arrow-go's pqarrow: Parquet format 2.6, data pages v1, zstd
// (but for columns it would shrink by less than a tenth, sampled before
// the file is written: uncompressed, parquet_raw.go), statistics on every
// column, dictionary encoding (but for time and nearly distinct numeric
// columns, parquet_dict.go), row
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
//	  ],
//	  "writer_id": "…"             // the data dir's, see Startup
//	}
//
// # Persist protocol
//
// For each closed segment, oldest first, by the buffer's persister (one
// goroutine):
//
//  1. the catalog, if its version is newer than the newest in the store
//     (Store.PutCatalog);
//  2. every table and day of the segment as Parquet, PersistConcurrency
//     files at once: their names put in the journal of unlisted objects
//     (unlisted.go; Store.NoteUnlisted), then each written to
//     <data-dir>/persist/ (the CRC32C computed on the way;
//     Store.WriteTemp) and uploaded with that CRC32C
//     (Store.UploadParquet);
//  3. the segment file (Store.PutSegmentFile);
//  4. then, and only then, the buffer deletes the segment's WAL file and
//     fsyncs the WAL directory; the files the segment file lists leave the
//     journal (Store.SettleUnlisted), and those it journaled but does not
//     list (a table dropped meanwhile) are deleted.
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
// never wait for persistence, unless the buffer is at MemLimit while
// closed segments are being persisted: then they wait for room, up to
// FullWait (buffer/full_wait.go). While persistence fails, closed segments stay
// in memory, until MemLimit refuses writes with ErrBufferFull, whose message
// carries the last persist error. (All of this is the buffer's: see
// buffer/doc.go.)
//
// # Startup
//
// Before the WAL is replayed: leftovers in <data-dir>/persist/ are removed
// (Open); the newest catalogs/ object is installed as the local catalog
// file if it is newer than the local one (or that one is missing;
// Store.LoadCatalog); segments/ is read (Store.LoadSegments); the buffer
// deletes the WAL files of persisted segments (a crash between steps 3 and
// 4), but refuses to delete one whose segment another data dir persisted
// (its writer_id is not ours: two servers share the store); the
// compaction files are applied (compaction.go); the Parquet objects the
// journal of unlisted objects names and no listing names are deleted
// (Store.RemoveOrphans: no listing of dbs/, unless FullOrphanScan), but
// for those of segments still in the WAL (a crash before step 3), which
// the retry of their persist finds in place and counts done, and none at
// all when a segment file of another writer_id shows two servers sharing
// the store (one may be the other's upload in flight). The segment and compaction
// files are read 32 at a time. Then the remaining WAL files are replayed: their
// segments are persisted again. Persisted segments are not loaded into
// memory, and new segment ids are above theirs.
package persist
