// Package objstore stores Apron's Parquet files (and other immutable
// objects) in an object store: a local directory (the default), memory, or
// a Google Cloud Storage bucket. The Store interface is small, after
// pebble's objstorage/remote.Storage; objstoretest.RunSuite is the
// acceptance suite that every implementation passes.
//
// # Names
//
// Object names are slash-separated relative paths, e.g.
//
//	dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet
//
// ValidateName refuses empty names, empty segments (leading, trailing or
// doubled slashes), segments starting with '.' (so "." and "..", and the
// hidden names used for temporary files), NUL/CR/LF and names over 1024
// bytes. List takes a plain string prefix: "dbs/m/cpu" matches
// "dbs/m/cpu/…" and "dbs/m/cpu2/…"; end the prefix with "/" to list one
// "directory".
//
// # Layout
//
// Local: object name N is the file <dir>/N (<data-dir>/objects by default),
// parent directories made as needed. Its CRC32C is kept in the extended
// attribute user.apron.crc32c (4 bytes, big endian) where the file system
// has user xattrs, and computed by reading the file where not. Temporary
// files are ".<base>.tmp-<random>" beside the target; List skips them and
// Local.Clean removes those left by a crash. An object name cannot also be a
// parent of another object here ("a/b" and "a/b/c"): such a Put fails.
//
// GCS: object name N is gs://<bucket>/<prefix>/N.
//
// Memory: a map; URI is "memory:///N".
//
// # Crash safety of Local
//
// A Put (etcd's pattern; RELIABILITY.md):
//
//  1. make missing parent directories, fsyncing the parent of each new one
//     (and, once per process, of each one first seen);
//  2. create .<base>.tmp-<random> in the target directory (O_EXCL), write,
//     check size and CRC32C, set the CRC xattr, fsync (the writeback of
//     what is written starts every MiB on the way, so that the fsync does
//     not hand the disk the whole object at once: writeback.go);
//  3. publish: rename over the name, or with MustNotExist link(2) the
//     temporary file to the name (EEXIST is atomic: ErrExists) and remove
//     the temporary name;
//  4. fsync the directory.
//
// A failure in 1–3 leaves no object (and the previous version, if any) and
// removes the temporary file. A failed fsync is sticky: the store refuses
// every later write (Put, Delete, Clean) with that error until it is
// reopened, as the kernel may have dropped the dirty pages. Delete removes
// the file and fsyncs the directory. TestLocalWriteProtocol pins this order
// with a recording FS; TestLocalFaults fails each step in turn.
//
// # GCS uploads
//
// See GCS: MustNotExist is the DoesNotExist precondition (HTTP 412 →
// ErrExists), which also makes the upload idempotent so the library
// retries it; every upload sends its CRC32C; an object exists only once
// Writer.Close returns nil, and a failed or cancelled Put cancels the
// upload's context before Close so nothing is created.
package objstore
