package objstore

import "io"

// Writing an object whole and then fsyncing it hands the disk the whole
// object at once: on the machine apron was measured on (ext4 on a virtio
// disk), the fsync of a 55 MB Parquet file took 87-95 ms, and the WAL's
// fdatasyncs queued behind it, so writers' acknowledgements stalled for as
// long. Put therefore starts the writeback of what it has written every
// writebackStep bytes, and waits for the writeback it started one step
// before (pebble's BytesPerSync, RocksDB's bytes_per_sync): the disk gets
// the object in pieces of writebackStep, never more than about two of
// them queued, and the final fsync has little left to write. It is a hint
// to the kernel, not a durability step: the fsync is still what makes the
// object durable, and a file system without it (or a test's FS) just
// skips it.
const writebackStep = 1 << 20

// WritebackStarter is implemented by a File that can start the writeback
// of a range of its dirty pages (sync_file_range on Linux). StartWriteback
// waits for writeback already running on [0, end) and starts it on the
// rest of that range; it does not make anything durable.
type WritebackStarter interface {
	StartWriteback(end int64) error
}

// writebackWriter writes to f and, every writebackStep bytes, starts the
// writeback of all but the last step written (see writebackStep).
type writebackWriter struct {
	f       io.Writer
	ws      WritebackStarter // nil: the File cannot
	written int64
	started int64 // end of the range whose writeback was started
}

func newWritebackWriter(f File) *writebackWriter {
	w := &writebackWriter{f: f}
	w.ws, _ = f.(WritebackStarter)
	return w
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.ws != nil && err == nil {
		if end := w.written - writebackStep; end-w.started >= writebackStep {
			end &^= 4095 // whole pages
			if w.ws.StartWriteback(end) != nil {
				w.ws = nil // a hint only: the fsync reports real errors
			}
			w.started = end
		}
	}
	return n, err
}
