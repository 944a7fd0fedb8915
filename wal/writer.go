package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// SyncMode tells whether the Writer fsyncs before acknowledging records.
type SyncMode int

const (
	// SyncFsync acknowledges a record only once an fdatasync covers it.
	SyncFsync SyncMode = iota
	// SyncNone acknowledges a record once it is written to the OS; files
	// are still synced at creation, rotation and close.
	SyncNone
)

func (m SyncMode) String() string {
	switch m {
	case SyncFsync:
		return "fsync"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// Options configure a Writer.
type Options struct {
	Dir        string
	Sync       SyncMode
	FS         FS                    // nil: the OS file system
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: metrics are not registered
	// OnFail, if set, is called once, with the sticky error, when the
	// Writer fails (so that health checks can say writes are down).
	OnFail func(error)
}

// ErrClosed is returned by Append and Rotate on a closed Writer.
var ErrClosed = errors.New("wal: writer closed")

// writeBufferSize is the size of the buffer that gathers the records of a
// group into few write calls; larger payloads pass through it.
const writeBufferSize = 1 << 20

// Writer appends records to the WAL file of the current segment. It is safe
// for concurrent use. One goroutine owns the file: it writes every queued
// record, syncs once per group, and then releases the group's waiters.
type Writer struct {
	fs       FS
	dir      string
	syncMode SyncMode
	logger   *slog.Logger
	metrics  *metrics
	onFail   func(error)

	signal chan struct{} // capacity 1: work was queued or Close was called
	donec  chan struct{} // closed when the flush goroutine returns

	mu struct {
		sync.Mutex
		queue   []*Pending
		closing bool
		err     error // sticky: every later Append and Rotate fails with it
		segment uint64
	}

	closeOnce sync.Once
	closeErr  error // set by the flush goroutine before donec is closed

	// Owned by the flush goroutine (and Create, before it starts).
	f  File
	bw *bufio.Writer
	// df is f opened again for direct I/O, nil when the FS has none: then
	// records go through bw and the page cache. stage is the aligned
	// buffer of direct writes; its first off%DirectBlockSize bytes are
	// always the file's last, partial block (see writeDirect).
	df          DirectFile
	stage       []byte
	directNoted bool // the fallback to the page cache was logged
	seg         uint64
	off         int64 // bytes written or buffered to f
	synced      int64 // bytes of f covered by a completed sync
	failed      error // the first write/sync/create error
	hdr         [RecordHeaderSize]byte
}

// Pending is a queued Append or Rotate.
type Pending struct {
	rotate   bool
	parts    [][]byte // the payload, in parts written one after another
	size     int      // of the payload
	crc      uint32
	rotateTo uint64

	done chan struct{}
	err  error
	seg  uint64
	off  int64
}

// Wait blocks until the record is written and, with SyncFsync, covered by a
// completed sync, or returns the error that prevented it.
func (p *Pending) Wait() error {
	<-p.done
	return p.err
}

// Position returns the segment and the file offset of the record header.
// It is valid once Wait has returned nil.
func (p *Pending) Position() (segmentID uint64, offset int64) {
	return p.seg, p.off
}

// End returns the file offset just past the record. Valid once Wait has
// returned nil.
func (p *Pending) End() int64 {
	return p.off + RecordHeaderSize + int64(p.size)
}

func failedPending(err error) *Pending {
	p := &Pending{done: make(chan struct{}), err: err}
	close(p.done)
	return p
}

// Create creates the WAL file of segmentID in opts.Dir (creating the
// directory if needed) and starts the Writer. The file must not exist.
func Create(opts Options, segmentID uint64) (*Writer, error) {
	if opts.Dir == "" {
		return nil, errors.New("wal: Options.Dir is empty")
	}
	if opts.Sync != SyncFsync && opts.Sync != SyncNone {
		return nil, fmt.Errorf("wal: invalid sync mode %d", int(opts.Sync))
	}
	fs := opts.FS
	if fs == nil {
		fs = OSFS()
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("wal: register metrics: %w", err)
	}
	w := &Writer{
		fs:       fs,
		dir:      opts.Dir,
		syncMode: opts.Sync,
		logger:   logger,
		metrics:  m,
		onFail:   opts.OnFail,
		signal:   make(chan struct{}, 1),
		donec:    make(chan struct{}),
		bw:       bufio.NewWriterSize(nil, writeBufferSize),
	}
	if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: create directory: %w", err)
	}
	// The directory may be new: make its entry in the parent durable.
	if err := fs.SyncDir(filepath.Dir(filepath.Clean(opts.Dir))); err != nil {
		return nil, fmt.Errorf("wal: sync parent of %s: %w", opts.Dir, err)
	}
	if err := w.createFile(segmentID); err != nil {
		m.failures.Inc()
		return nil, err
	}
	w.mu.segment = segmentID
	go w.run()
	return w, nil
}

func (w *Writer) path(segmentID uint64) string {
	return filepath.Join(w.dir, SegmentFileName(segmentID))
}

// createFile creates the file of a segment, writes its header and syncs it
// and the directory. On success the file is w.f.
func (w *Writer) createFile(segmentID uint64) error {
	path := w.path(segmentID)
	f, err := w.fs.Create(path)
	if err != nil {
		return fmt.Errorf("wal: segment %d: create %s: %w", segmentID, path, err)
	}
	fail := func(op string, err error) error {
		_ = f.Close()
		// Nothing in it was acknowledged; a leftover would be replayed as a
		// torn header anyway.
		_ = w.fs.Remove(path)
		return fmt.Errorf("wal: segment %d: %s %s: %w", segmentID, op, path, err)
	}
	hdr := appendFileHeader(nil, segmentID)
	if n, err := f.Write(hdr); err != nil {
		return fail("write header of", err)
	} else if n != len(hdr) {
		return fail("write header of", errors.New("short write"))
	}
	if err := w.sync(f); err != nil {
		return fail("sync", err)
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fail("sync directory of", err)
	}
	w.f = f
	w.bw.Reset(f)
	w.seg = segmentID
	w.off = FileHeaderSize
	w.synced = FileHeaderSize
	w.openDirect(path, hdr)
	w.logger.Debug("wal: created file", "file", path, "segment", segmentID)
	return nil
}

// openDirect opens the new file again for direct I/O, when the FS can:
// records then reach the disk without a copy into the page cache (a third
// to a twentieth of the CPU of a buffered write and fdatasync, measured),
// and the page cache is not filled with data no one reads. Without it, the
// Writer writes through the page cache.
func (w *Writer) openDirect(path string, hdr []byte) {
	w.df = nil
	do, ok := w.fs.(DirectOpener)
	if !ok {
		return
	}
	df, err := do.OpenDirect(path)
	if err != nil {
		if !w.directNoted {
			w.directNoted = true
			w.logger.Info("wal: no direct I/O here; writing through the page cache", "dir", w.dir, "err", err)
		}
		return
	}
	w.df = df
	w.stage = alignedGrow(w.stage, DirectBlockSize)
	copy(w.stage, hdr) // the file's partial first block
}

// alignedGrow returns a DirectBlockSize-aligned buffer of at least n bytes
// that starts with the bytes of b.
func alignedGrow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:cap(b)]
	}
	size := (n + n/4 + DirectBlockSize - 1) &^ (DirectBlockSize - 1)
	raw := make([]byte, size+DirectBlockSize)
	off := DirectBlockSize - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%DirectBlockSize)
	if off == DirectBlockSize {
		off = 0
	}
	out := raw[off : off+size : off+size]
	copy(out, b)
	return out
}

// writeDirect writes the records of a group with one aligned write: the
// file's last partial block (kept in stage) is written again with the same
// bytes, followed by the records and zeros up to the next block boundary.
// Rewriting the acknowledged bytes of that block with themselves is safe
// even if the write tears. Until the file is closed or rotated (when it is
// truncated to its records) it ends in up to a block of zeros, which
// replay treats as the torn tail it may be.
func (w *Writer) writeDirect(group []*Pending) error {
	const b = DirectBlockSize
	blockStart := w.off &^ (b - 1)
	pos := int(w.off - blockStart)
	need := pos
	for _, p := range group {
		need += RecordHeaderSize + p.size
	}
	padded := (need + b - 1) &^ (b - 1)
	w.stage = alignedGrow(w.stage, padded)
	for _, p := range group {
		binary.LittleEndian.PutUint32(w.stage[pos:], uint32(p.size))
		binary.LittleEndian.PutUint32(w.stage[pos+4:], p.crc)
		pos += RecordHeaderSize
		for _, part := range p.parts {
			pos += copy(w.stage[pos:], part)
		}
		p.seg, p.off = w.seg, w.off
		w.off += RecordHeaderSize + int64(p.size)
	}
	clear(w.stage[pos:padded])
	if _, err := w.df.WriteAt(w.stage[:padded], blockStart); err != nil {
		return err
	}
	// Keep the new last partial block at the front of stage, in a buffer
	// of its own when one group made stage larger than is worth keeping.
	last := int(w.off&^(b-1) - blockStart)
	tail := w.stage[last : last+int(w.off&(b-1))]
	if cap(w.stage) > maxKeptStage {
		small := alignedGrow(nil, b)
		copy(small, tail)
		w.stage = small
		return nil
	}
	copy(w.stage, tail)
	return nil
}

// maxKeptStage bounds the staging buffer kept between direct writes: a
// group that needs more (a huge batch) gets a buffer of its own, given
// back once written, rather than holding the memory until the file
// rotates.
const maxKeptStage = 64 << 20

// truncateToRecords cuts the zero padding of direct writes off the end of
// the file before it is closed, so that a closed file ends with its last
// record, and marks the file unsynced (its size changed): the caller
// syncs.
func (w *Writer) truncateToRecords() error {
	if w.df == nil {
		return nil
	}
	cerr := w.df.Close()
	w.df = nil
	if err := w.f.Truncate(w.off); err != nil {
		return err
	}
	w.synced = -1
	return cerr
}

func (w *Writer) sync(f File) error {
	start := time.Now()
	err := f.Sync()
	w.metrics.fsyncs.Inc()
	w.metrics.fsyncDuration.Observe(time.Since(start).Seconds())
	return err
}

// Append queues a record and returns at once, without waiting for I/O. The
// record's payload is the concatenation of the parts given (so a caller
// need not copy what it already holds into one buffer); they must not be
// modified until Wait returns. The checksum is computed here, on the
// caller's goroutine.
func (w *Writer) Append(payload ...[]byte) *Pending {
	size := 0
	for _, part := range payload {
		size += len(part)
	}
	if size == 0 {
		return failedPending(errors.New("wal: empty record"))
	}
	if size > MaxRecordSize {
		return failedPending(fmt.Errorf("wal: record of %d bytes exceeds the maximum of %d", size, MaxRecordSize))
	}
	p := &Pending{parts: payload, size: size, crc: recordCRC(size, payload...), done: make(chan struct{})}
	if err := w.enqueue(p); err != nil {
		return failedPending(err)
	}
	return p
}

// Rotate makes newSegmentID's file the current one: records appended before
// the call go to the old file, which is synced and closed; records appended
// after it go to the new file. It blocks until the new file is created and
// synced. newSegmentID must be larger than the current id.
func (w *Writer) Rotate(newSegmentID uint64) error {
	p := &Pending{rotate: true, rotateTo: newSegmentID, done: make(chan struct{})}
	if err := w.enqueue(p); err != nil {
		return err
	}
	return p.Wait()
}

func (w *Writer) enqueue(p *Pending) error {
	w.mu.Lock()
	if w.mu.err != nil {
		err := w.mu.err
		w.mu.Unlock()
		return err
	}
	if w.mu.closing {
		w.mu.Unlock()
		return ErrClosed
	}
	w.mu.queue = append(w.mu.queue, p)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
	return nil
}

// Err returns the sticky error that made the Writer unusable, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// SegmentID returns the id of the segment whose file is current.
func (w *Writer) SegmentID() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.segment
}

// Close waits for the queued records (they complete normally), syncs and
// closes the file, and stops the flush goroutine. Later calls return the
// same result.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.mu.closing = true
		w.mu.Unlock()
		select {
		case w.signal <- struct{}{}:
		default:
		}
		<-w.donec
	})
	return w.closeErr
}

// run is the flush goroutine.
func (w *Writer) run() {
	defer close(w.donec)
	var batch []*Pending
	for {
		w.mu.Lock()
		for len(w.mu.queue) == 0 && !w.mu.closing {
			w.mu.Unlock()
			<-w.signal
			w.mu.Lock()
		}
		// Swap the queue with the (empty) slice of the previous batch:
		// writers queue the next group while this one is written.
		batch, w.mu.queue = w.mu.queue, batch[:0]
		w.mu.Unlock()
		if len(batch) == 0 { // closing and nothing left
			w.closeErr = w.finish()
			return
		}
		w.process(batch)
		clear(batch)
	}
}

// process handles a batch in order: runs of records are written as groups,
// rotations between them.
func (w *Writer) process(batch []*Pending) {
	for len(batch) > 0 {
		n := 0
		for n < len(batch) && !batch[n].rotate {
			n++
		}
		if n > 0 {
			w.writeGroup(batch[:n])
			batch = batch[n:]
			continue
		}
		p := batch[0]
		p.err = w.rotate(p.rotateTo)
		close(p.done)
		batch = batch[1:]
	}
}

// writeGroup writes the records of a group, syncs once and releases them.
func (w *Writer) writeGroup(group []*Pending) {
	err := w.stickyErr()
	if err == nil {
		err = w.writeAndSync(group)
	}
	if err == nil {
		var bytes int64
		for _, p := range group {
			bytes += RecordHeaderSize + int64(p.size)
		}
		w.metrics.records.Add(float64(len(group)))
		w.metrics.bytesWritten.Add(float64(bytes))
		w.metrics.groupRecords.Observe(float64(len(group)))
	}
	for _, p := range group {
		p.err = err
		close(p.done)
	}
}

func (w *Writer) writeAndSync(group []*Pending) error {
	start := w.off
	if w.df != nil {
		if err := w.writeDirect(group); err != nil {
			return w.fail("write", fmt.Errorf("wal: segment %d offset %d: write: %w", w.seg, start, err), err)
		}
		return w.syncGroup()
	}
	for _, p := range group {
		binary.LittleEndian.PutUint32(w.hdr[0:4], uint32(p.size))
		binary.LittleEndian.PutUint32(w.hdr[4:8], p.crc)
		p.seg, p.off = w.seg, w.off
		// bufio.Writer keeps the first error; it is returned by Flush.
		_, _ = w.bw.Write(w.hdr[:])
		for _, part := range p.parts {
			_, _ = w.bw.Write(part)
		}
		w.off += RecordHeaderSize + int64(p.size)
	}
	if err := w.bw.Flush(); err != nil {
		// The file may now end in a partial record: it is poisoned, and
		// replay will cut the torn tail.
		return w.fail("write", fmt.Errorf("wal: segment %d offset %d: write: %w", w.seg, start, err), err)
	}
	return w.syncGroup()
}

// syncGroup syncs a written group, with SyncFsync.
func (w *Writer) syncGroup() error {
	if w.syncMode == SyncFsync {
		if err := w.sync(w.f); err != nil {
			return w.fail("fsync", fmt.Errorf("wal: segment %d offset %d: fsync: %w", w.seg, w.off, err), err)
		}
		w.synced = w.off
	}
	return nil
}

// fail records the first failure: err goes to the current waiters, and every
// later operation fails with an error wrapping cause.
func (w *Writer) fail(op string, err, cause error) error {
	first := w.failed == nil
	w.failed = err
	w.metrics.failures.Inc()
	w.metrics.failed.Set(1)
	sticky := fmt.Errorf("wal: segment %d: %s failed earlier; restart required: %w", w.seg, op, cause)
	w.mu.Lock()
	w.mu.err = sticky
	w.mu.Unlock()
	// A failed write or fsync is not retried (the kernel may have dropped
	// the pages it could not write): only a restart, which replays the
	// WAL from what is on disk, makes writes safe again.
	w.logger.Error("wal: writer failed; every later write fails until apron is restarted: fix the cause (free disk space, check the disk), then restart; acknowledged writes are safe in the WAL and are replayed",
		"file", filepath.Join(w.dir, SegmentFileName(w.seg)), "segment", w.seg, "op", op, "err", err)
	if first && w.onFail != nil {
		w.onFail(sticky)
	}
	return err
}

func (w *Writer) stickyErr() error {
	if w.failed == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// syncIfNeeded syncs what was written and not yet synced (SyncNone).
func (w *Writer) syncIfNeeded() error {
	if err := w.bw.Flush(); err != nil {
		return w.fail("write", fmt.Errorf("wal: segment %d offset %d: write: %w", w.seg, w.synced, err), err)
	}
	if w.synced == w.off {
		return nil
	}
	if err := w.sync(w.f); err != nil {
		return w.fail("fsync", fmt.Errorf("wal: segment %d offset %d: fsync: %w", w.seg, w.off, err), err)
	}
	w.synced = w.off
	return nil
}

func (w *Writer) rotate(newID uint64) error {
	if err := w.stickyErr(); err != nil {
		return err
	}
	if newID <= w.seg {
		return fmt.Errorf("wal: rotate from segment %d to %d: segment ids must grow", w.seg, newID)
	}
	if err := w.truncateToRecords(); err != nil {
		return w.fail("truncate", fmt.Errorf("wal: segment %d: truncate to %d: %w", w.seg, w.off, err), err)
	}
	if err := w.syncIfNeeded(); err != nil {
		return err
	}
	old := w.f
	w.f = nil
	if err := old.Close(); err != nil {
		return w.fail("close", fmt.Errorf("wal: segment %d: close: %w", w.seg, err), err)
	}
	if err := w.createFile(newID); err != nil {
		return w.fail("create", err, err)
	}
	w.mu.Lock()
	w.mu.segment = newID
	w.mu.Unlock()
	return nil
}

// finish syncs and closes the current file.
func (w *Writer) finish() error {
	if w.f == nil {
		return w.stickyErr()
	}
	var serr error
	if w.failed == nil {
		if err := w.truncateToRecords(); err != nil {
			serr = w.fail("truncate", fmt.Errorf("wal: segment %d: truncate to %d: %w", w.seg, w.off, err), err)
		} else {
			serr = w.syncIfNeeded()
		}
	} else {
		serr = w.stickyErr()
		if w.df != nil {
			_ = w.df.Close()
			w.df = nil
		}
	}
	cerr := w.f.Close()
	w.f = nil
	if cerr != nil {
		cerr = fmt.Errorf("wal: segment %d: close: %w", w.seg, cerr)
	}
	return errors.Join(serr, cerr)
}
