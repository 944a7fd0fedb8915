package objstore

import "io"

// writebackBytes is how much of an object Put writes before it has the
// kernel start writing what it has out (after pebble's BytesPerSync).
// Without it a persist left a whole Parquet file (hundreds of MB) dirty in
// the page cache until its fsync; on ext4 the WAL's fsyncs of the acks
// meanwhile queue behind that flush, on the same disk.
const writebackBytes = 1 << 20

// writebackWriter writes to f and, every writebackBytes, starts the
// writeback of what was written (startWriteback), waiting for the
// previous one: the dirty data of an object in progress stays near
// writebackBytes, and the writer goes at the disk's pace. It is only a
// hint: Put's fsync is what makes the object durable.
type writebackWriter struct {
	f       io.Writer
	fd      uintptr
	written int64
	synced  int64
}

func newWritebackWriter(f io.Writer) io.Writer {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok || !writebackSupported {
		return f // a test's FS, or a system without sync_file_range
	}
	return &writebackWriter{f: f, fd: fd.Fd()}
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if err == nil && w.written-w.synced >= writebackBytes {
		startWriteback(w.fd, w.written)
		w.synced = w.written
	}
	return n, err
}
