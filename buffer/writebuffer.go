package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// WriteBuffer takes writes: it validates them against the catalog, makes
// them durable in the WAL, and buffers their rows in segments. It also
// replays the WAL when opened. It is safe for concurrent use.
type WriteBuffer struct {
	cfg     Config
	log     *slog.Logger
	mem     memory.Allocator
	cat     *catalog.Catalog
	catPath string
	walDir  string
	metrics *metrics
	lock    *dirLock
	// maxSegID is the largest segment id found at startup, also of WAL
	// files removed for being empty.
	maxSegID uint64

	// mu orders writes: a write plans its catalog change and appends its
	// WAL record under mu, so WAL order is catalog order. A write that
	// changes the catalog also waits for its fsync under mu (catalog changes
	// are rare); the others wait outside it and share fsyncs.
	//
	// Views do not take mu: they read viewState (viewstate.go), which
	// mu's Unlock publishes after a change.
	mu struct {
		publishMutex
		w        *wal.Writer
		open     *Segment
		closed   []*Segment
		seq      uint64
		catSaved uint64 // catalog version last saved
		closing  bool
		// persisted lists the segments whose segment file is durable, in
		// id order (persist.go); some may still be in closed.
		persisted persist.Index
		// sweep is what the deletion of persisted files waits on
		// (sweep.go).
		sweep sweepState
		// replaces are the replaces in progress (replace.go).
		replaces map[*Replace]bool
		// live are the retired View states that Views may still hold
		// (viewstate.go).
		live []*viewState
		// released: Close has let go of the segments; View states list
		// none from then on.
		released bool
		// room is closed when memory leaves the buffer, for the writes
		// waiting for it (full_wait.go); nil when none waits.
		room chan struct{}
	}
	// viewState is what View takes; viewGen mirrors its generation.
	viewState atomic.Pointer[viewState]
	viewGen   atomic.Uint64
	persist   persistState
	// lvc are the last-value caches (lastvalue.go).
	lvc *lastValues
	// lastWrite is when the last write was submitted (UnixNano): a
	// compaction gives way while writes arrive (compact_pace.go).
	lastWrite atomic.Int64
	// waitingBytes are the batches of the writes waiting for room
	// (full_wait.go).
	waitingBytes atomic.Int64
	// pacer slows writes down before the buffer is full (slowdown.go).
	pacer writePacer
	// published is closed, and replaced, each time a View state is
	// published (under mu): what waits for a segment to leave memory
	// waits on it (rewrite.go).
	published chan struct{}
	// rewriting is held by a rewrite of persisted files from its listing
	// of them to its commit, and by a round of compactions: the two never
	// replace the same file (rewrite.go).
	rewriting chan struct{}
	// compactTurn makes rewrites let the compactions they delay run
	// (compact_turn.go).
	compactTurn compactTurn
	// compactBacklog is the files due for compaction at the last round's
	// look, less those merged since (apron_compaction_backlog_files).
	compactBacklog atomic.Int64

	// walFailed is closed when the WAL fails (wal.Options.OnFail).
	walFailed     chan struct{}
	walFailedOnce sync.Once

	sealc chan *Segment // closed segments for the background loop to seal
	stopc chan struct{}
	donec chan struct{}
}

// WriteResult says what a write did.
type WriteResult struct {
	Rows     int64  // rows durably written
	Sequence uint64 // the WAL sequence of the write's record
	Segment  uint64 // the segment the rows went to
}

// Open loads the catalog, replays the WAL into closed segments and opens a
// new segment with a new WAL file.
func Open(cfg Config) (*WriteBuffer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Allocator == nil {
		cfg.Allocator = memory.DefaultAllocator
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.CompactionMinFiles < 2 {
		cfg.CompactionMinFiles = 2
	}
	if cfg.WALFS == nil {
		cfg.WALFS = wal.OSFS()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("buffer: creating data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	b, err := openLocked(cfg)
	if err != nil {
		lock.release()
		return nil, err
	}
	b.lock = lock
	return b, nil
}

// openLocked is Open once the data dir is locked.
func openLocked(cfg Config) (*WriteBuffer, error) {
	b := &WriteBuffer{
		cfg:       cfg,
		log:       cfg.Logger,
		mem:       cfg.Allocator,
		catPath:   filepath.Join(cfg.DataDir, "catalog.json"),
		walDir:    filepath.Join(cfg.DataDir, "wal"),
		sealc:     make(chan *Segment, 1024),
		walFailed: make(chan struct{}),
		stopc:     make(chan struct{}),
		donec:     make(chan struct{}),
		lvc:       newLastValues(),
	}
	b.persist.storeLogs.Every = time.Second
	var err error
	if b.cat, err = catalog.LoadFS(cfg.WALFS, b.catPath, cfg.Limits); err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	if err := b.openStore(); err != nil {
		return nil, err
	}
	if err := b.abortInterrupted(); err != nil {
		return nil, err
	}
	replayed, err := b.replay()
	if err != nil {
		for _, s := range replayed {
			s.release()
		}
		return nil, err
	}
	// A failure from here on frees what replay rebuilt: no reader has
	// seen it, and sealed chunks may be outside the Go heap.
	releaseReplayed := func() {
		for _, s := range replayed {
			s.release()
		}
	}
	b.mu.closed = replayed
	next := b.maxSegID + 1
	if err := b.cat.Save(b.catPath); err != nil {
		releaseReplayed()
		return nil, fmt.Errorf("buffer: saving catalog after replay: %w", err)
	}
	b.mu.catSaved = b.cat.Version()
	w, err := wal.Create(b.walOptions(), next)
	if err != nil {
		releaseReplayed()
		return nil, fmt.Errorf("buffer: %w", err)
	}
	b.mu.w = w
	b.mu.open = newSegment(next, cfg.Now(), walFileName(b.walDir, next), cfg.ChunkRows, cfg.ChunkAllocator)
	b.published, b.rewriting = make(chan struct{}), make(chan struct{}, 1)
	b.mu.publish, b.mu.stale = b.publishLocked, false
	b.mu.catalogMoved = func() bool {
		st := b.viewState.Load()
		return st == nil || st.cat.Version() != b.cat.Version()
	}
	b.publishLocked() // not yet shared: no lock needed
	b.metrics = newMetrics(cfg.Registerer, b)
	go b.loop()
	b.startPersister()
	return b, nil
}

func (b *WriteBuffer) walOptions() wal.Options {
	return wal.Options{Dir: b.walDir, Sync: b.cfg.WALSync, FS: b.cfg.WALFS, Logger: b.log, Registerer: b.cfg.Registerer,
		OnFail: func(error) { b.walFailedOnce.Do(func() { close(b.walFailed) }) }}
}

// WALFailed is closed once the WAL has failed: from then on every write
// fails (ErrWAL) until the server is restarted. WALError says why.
func (b *WriteBuffer) WALFailed() <-chan struct{} { return b.walFailed }

// WALError is the WAL's sticky error, nil while it works.
func (b *WriteBuffer) WALError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.w == nil {
		return nil
	}
	return b.mu.w.Err()
}

func walFileName(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.wal", id))
}

// Catalog is the buffer's catalog, for readers.
func (b *WriteBuffer) Catalog() *catalog.Catalog { return b.cat }

// Allocator is the allocator of buffered and decoded data.
func (b *WriteBuffer) Allocator() memory.Allocator { return b.mem }

// Write validates rec against table db.table (creating or evolving it as
// opts allow), appends it to the WAL, waits until the record is durable,
// and buffers its rows. When it returns nil, the rows are durable and
// visible to reads; when it returns an error, nothing changed (but see
// ErrWAL). rec is not released.
func (b *WriteBuffer) Write(ctx context.Context, db, table string, rec arrow.RecordBatch, opts catalog.WriteOptions) (WriteResult, error) {
	p, err := b.Submit(ctx, db, table, rec, opts)
	if err != nil {
		return WriteResult{}, err
	}
	return p.Wait()
}

// PendingWrite is a write whose WAL record is queued. Wait must be called
// exactly once.
type PendingWrite struct {
	b       *WriteBuffer
	start   time.Time
	key     TableKey
	nb      *batch
	enc     encodedBatch // the WAL payload's parts, released once written
	seg     *Segment
	wal     *wal.Pending
	durable bool // the WAL record was already waited for
	res     WriteResult
	rep     *Replace // the replace the write belongs to, nil if none
	// tableID is the id of the table the write went to, 0 for a
	// replace's (its rows are not merged into a last-value cache).
	tableID uint64
}

// Wait waits until the write's WAL record is durable, then buffers its rows.
// Its result is Write's.
func (p *PendingWrite) Wait() (WriteResult, error) {
	res, err := p.wait()
	p.b.metrics.observeWrite(res, err, time.Since(p.start))
	if p.rep != nil {
		p.rep.waited(err)
	}
	return res, err
}

func (p *PendingWrite) wait() (WriteResult, error) {
	defer p.seg.inflight.Done()
	defer p.nb.release()
	if !p.durable {
		if err := p.wal.Wait(); err != nil {
			p.enc.release()
			return WriteResult{}, fmt.Errorf("%w: database %q table %q: %w", ErrWAL, p.key.Database, p.key.Table, err)
		}
	}
	// The WAL has written the payload: its buffer may serve the next write.
	p.enc.release()
	if _, err := p.seg.append(p.key, p.nb); err != nil {
		// The record is durable but its rows could not be buffered: a bug,
		// not bad input (the catalog accepted the batch). Replay would
		// buffer it again; say so rather than pretend it failed cleanly.
		p.b.log.Error("buffering a durable write failed", "database", p.key.Database, "table", p.key.Table, "sequence", p.res.Sequence, "err", err)
		return WriteResult{}, fmt.Errorf("buffer: sequence %d is durable in the WAL but could not be buffered (restart to replay it): %w", p.res.Sequence, err)
	}
	if p.tableID != 0 {
		p.b.mergeLastValue(p.key, p.tableID, p.nb)
	}
	return p.res, nil
}

// Submit does the part of Write that decides: it validates rec, plans and
// orders it, and queues its WAL record, returning a PendingWrite whose Wait
// finishes the write. An error means nothing changed. A stream of batches
// submits the next batch while the previous one's fsync runs: its records
// share fsyncs, and decoding overlaps the disk.
func (b *WriteBuffer) Submit(ctx context.Context, db, table string, rec arrow.RecordBatch, opts catalog.WriteOptions) (*PendingWrite, error) {
	start := time.Now()
	b.lastWrite.Store(start.UnixNano())
	p, err := b.slowDownSubmit(ctx, start, db, table, rec, opts)
	if err != nil {
		b.metrics.observeWrite(WriteResult{}, err, time.Since(start))
		return nil, err
	}
	p.start = start
	return p, nil
}

// submit is Submit's one try. A write refused at MemLimit (ErrBufferFull)
// also says whether memory was coming back as it was refused
// (roomComingLocked, under the same lock): whether waiting can help.
func (b *WriteBuffer) submit(db, table string, rec arrow.RecordBatch, opts catalog.WriteOptions) (_ *PendingWrite, roomComing bool, _ error) {
	now := b.cfg.Now()
	nb, err := normalize(rec, now, b.mem, fromClient, b.cfg.MaxValueSize)
	if err != nil {
		return nil, false, fmt.Errorf("database %q table %q: %w", db, table, err)
	}
	keep := false
	defer func() {
		if !keep {
			nb.release()
		}
	}()
	enc, err := encodeBatch(nb.rec)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if !keep {
			enc.release()
		}
	}()
	rows := int64(nb.rows())

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closing {
		return nil, false, ErrClosed
	}
	if err := b.mu.w.Err(); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrWAL, err)
	}
	ch, err := b.cat.PlanWrite(db, table, nb.rec.Schema(), opts)
	if err != nil {
		return nil, false, err
	}
	if used := b.bufferedLocked(); used >= b.cfg.MemLimit {
		// Whether room comes is decided before the refusal sheds a
		// replace: the write that sheds it stays refused.
		coming := b.roomComingLocked()
		err := b.fullErrorLocked(used)
		b.shedReplacesLocked(err)
		return nil, coming, err
	}
	if err := b.maybeRollLocked(now); err != nil {
		return nil, false, err
	}
	seq := b.mu.seq + 1
	payload, err := enc.payload(db, table, seq, rows)
	if err != nil {
		return nil, false, err
	}
	walPending := b.mu.w.Append(payload...)
	b.mu.seq = seq
	seg := b.mu.open
	seg.noteSequence(seq)
	p := &PendingWrite{b: b, key: TableKey{db, table}, nb: nb, enc: enc, seg: seg, wal: walPending,
		res: WriteResult{Rows: rows, Sequence: seq, Segment: seg.id}}
	if ch != nil {
		// A catalog change is applied only once its record is durable, and
		// under mu, so that the next write plans against it.
		if err := walPending.Wait(); err != nil {
			return nil, false, fmt.Errorf("%w: database %q table %q: %w", ErrWAL, db, table, err)
		}
		if err := b.cat.Apply(ch); err != nil {
			return nil, false, err
		}
		p.durable = true
	}
	if opts.Replace == 0 {
		if t, ok := b.cat.Table(db, table); ok {
			p.tableID = t.ID
		}
	}
	seg.inflight.Add(1)
	keep = true
	return p, false, nil
}

// bufferedLocked is the bytes held by all segments.
func (b *WriteBuffer) bufferedLocked() int64 {
	s := b.mu.open.size.Load() + b.lvc.bytes.Load()
	for _, c := range b.mu.closed {
		s += c.size.Load()
	}
	return s
}

// maybeRollLocked closes the open segment and opens the next one when the
// open segment is older than SegmentDuration or holds half of MemLimit.
func (b *WriteBuffer) maybeRollLocked(now time.Time) error {
	open := b.mu.open
	age := now.Sub(open.start)
	empty := open.rows.Load() == 0 && len(open.Tables()) == 0
	switch {
	case empty && age >= b.cfg.SegmentDuration:
		// Nothing to close: let the empty segment start over.
		open.start = now
		return nil
	case empty:
		return nil
	case age >= b.cfg.SegmentDuration:
		return b.rollLocked(now, "segment duration reached")
	case open.size.Load() >= b.cfg.MemLimit/2:
		return b.rollLocked(now, "half of buffer memory limit reached")
	}
	return nil
}

func (b *WriteBuffer) rollLocked(now time.Time, why string) error {
	old := b.mu.open
	next := old.id + 1
	if err := b.mu.w.Rotate(next); err != nil {
		return fmt.Errorf("%w: rolling over to segment %d: %w", ErrWAL, next, err)
	}
	old.close(now)
	b.mu.closed = append(b.mu.closed, old)
	b.mu.open = newSegment(next, now, walFileName(b.walDir, next), b.cfg.ChunkRows, b.cfg.ChunkAllocator)
	b.markStaleLocked()
	b.log.Info("segment rolled over", "closed", old.id, "opened", next, "why", why,
		"rows", old.rows.Load(), "bytes", old.size.Load())
	b.metrics.rollovers.Inc()
	b.kickPersister()
	select {
	case b.sealc <- old:
	default:
		// The loop is behind; the segment stays unsealed, which costs
		// only memory slack, and the next rollover tries again.
	}
	b.saveCatalogLocked()
	return nil
}

// saveCatalogLocked writes the catalog file when it changed. The WAL holds
// every change too (each record carries its batch's schema), so a failure
// here loses nothing: it is logged, and tried again at the next rollover.
func (b *WriteBuffer) saveCatalogLocked() {
	v := b.cat.Version()
	if v == b.mu.catSaved {
		return
	}
	if err := b.cat.Save(b.catPath); err != nil {
		b.log.Error("saving catalog failed; the WAL still holds its changes", "path", b.catPath, "err", err)
		return
	}
	b.mu.catSaved = v
}

// loop rolls the open segment over on time and seals closed segments.
func (b *WriteBuffer) loop() {
	defer close(b.donec)
	tick := time.NewTicker(min(time.Second, b.cfg.SegmentDuration/4))
	defer tick.Stop()
	for {
		select {
		case <-b.stopc:
			return
		case s := <-b.sealc:
			s.seal()
		case <-tick.C:
			b.mu.Lock()
			if !b.mu.closing {
				if err := b.maybeRollLocked(b.cfg.Now()); err != nil {
					b.log.Error("time rollover failed", "err", err)
				}
			}
			b.mu.Unlock()
		}
	}
}

// Segments returns every buffered segment, closed ones first, in id order,
// for tests and metrics. A reader of rows must take a View instead: with
// ReleasePersisted, a listed segment may be released under it.
func (b *WriteBuffer) Segments() []*Segment {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Segment, 0, len(b.mu.closed)+1)
	out = append(out, b.mu.closed...)
	return append(out, b.mu.open)
}

// Segment returns the buffered segment with that id; like Segments, not
// for readers of rows.
func (b *WriteBuffer) Segment(id uint64) (*Segment, bool) {
	for _, s := range b.Segments() {
		if s.id == id {
			return s, true
		}
	}
	return nil, false
}

// Close stops taking writes, waits for writes in flight, closes the WAL
// and saves the catalog. Buffered data is released, but for segments a
// View still holds (see WaitReaders): those are freed by their last
// View's Release.
func (b *WriteBuffer) Close() error {
	b.mu.Lock()
	if b.mu.closing {
		b.mu.Unlock()
		return nil
	}
	b.mu.closing = true
	b.mu.Unlock()
	close(b.stopc)
	<-b.donec
	b.stopPersister()

	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	if err := b.mu.w.Close(); err != nil {
		errs = append(errs, fmt.Errorf("buffer: closing WAL: %w", err))
	}
	for _, s := range append(b.mu.closed, b.mu.open) {
		s.inflight.Wait()
	}
	b.lvc.close()
	if v := b.cat.Version(); v != b.mu.catSaved {
		if err := b.cat.Save(b.catPath); err != nil {
			errs = append(errs, fmt.Errorf("buffer: saving catalog: %w", err))
		}
	}
	b.mu.released = true
	b.publishLocked()
	if left := releaseUnread(append(b.mu.closed, b.mu.open)); left > 0 {
		b.log.Error("closing the buffer while queries (or a persist it gave up on) still read it: the memory of the segments they read is left to them (freed by their last reader, or at exit), not freed under them",
			"segments", left)
	}
	b.metrics.unregister()
	if b.persist.abandoned.Load() {
		select {
		case <-b.persist.done: // it stopped after all
		default:
			// The persister still runs and may write to the data dir: it
			// stays locked until the process exits.
			return errors.Join(errs...)
		}
	}
	if err := b.lock.release(); err != nil {
		errs = append(errs, fmt.Errorf("buffer: unlocking the data dir: %w", err))
	}
	return errors.Join(errs...)
}
