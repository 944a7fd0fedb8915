// Package buffer is Apron's write path: it validates writes against the
// catalog, makes them durable in the WAL (package wal), buffers their rows
// in memory in segments of per-table, per-day Arrow chunks, and persists
// closed segments, through package persist, to an object store as
// Parquet.
//
// # Segments
//
// The open segment takes writes; it rolls over after SegmentDuration or at
// half of MemLimit. A closed segment is sealed once the writes still in
// flight into it are buffered, and from then on never changes. Each segment
// has one WAL file, <data-dir>/wal/<id %020d>.wal.
//
// # Chunks and their memory
//
// A partition (one table's rows of one UTC day in a segment) appends rows
// to its open chunk, in Go slices (column.go), and seals it at ChunkRows
// rows or when the segment closes. A sealed chunk is an immutable Arrow
// record, refcounted: the partition holds one reference, every reader's
// snapshot another. With Config.ChunkAllocator set (the server's keeps
// them outside the Go heap, internal/offheap), sealing copies the values
// into one block of that allocator (sealed.go), given back when the last
// reference goes; so an exact Release on every path is what frees the
// buffer's memory, and tests check it with memory.CheckedAllocator over
// memory maps that fault on a use after the last Release.
//
// String columns are dictionary-encoded (string_column.go); a partition's
// chunks share a column's dictionary while it is small, and a column of
// many values gives each chunk its own. Either way the partition numbers
// each column's values across its dictionaries (series ids, series.go),
// and a chunk carries its dictionaries' ids, so that readers (the latest
// row per key, a WHERE's values, in query) look up a value once per
// partition rather than once per chunk. A partition also keeps, per
// such column, the latest time of each id among its sealed chunks,
// folded in at each seal, so that a reader of the latest row per value
// is handed only the chunks that can hold one (series_latest.go,
// Segment.SnapshotLatest).
//
// # Persistence
//
// With Config.Store set, closed segments are persisted, in id order, to the
// object store by one background goroutine, the persister (persist.go),
// through package persist: persist/doc.go gives the object layout, the
// Parquet files, the segment file, the persist protocol and what startup
// does with the store. The buffer's part is the scheduling: which segment
// next, retries with backoff (PersistRetryMin to PersistRetryMax), a
// timeout on every store request (PersistAttemptTimeout), deleting a
// segment's WAL file once its segment file is durable (and at startup, the
// WAL files of segments persisted before a crash), the health it reports,
// and the back-pressure of MemLimit: writes slow down from seven eighths
// of it while a segment is being persisted (slowdown.go), wait for room
// at it (full_wait.go), and are refused while persistence fails. A replace in
// progress (replace.go) holds back the segments from its first on until
// it commits or aborts. The persister also compacts (compact.go) and
// sweeps (sweep.go); persists come first while memory presses, and
// otherwise they take turns, so that writes that never let the persister
// rest hold off neither (compact_pace.go).
//
// # Last-value caches
//
// A table with a last-value cache (lastvalue.go; the definition is the
// catalog's) has, here, the latest Count rows of each key, merged on
// every write once it is durable and buffered (before its ack), rows of a
// replace in progress excepted. A cache is filling until its filler (the
// query engine) has merged the latest rows of a View of the whole table
// taken after the cache was made: at creation, at startup (the WAL gives
// back only its rows, not the persisted ones) and after its table was
// replaced (a DELETE is a replace: a cache never answers with a deleted
// row, since a replaced table's cache starts empty). The merge keeps the
// larger time per key, so it is commutative and writes during a fill are
// not lost. Its memory counts against MemLimit.
//
// # Reading
//
// A query takes a View: the buffered segments (open and closed) and the
// persisted segments not among them (from the buffer's persist.Index), at
// one instant, so every row is in exactly one of the two. Taking one
// takes no lock (viewstate.go): they are published by pointer, with the
// catalog, each time the write mutex is released after a change, so a
// query does not wait behind a write's fsync or a rollover. A drop or a
// replace rolls the open segment over even when it is empty, so that no
// View taken before it lists a segment its new rows go to. With
// Config.ReleasePersisted, a persisted segment leaves the buffer (and
// View.Buffered) once its segment file is durable; its memory is freed
// once the last View holding it is released.
package buffer
