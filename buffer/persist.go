package buffer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/lograte"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// persistState is the WriteBuffer's persistence machinery (doc.go). One
// goroutine, the persister, persists closed segments in id order, each
// step through package persist; the files of a segment are written
// PersistConcurrency at a time.
type persistState struct {
	// store is the persisted side in Config.Store, nil without one.
	store  *persist.Store
	notify chan struct{}
	sweep  chan struct{} // kickSweep (sweep.go)
	// compactNow asks for a compaction round (kickCompaction,
	// compact_turn.go).
	compactNow chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
	// drain is closed by FinishPersist (shutdown.go): the persister
	// finishes what it is persisting, starts nothing new, and retries no
	// failed attempt.
	drain     chan struct{}
	drainOnce sync.Once
	// current is the id of the segment being persisted, 0 if none.
	current atomic.Uint64
	// turn is the compaction's share of the persister's time while
	// segments keep waiting (compact_pace.go).
	turn persisterTurn
	// abandoned: FinishPersist's deadline passed with the cancelled
	// persister still running (in an encoding that stops only at its next
	// write). Close then does not wait for it, nor unlock the data dir,
	// which it may still write to: the process exit does.
	abandoned atomic.Bool

	errMu   sync.Mutex
	lastErr error // of the last failed step; nil once a segment persists
	// storeErr is the last error the storage client retried by itself
	// (NoteStoreAttemptFailure), at storeErrAt: an attempt cut by its
	// deadline names it, since its own error says only that time ran out.
	storeErr   error
	storeErrAt time.Time
	failures   int       // failed attempts since the last persisted segment
	since      time.Time // first of those failures

	// storeLogs limits the log lines of failed store requests, per
	// error class (objstore.ErrorClass).
	storeLogs lograte.ByKey
}

// openStore runs before WAL replay when a Store is configured: it loads a
// newer catalog from the store, learns the persisted segments, deletes the
// WAL files they cover, and removes Parquet files no segment file lists.
func (b *WriteBuffer) openStore() error {
	b.persist.notify = make(chan struct{}, 1)
	b.persist.sweep = make(chan struct{}, 1)
	b.persist.compactNow = make(chan struct{}, 1)
	if b.cfg.Store == nil {
		return nil
	}
	st, err := persist.Open(persist.Config{Objects: b.cfg.Store, DataDir: b.cfg.DataDir, Logger: b.log, Retry: b.startupRetry,
		CreateTemp: b.cfg.PersistCreateTemp, BoundEncoding: b.boundEncoding, Cores: b.cfg.Cores, FS: b.cfg.WALFS, FullOrphanScan: b.cfg.FullOrphanScan})
	if err != nil {
		return err
	}
	b.persist.store = st
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StartupStoreTimeout)
	defer cancel()
	if err := b.loadStoreCatalog(ctx); err != nil {
		return err
	}
	segs, err := st.LoadSegments(ctx)
	if err != nil {
		return err
	}
	for _, s := range segs {
		b.maxSegID = max(b.maxSegID, s.ID)
	}
	if err := b.removePersistedWAL(segs); err != nil {
		return err
	}
	comps, err := st.LoadCompactions(ctx)
	if err != nil {
		return err
	}
	// The compactions that committed replace their inputs (compact.go);
	// listings that still name an input are rewritten by the sweep, and
	// inputs left in the store are orphans now.
	listed, stale := persist.ApplyCompactions(segs, comps)
	var live []persist.Segment
	for _, s := range listed {
		if stale[s.Listing()] {
			b.markDirtyLocked(s)
		}
		if len(s.Files) > 0 {
			live = append(live, s) // a listing with no file has nothing to read
		}
	}
	b.mu.persisted.Add(live...)
	if len(stale) > 0 {
		b.kickSweep()
	}
	b.forgetDroppedLocked()
	pending, err := b.unpersistedWAL(segs)
	if err != nil {
		return err
	}
	if err := st.RemoveOrphans(ctx, listed, pending); err != nil {
		return err
	}
	st.CleanTemporary(ctx)
	return nil
}

// startupRetry is retry for Open: bounded by ctx's deadline, and the error
// says what failed last.
func (b *WriteBuffer) startupRetry(ctx context.Context, what string, fn func() error) error {
	var last error
	err := b.retry(ctx, what, func() error {
		last = fn()
		return last
	})
	if err != nil {
		if last != nil && !errors.Is(last, err) {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
		return fmt.Errorf("buffer: object store at startup: %s: %w", what, err)
	}
	return nil
}

// loadStoreCatalog installs the store's newest catalog as the local
// catalog file when it is newer (or the local file is missing), and loads
// it.
func (b *WriteBuffer) loadStoreCatalog(ctx context.Context) error {
	local := b.cat.Version()
	name, err := b.persist.store.LoadCatalog(ctx, b.catPath, local)
	if err != nil || name == "" {
		return err
	}
	cat, err := catalog.LoadFS(b.cfg.WALFS, b.catPath, b.cfg.Limits)
	if err != nil {
		return fmt.Errorf("buffer: catalog %s from the object store: %w", name, err)
	}
	b.log.Info("loaded a newer catalog from the object store", "object", name, "version", cat.Version(), "local_version", local)
	b.cat = cat
	return nil
}

// unpersistedWAL is the ids of the WAL files of segments not persisted:
// the replay persists them again.
func (b *WriteBuffer) unpersistedWAL(segs []persist.Segment) (map[uint64]bool, error) {
	ids, err := wal.ListSegments(b.cfg.WALFS, b.walDir)
	if err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	persisted := make(map[uint64]bool, len(segs))
	for _, s := range segs {
		persisted[s.ID] = true
	}
	out := map[uint64]bool{}
	for _, id := range ids {
		if !persisted[id] {
			out[id] = true
		}
	}
	return out, nil
}

// removePersistedWAL deletes the WAL files of persisted segments: a crash
// after the segment file was written but before its WAL file was deleted.
func (b *WriteBuffer) removePersistedWAL(segs []persist.Segment) error {
	ids, err := wal.ListSegments(b.cfg.WALFS, b.walDir)
	if err != nil {
		return fmt.Errorf("buffer: %w", err)
	}
	persisted := map[uint64]*persist.Segment{}
	for i := range segs {
		persisted[segs[i].ID] = &segs[i]
	}
	removed := 0
	for _, id := range ids {
		if persisted[id] == nil {
			continue
		}
		if w := persisted[id].WriterID; w != "" && w != b.persist.store.WriterID() {
			// Another server persisted a segment of this id: its WAL file
			// here holds rows of ours that the store does not have.
			return fmt.Errorf("buffer: segment %d is in the object store as persisted by data dir %s, but this data dir (%s) has an unpersisted WAL file %s for the same segment id: two servers share one object store location; refusing to delete the WAL file. Give each server its own --gcs-prefix or bucket, then restart",
				id, w, b.persist.store.WriterID(), walFileName(b.walDir, id))
		}
		if err := b.cfg.WALFS.Remove(walFileName(b.walDir, id)); err != nil {
			return fmt.Errorf("buffer: removing WAL file of persisted segment %d: %w", id, err)
		}
		b.log.Info("removed the WAL file of a segment persisted before a restart", "segment", id)
		removed++
	}
	if removed > 0 {
		if err := b.cfg.WALFS.SyncDir(b.walDir); err != nil {
			return fmt.Errorf("buffer: syncing WAL dir: %w", err)
		}
	}
	return nil
}

func (b *WriteBuffer) startPersister() {
	b.persist.done = make(chan struct{})
	b.persist.drain = make(chan struct{})
	if b.persist.store == nil {
		close(b.persist.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.persist.cancel = cancel
	go b.persister(ctx)
	b.kickPersister()
}

// stopPersister cancels a persist in progress and waits for the persister.
// An interrupted persist leaves the segment's WAL file; its uploads become
// orphans, removed at the next start.
func (b *WriteBuffer) stopPersister() {
	if b.persist.cancel != nil {
		b.persist.cancel()
	}
	if b.persist.done != nil && !b.persist.abandoned.Load() {
		<-b.persist.done
	}
}

func (b *WriteBuffer) kickPersister() {
	select {
	case b.persist.notify <- struct{}{}:
	default:
	}
}

func (b *WriteBuffer) persister(ctx context.Context) {
	defer close(b.persist.done)
	tick := time.NewTicker(b.cfg.SweepInterval)
	defer tick.Stop()
	var compactTick <-chan time.Time
	if b.cfg.CompactionInterval > 0 {
		t := time.NewTicker(b.cfg.CompactionInterval)
		defer t.Stop()
		compactTick = t.C
	}
	// What came due while the persister was busy: a compaction round
	// (its tick, kickCompaction) and a sweep (its tick, kickSweep).
	var compactDue, sweepDue bool
	noteDue := func() {
		for {
			select {
			case <-compactTick:
				compactDue = true
			case <-b.persist.compactNow:
				compactDue = true
			case <-tick.C:
				sweepDue = true
			case <-b.persist.sweep:
				sweepDue = true
			default:
				return
			}
		}
	}
	for {
		if b.draining() {
			return
		}
		noteDue()
		seg := b.nextToPersist()
		if seg == nil && b.cat.Version() > b.persist.store.CatalogVersion() {
			if _, err := b.persistCatalog(ctx, b.cat.Version()); err != nil {
				return
			}
			continue
		}
		// A segment waits: persist it, unless a compaction or a sweep is
		// due and memory does not press. Under writes that never let the
		// persister rest, one always waits, and they would never run
		// (compact_pace.go); a round started now lends the segment's
		// time to the compaction by turns.
		if seg != nil && (!compactDue && !sweepDue || b.memoryPressing()) {
			if err := b.persistTimed(ctx, seg); err != nil {
				return // only cancellation ends retries
			}
			continue
		}
		if seg == nil && !compactDue && !sweepDue {
			select {
			case <-ctx.Done():
				return
			case <-b.persist.drain:
				return
			case <-b.persist.notify:
				continue
			case <-tick.C:
				sweepDue = true
			case <-b.persist.sweep:
				sweepDue = true
			case <-compactTick:
				compactDue = true
			case <-b.persist.compactNow:
				compactDue = true
			}
		}
		if compactDue {
			compactDue, sweepDue = false, true // a round's inputs are the sweep's
			if seg == nil {
				b.persist.turn.left = 0 // no turn to share: a segment that closes now is persisted at the next step
			}
			if err := b.compact(ctx, true); err != nil {
				return // only cancellation ends retries
			}
		}
		if sweepDue {
			sweepDue = false
			if err := b.sweep(ctx); err != nil {
				return // only cancellation ends retries
			}
		}
	}
}

func (b *WriteBuffer) nextToPersist() *Segment {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.mu.closed {
		if !s.persisted {
			if b.holdsPersistLocked(s.id) {
				return nil // replace.go
			}
			return s
		}
	}
	return nil
}

// retry calls fn until it succeeds or ctx ends, sleeping between attempts
// with capped exponential backoff and jitter, and logging each failure.
func (b *WriteBuffer) retry(ctx context.Context, what string, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if errors.Is(err, errPartDropped) {
			return err // not a failure: nothing left to do
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.notePersistFailure(what, attempt, err)
		if b.draining() {
			b.log.Warn("persist step failed; not retried: shutting down", "step", what, "attempt", attempt, "err", err)
			return fmt.Errorf("%w: %s: %w", errDraining, what, err)
		}
		b.log.Warn("persist step failed; retrying", "step", what, "attempt", attempt, "err", err)
		d := b.cfg.PersistRetryMin << min(attempt-1, 30)
		if d > b.cfg.PersistRetryMax || d <= 0 {
			d = b.cfg.PersistRetryMax
		}
		d = d/2 + rand.N(d/2+1) // equal jitter
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-b.persist.drain:
			t.Stop()
			return fmt.Errorf("%w: %s: %w", errDraining, what, err)
		case <-t.C:
		}
	}
}

// attempt runs one attempt of an object store request that moves size
// bytes under PersistAttemptTimeout (plus a second per MiB): a store that
// stops answering fails the attempt, which is counted, logged and retried,
// instead of hanging the persist unseen.
func (b *WriteBuffer) attempt(ctx context.Context, size int64, fn func(context.Context) error) error {
	d := b.cfg.PersistAttemptTimeout + time.Duration(size>>20)*time.Second
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := fn(actx)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("the object store did not answer within %s (--persist-attempt-timeout, plus 1s per MiB): %w", d, err)
		b.persist.errMu.Lock()
		if b.persist.storeErr != nil && !b.persist.storeErrAt.Before(start) {
			err = fmt.Errorf("%w; the storage client retried meanwhile, last: %v", err, b.persist.storeErr)
		}
		b.persist.errMu.Unlock()
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, objstore.ErrExists) {
		b.countStoreFailure("put", err)
	}
	return err
}

// NoteStoreAttemptFailure records a failed request that the storage client
// retries by itself (objstore.GCSConfig.OnAttemptError): counted, logged
// (rate-limited) and, since it says why persistence is slow, reported
// like a failed persist step (PersistError, the buffer-full refusal,
// system.segments), until a segment persists.
func (b *WriteBuffer) NoteStoreAttemptFailure(op string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	b.countStoreFailure(op, err)
	b.persist.errMu.Lock()
	defer b.persist.errMu.Unlock()
	if b.persist.lastErr == nil {
		b.persist.since = time.Now()
	}
	// A request cut by a deadline (ours, the attempt's) says nothing of
	// the store: it must not hide the store's last answer (a 503), which
	// is what an operator needs to read in /readyz and the log.
	if errors.Is(err, context.DeadlineExceeded) && b.persist.lastErr != nil {
		return
	}
	b.persist.lastErr = fmt.Errorf("object store %s (retried by the storage client): %w", op, err)
	b.persist.storeErr, b.persist.storeErrAt = err, time.Now()
}

func (b *WriteBuffer) countStoreFailure(op string, err error) {
	class := objstore.ErrorClass(err)
	if b.metrics != nil {
		b.metrics.storeFailures.WithLabelValues(op, class).Inc()
	}
	if n, ok := b.persist.storeLogs.Allow(class); ok {
		b.log.Warn("object store request failed; it is retried", "op", op, "class", class, "err", err, "suppressed_since_last", n)
	}
}

// PersistHealth says whether persistence keeps up: the closed segments
// waiting, and while attempts fail, since when, how many, and the last
// error.
type PersistHealth struct {
	Waiting    int    // closed segments not yet persisted
	Persisting uint64 // the segment being persisted, 0 if none
	Failures   int
	Since      time.Time
	LastErr    error
}

// PersistHealth is the state of persistence now.
func (b *WriteBuffer) PersistHealth() PersistHealth {
	var h PersistHealth
	b.mu.Lock()
	for _, s := range b.mu.closed {
		if !s.persisted {
			h.Waiting++
		}
	}
	b.mu.Unlock()
	h.Persisting = b.persist.current.Load()
	b.persist.errMu.Lock()
	defer b.persist.errMu.Unlock()
	h.Failures, h.Since, h.LastErr = b.persist.failures, b.persist.since, b.persist.lastErr
	return h
}

func (b *WriteBuffer) notePersistFailure(what string, attempt int, err error) {
	b.persist.errMu.Lock()
	defer b.persist.errMu.Unlock()
	if b.persist.failures == 0 && b.persist.lastErr == nil {
		b.persist.since = time.Now()
	}
	b.persist.failures++
	b.persist.lastErr = fmt.Errorf("%s (attempt %d): %w", what, attempt, err)
	if b.metrics != nil { // nil while Open loads the store
		b.metrics.persistFailures.Inc()
	}
}

func (b *WriteBuffer) notePersistOK() {
	b.persist.errMu.Lock()
	defer b.persist.errMu.Unlock()
	b.persist.failures, b.persist.lastErr = 0, nil
}

// PersistError returns the error of the last failed persist step, nil if
// the last segment persisted since then, with the count of failed attempts.
func (b *WriteBuffer) PersistError() (error, int) {
	b.persist.errMu.Lock()
	defer b.persist.errMu.Unlock()
	return b.persist.lastErr, b.persist.failures
}

// fullErrorLocked is the error of a write refused at MemLimit: it says why
// memory is not coming back.
func (b *WriteBuffer) fullErrorLocked(used int64) error {
	pending := 0
	for _, s := range b.mu.closed {
		if !s.persisted {
			pending++
		}
	}
	var why string
	lastErr, failures := b.PersistError()
	switch {
	case b.persist.store == nil:
		why = "persistence to an object store is not configured, so closed segments stay in memory; restart with a larger limit"
	case lastErr != nil:
		b.persist.errMu.Lock()
		since := b.persist.since
		b.persist.errMu.Unlock()
		why = fmt.Sprintf("persisting closed segments to the object store is failing (%d segments waiting, %d failed attempts since %s; last error: %v); "+
			"writes resume once it succeeds", pending, failures, since.UTC().Format(time.RFC3339), lastErr)
	case !b.cfg.ReleasePersisted && pending == 0:
		why = "closed segments are persisted but stay in memory (release of persisted segments is off)"
	case b.replaceHoldLocked() != "":
		why = b.replaceHoldLocked()
	default:
		why = fmt.Sprintf("%d closed segments are being persisted; writes resume as they leave memory", pending)
	}
	return fmt.Errorf("%w: %d bytes buffered reach --buffer-mem-limit (%d bytes); %s", ErrBufferFull, used, b.cfg.MemLimit, why)
}

// persistSegment persists seg (persist/doc.go): catalog, Parquet files,
// segment file, then its WAL file is deleted. Every step is retried until
// it succeeds; only ctx (Close) stops it, with the error of ctx.
func (b *WriteBuffer) persistSegment(ctx context.Context, seg *Segment) error {
	start := time.Now()
	b.persist.current.Store(seg.id)
	defer b.persist.current.Store(0)
	// A reference of its own: a persister that Close gave up on
	// (FinishPersist) may still be reading the segment's table buffers
	// when Close lets go of the buffer's reference; the memory goes with
	// the last of the two.
	b.mu.Lock()
	released := b.mu.released
	if !released {
		seg.refs.Add(1)
	}
	b.mu.Unlock()
	if released {
		return fmt.Errorf("%w: segment %d was not persisted", ErrClosed, seg.id)
	}
	defer seg.unref()

	// 1. The catalog, if the store lacks this version. The snapshot comes
	// first: the file saved next is at least as new, so it describes every
	// column the Parquet files have.
	snap := b.cat.Snapshot()
	catVersion, err := b.persistCatalog(ctx, snap.Version())
	if err != nil {
		return err
	}

	// 2. The Parquet files, PersistConcurrency at a time.
	var tasks []persist.Part
	defer func() {
		for _, t := range tasks {
			for _, c := range t.Chunks {
				c.Rec.Release()
			}
		}
	}()
	for _, k := range seg.Tables() {
		if snap.Hidden(k.Database, k.Table, seg.id) {
			continue // dropped (ddl.go)
		}
		tbl, ok := snap.Table(k.Database, k.Table)
		if !ok {
			return fmt.Errorf("buffer: table %s.%s of segment %d is not in the catalog", k.Database, k.Table, seg.id)
		}
		cutoff := b.cutoffAt(snap, k.Database, b.cfg.Now())
		for day, chunks := range seg.tableBuffer(k, false).partitionChunks() {
			if expiredChunks(chunks, cutoff) {
				for _, c := range chunks {
					c.Rec.Release()
				}
				continue // retention.go
			}
			tasks = append(tasks, persist.Part{Segment: seg.id, Database: k.Database, Table: k.Table, Day: day, Schema: tbl,
				Chunks: persistChunks(chunks)})
		}
	}
	// Every file this persist may leave in the store goes in the journal
	// of unlisted objects first (persist/unlisted.go), with those an
	// earlier attempt noted (an interrupted persist of the segment, kept
	// at startup for this retry): settleFiles deletes the ones it does
	// not write.
	journaled := b.persist.store.UnlistedOf(seg.id)
	for _, t := range tasks {
		journaled = append(journaled, t.Object())
	}
	slices.Sort(journaled)
	journaled = slices.Compact(journaled)
	if err := b.retry(ctx, "noting the files of segment "+fmt.Sprint(seg.id)+" in the journal of unlisted objects", func() error {
		return b.persist.store.NoteUnlisted(journaled...)
	}); err != nil {
		return err
	}
	files := make([]persist.File, len(tasks))
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		skipped  atomic.Bool // a part whose table was dropped during the persist
		next     = make(chan int)
	)
	for range min(b.cfg.PersistConcurrency, len(tasks)) {
		wg.Go(func() {
			for i := range next {
				if failed.Load() {
					continue // the segment cannot commit in this attempt
				}
				f, err := b.persistFile(ctx, tasks[i])
				if errors.Is(err, errPartDropped) {
					skipped.Store(true)
					continue // dropped meanwhile: no file, and no failure
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					continue
				}
				files[i] = f
			}
		})
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	files = slices.DeleteFunc(files, func(f persist.File) bool { return f.Path == "" }) // skipped
	slices.SortFunc(files, func(x, y persist.File) int {
		switch {
		case x.Path < y.Path:
			return -1
		case x.Path > y.Path:
			return 1
		}
		return 0
	})

	// 3. The segment file: the commit point. Never once cancelled: Close
	// may have released the segment's memory under a persist it does not
	// wait for (FinishPersist), and what it read since is not the segment.
	if err := ctx.Err(); err != nil {
		return err
	}
	if skipped.Load() {
		// The segment file leaves out rows of tables dropped since step 1:
		// the catalog it names must be one where they are dropped, or a
		// data dir started from the store would show those tables with
		// rows missing.
		if catVersion, err = b.persistCatalog(ctx, b.cat.Snapshot().Version()); err != nil {
			return err
		}
	}
	b.mu.Lock()
	ps := persist.Segment{ID: seg.id, CatalogVersion: catVersion, FirstSequence: seg.firstSeq, LastSequence: seg.lastSeq, Files: files,
		WriterID: b.persist.store.WriterID()}
	b.mu.Unlock()
	for _, f := range files {
		ps.Rows += f.Rows
	}
	data, err := persist.EncodeSegmentFile(ps)
	if err != nil {
		return fmt.Errorf("buffer: encoding segment file: %w", err)
	}
	name := persist.SegmentObject(seg.id)
	if err := b.retry(ctx, "writing "+name, func() error {
		return b.attempt(ctx, int64(len(data)), func(ctx context.Context) error {
			return b.persist.store.PutSegmentFile(ctx, seg.id, data)
		})
	}); err != nil {
		return err
	}
	b.mu.Lock()
	seg.persisted = true
	b.mu.persisted.Add(ps)
	b.markStaleLocked()
	// A drop while the segment was being written.
	b.forgetDroppedLocked()
	b.mu.Unlock()

	// 4. Only now the WAL file, shrunk in steps first (wal.RemovePaced):
	// removed at once, its freed blocks would hold up the fsyncs of the
	// writes going on meanwhile.
	if err := b.retry(ctx, "deleting WAL file "+seg.walFile, func() error {
		if err := wal.RemovePaced(ctx, b.cfg.WALFS, seg.walFile, b.cfg.WALRemovePace); err != nil {
			return err
		}
		return b.cfg.WALFS.SyncDir(b.walDir)
	}); err != nil {
		return err
	}
	b.settleFiles(ctx, seg.id, journaled, files)
	b.notePersistOK()
	var size int64
	for _, f := range files {
		size += f.Size
	}
	b.metrics.persisted(ps.Rows, size, len(files), time.Since(start))
	b.log.Info("segment persisted", "segment", seg.id, "files", len(files), "rows", ps.Rows,
		"bytes", size, "catalog_version", catVersion, "duration", time.Since(start))
	if b.cfg.ReleasePersisted {
		b.dropSegment(seg)
	}
	return nil
}

// persistCatalog uploads the catalog file (at least at version atLeast)
// unless the store has it, retrying until done, and returns the version
// the store has. Besides step 1 of a segment's persist, the persister runs
// it alone when the catalog changed with no segment to persist (a token
// made or revoked), so that the store's newest catalog, which a fresh data
// dir starts from, never lags behind a revocation for long.
func (b *WriteBuffer) persistCatalog(ctx context.Context, atLeast uint64) (uint64, error) {
	var catVersion uint64
	err := b.retry(ctx, "persisting catalog", func() error {
		data, v, err := b.catalogFile(atLeast)
		if err != nil {
			return err
		}
		catVersion = v
		if stored := b.persist.store.CatalogVersion(); v <= stored {
			catVersion = stored
			return nil
		}
		return b.attempt(ctx, int64(len(data)), func(ctx context.Context) error {
			return b.persist.store.PutCatalog(ctx, v, data)
		})
	})
	return catVersion, err
}

// catalogFile returns the catalog file's bytes and version, saving the
// catalog first so that the file is at least at version atLeast. (The
// catalog package keeps its encoder to itself: its file is its encoding.)
func (b *WriteBuffer) catalogFile(atLeast uint64) ([]byte, uint64, error) {
	if err := b.cat.Save(b.catPath); err != nil {
		return nil, 0, err
	}
	data, err := os.ReadFile(b.catPath)
	if err != nil {
		return nil, 0, err
	}
	var head struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, 0, fmt.Errorf("reading back %s: %w", b.catPath, err)
	}
	if head.Version < atLeast {
		return nil, 0, fmt.Errorf("%s holds catalog version %d, older than %d", b.catPath, head.Version, atLeast)
	}
	return data, head.Version, nil
}

// persistFile writes one partition as Parquet into a temporary file, then
// uploads it; each retried until done.
func (b *WriteBuffer) persistFile(ctx context.Context, p persist.Part) (persist.File, error) {
	name := p.Object()
	// A table dropped while its segment persists (DROP TABLE, DROP SCHEMA,
	// a replace) is not written on: its rows would be deleted as soon as
	// the segment commits, and a large one would hold the segment, and so
	// its memory, for as long as the encoding takes.
	dropped := func() error {
		if b.cat.Snapshot().Hidden(p.Database, p.Table, p.Segment) {
			return fmt.Errorf("%w: %s.%s", errPartDropped, p.Database, p.Table)
		}
		return nil
	}
	if err := dropped(); err != nil {
		return persist.File{}, err
	}
	p.Pace = dropped
	var tmp *persist.TempFile
	if err := b.retry(ctx, "writing "+name, func() (err error) {
		// The encoding allocates and frees many short-lived buffers
		// (gathered batches, the Parquet writer's pages): recycled, they
		// are not garbage. Closed last, once the encoding has freed them.
		mem := NewRecycler(b.mem)
		defer mem.Close()
		tmp, err = b.persist.store.WriteTemp(ctx, p, mem)
		return err
	}); err != nil {
		return persist.File{}, err
	}
	defer tmp.Remove()
	if err := b.retry(ctx, "uploading "+name, func() error {
		if err := dropped(); err != nil {
			return err
		}
		return b.attempt(ctx, tmp.Size(), func(ctx context.Context) error {
			return b.persist.store.UploadParquet(ctx, tmp)
		})
	}); err != nil {
		return persist.File{}, err
	}
	return tmp.File(), nil
}

// persistChunks are chunks as package persist takes them.
func persistChunks(chunks []Chunk) []persist.Chunk {
	out := make([]persist.Chunk, len(chunks))
	for i, c := range chunks {
		out[i] = persist.Chunk{Rec: c.Rec, MinTime: c.MinTime, MaxTime: c.MaxTime}
	}
	return out
}

// partitionChunks returns the table's chunks by partition day, retained.
func (t *tableBuffer) partitionChunks() map[int64][]Chunk {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int64][]Chunk, len(t.mu.parts))
	for d, p := range t.mu.parts {
		var cs []Chunk
		for _, c := range p.sealed {
			c.Rec.Retain()
			cs = append(cs, c)
		}
		if p.open != nil && p.open.n > 0 {
			cs = append(cs, p.open.chunk(false))
		}
		if len(cs) > 0 {
			out[d] = cs
		}
	}
	return out
}

// dropSegment takes a persisted segment out of the buffer; its memory goes
// once no View holds it.
func (b *WriteBuffer) dropSegment(seg *Segment) {
	b.mu.Lock()
	n := len(b.mu.closed)
	b.mu.closed = slices.DeleteFunc(b.mu.closed, func(s *Segment) bool { return s == seg })
	// After Close the buffer's reference is gone already (releaseUnread):
	// a persister Close gave up on must not drop it a second time, under
	// a View that still reads the segment.
	dropped := len(b.mu.closed) < n && !b.mu.released
	if dropped {
		b.markStaleLocked()
		b.roomLocked()
	}
	b.mu.Unlock()
	if dropped {
		seg.unref() // the buffer's reference
	}
}

// View is what a query reads: buffered segments and persisted ones, taken
// at one instant so that every row is in exactly one of them. A segment
// that is both buffered and persisted (ReleasePersisted off, or not yet
// dropped) is in Buffered only. Release must be called once the query no
// longer reads the buffered segments' chunks.
type View struct {
	// Buffered are the open and closed segments in memory, in id order.
	Buffered []*Segment
	// Persisted are the persisted segments not in Buffered, in id order;
	// their files are in Store().
	Persisted []persist.Segment

	b    *WriteBuffer
	st   *viewState        // what it was taken from (viewstate.go)
	cat  *catalog.Snapshot // as the View was taken: what was dropped (ddl.go)
	now  time.Time         // when it was taken: what expired (retention.go)
	once sync.Once
}

// View takes a View. Its buffered segments stay in memory until Release.
// It takes no lock (viewstate.go): a write's fsync or a rollover does not
// delay it. Buffered and Persisted are shared with other Views: read
// them, do not modify them.
func (b *WriteBuffer) View() *View {
	var st *viewState
	for {
		st = b.viewState.Load()
		if st.tryRef() {
			break
		}
	}
	// The catalog the segments were published with (viewState.cat): the
	// two are of one instant.
	return &View{b: b, st: st, cat: st.cat, now: b.cfg.Now(), Buffered: st.segs, Persisted: st.persisted}
}

// Share is another View of the same instant, with its own Release; v
// must not be released yet.
func (v *View) Share() *View {
	v.st.refs.Add(1)
	return &View{b: v.b, st: v.st, cat: v.cat, now: v.now, Buffered: v.Buffered, Persisted: v.Persisted}
}

// Release lets the buffer free the segments of the view. Idempotent.
func (v *View) Release() {
	v.once.Do(func() { v.st.unref(v.b) })
}

// Persisted returns every persisted segment, in id order, including those
// still buffered. Queries should use View instead.
func (b *WriteBuffer) Persisted() []persist.Segment {
	return b.mu.persisted.Segments()
}

// Store is the object store of persisted files, nil if none.
func (b *WriteBuffer) Store() objstore.Store {
	if b.persist.store == nil {
		return nil
	}
	return b.persist.store.Objects()
}

// noteSequence records a WAL sequence of the segment; under
// WriteBuffer.mu, or during replay.
func (s *Segment) noteSequence(seq uint64) {
	if s.firstSeq == 0 {
		s.firstSeq = seq
	}
	s.lastSeq = seq
}

// settleFiles ends the journal entries of segment id's persist, once its
// segment file is stored: the files written are listed now, and those
// journaled but not written (an interrupted persist's whose rows were
// dropped or expired since, or a part whose table was dropped while the
// segment persisted, whose upload may have landed) are deleted. A failure
// is logged; their names stay in the journal, and the next startup
// deletes them.
func (b *WriteBuffer) settleFiles(ctx context.Context, id uint64, journaled []string, written []persist.File) {
	names := make([]string, len(written))
	for i, f := range written {
		names[i] = f.Path
	}
	settled := slices.Clone(names)
	for _, name := range journaled {
		if slices.Contains(names, name) {
			continue
		}
		if err := b.persist.store.DeleteFile(ctx, name); err != nil {
			b.log.Warn("deleting a file of a persist that its segment file does not list failed; the next start deletes it", "object", name, "err", err)
			continue
		}
		settled = append(settled, name)
		b.log.Debug("deleted a file of a persist that its segment file does not list", "segment", id, "object", name)
	}
	b.persist.store.SettleUnlisted(settled...)
}
