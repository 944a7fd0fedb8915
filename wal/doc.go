// Package wal is Apron's write-ahead log: every batch written to the server
// is framed as one record, appended to the WAL file of the buffer segment it
// belongs to, and acknowledged only once an fsync covers it. On startup the
// files are replayed in segment order to rebuild the buffer.
//
// # Files
//
// The WAL lives in <data-dir>/wal/. There is one file per buffer segment,
// named after the segment id as a zero-padded decimal number:
//
//	00000000000000000012.wal   (fmt "%020d.wal")
//
// so that lexical order is numeric order. Other names found in the directory
// are ignored by ListSegments: <name>.corrupt (a file set aside by
// ReplayOptions.MoveCorrupt, kept for forensics; <name>.corrupt.1, .2, … if
// that name is taken) and <name>.tmp (a file being rewritten; a leftover one
// is removed by Replay).
//
// A process has one Writer. It appends to the newest file; Rotate syncs and
// closes it and creates the file of the next segment. A file is created under
// its final name with O_EXCL, its header is written and fsynced, and then the
// directory is fsynced, before any record goes into it. Files that are
// rewritten (a torn header, MoveCorrupt) are written to <name>.tmp, fsynced,
// renamed over <name>, and the directory is fsynced.
//
// A file whose segment is persisted is deleted by its user with
// RemovePaced (remove.go): shrunk from its end a few MiB at a time, each
// step synced, then removed, so that the blocks it frees do not hold up
// the fsyncs of the file being written. A file cut short by a crash part
// way is still the file of a persisted segment, deleted at startup.
//
// # File format
//
// All integers are little endian. CRC means CRC-32C (Castagnoli).
//
// A file starts with a 32-byte header:
//
//	offset size field
//	0      8    magic "APRONWAL"
//	8      4    format version, uint32 = 1
//	12     4    reserved, zero
//	16     8    segment id, uint64; must equal the id in the file name
//	24     4    CRC of bytes 0..23, uint32
//	28     4    padding, zero
//
// Records follow back to back from offset 32, with no padding or alignment:
//
//	offset size field
//	0      4    length of the payload, uint32; 0 < length <= MaxRecordSize (1 GiB)
//	4      4    CRC of the 4 length bytes followed by the payload, uint32
//	8      n    payload
//
// Because the length is covered by the CRC, an all-zero record header never
// checks out (the CRC of four zero bytes is not zero).
//
// # Direct I/O
//
// Where the file system allows it (Linux, not tmpfs), the Writer opens each
// file a second time with O_DIRECT and writes records through it: a group
// is copied into an aligned staging buffer after the bytes of the file's
// last partial 4096-byte block, padded with zeros to the next block
// boundary, and written with one aligned pwrite at that block's offset (the
// already acknowledged bytes of the block are rewritten with themselves,
// which a torn write cannot damage), then synced as usual. The data never
// passes through the page cache: measured on the 2-core test machine, a
// 4.8 MB write + fdatasync took 0.40-0.47 ms of CPU direct against 1.3-7.8
// ms buffered. So an open file ends in up to 4095 zero bytes after its last
// record; Rotate and Close truncate it to its last record and sync, so a
// closed file has no padding. A crash leaves the padding, which replay
// cuts as a torn tail (an all-zero record header). Without direct I/O the
// Writer writes through the page cache, in the same format.
//
// # Payload of an Apron record (Entry)
//
// The payload of each record written by the server is an Entry
// (AppendEntry, DecodeEntry):
//
//	uvarint   length h of the header
//	h bytes   protobuf apron.v1.WalRecordHeader (database, table, sequence, rows)
//	rest      an Arrow IPC stream: the schema message, any dictionary
//	          messages, one record batch message and the end-of-stream marker
//
// This package only frames entries; decoding the IPC stream is the caller's
// job.
//
// # Durability
//
// Writer.Append queues a record, given as one or more parts (the payload is
// their concatenation: a caller need not join what it holds, the Writer
// copies each part once, into its write buffer); Pending.Wait returns once the record is
// written and, with SyncFsync (the default), covered by a completed
// fdatasync. One goroutine writes all queued records and syncs once per group
// (group commit). A failed write or fsync is sticky: the waiters of that group
// get the error and every later Append and Rotate fails; a failed fsync is
// never retried. A record whose Wait returned an error may or may not be
// found by a later Replay.
//
// # Replay
//
// Replay reads the files in segment-id order. It must run before the Writer
// of the new process creates its first file. What it tolerates follows etcd
// and pebble: only the newest file may end uncleanly.
//
// In the newest file, a torn tail is cut off (the file is truncated to the
// end of its last good record and fsynced, and a warning is logged). A torn
// tail is: fewer than 8 bytes after the last good record, an all-zero record
// header, a length that runs past the end of the file, or a record with a bad
// checksum (or an invalid length) after which the file holds only zero
// bytes. A newest file shorter than the header, or all zeros, gets a fresh
// header (a crash right after it was created).
//
// Anything else is corruption: any bad header, checksum or length in an
// older file, a bad checksum in the newest file followed by non-zero bytes,
// or a header naming another segment. Replay then returns a
// *CorruptionError naming file, segment and offset (errors.Is(err,
// ErrCorrupt) holds), after delivering the good records before it. With
// ReplayOptions.MoveCorrupt the file is copied aside to <name>.corrupt, the
// good prefix is rewritten under the original name (temp file, fsync,
// rename, fsync directory) and replay goes on with the next file.
package wal
