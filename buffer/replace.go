package buffer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/wal"
)

// A replace (ADBC ingest mode replace) makes the batches of one stream
// the whole new content of a table (catalog/replace.go gives the
// catalog's side). Its steps run under mu, ordered with writes and DDL
// as a drop is (ddl.go):
//
//   - Begin rolls the open segment over (unless it has taken no write),
//     so that every row written before is below L, the open segment then,
//     and records the replace from L in the catalog file. Readers skip the
//     table's rows from L on: they see the old table. Other writes and DDL
//     on the table are refused (catalog.ErrReplaceInProgress).
//   - The stream's batches are written as any write is (WAL, then the
//     buffer), planned against the replace's own table.
//   - Commit, once every batch is durable and buffered, saves one catalog
//     change: the old table dropped (its rows below L hidden), the new one
//     in its place. With --wal-sync none the open segment is rolled over
//     first, which syncs its WAL file: the commit never survives a power
//     loss that the rows it makes visible do not.
//   - Abort (a failed batch, a client gone) rolls the open segment over
//     and hides the replace's rows, L to the open segment; the old table
//     is as it was.
//
// A crash or a shutdown before the commit leaves the replace in the
// catalog file: Open aborts it before the WAL replay (abortInterrupted),
// which then skips its records. The persister persists no segment from L
// on while the replace runs (its rows may yet be hidden, and persisted
// files are not), so a replace keeps what is written meanwhile, of every
// table, in memory until it is over: a replace larger than what
// MemLimit leaves fails with ErrBufferFull, and aborts; so does a replace
// when any write is refused at MemLimit while it holds segments
// (shedReplacesLocked): one stream cannot keep every writer refused.

// Replace is a replace in progress. Its writes go through Submit; then
// Commit or Abort ends it (Abort after a failed Commit).
type Replace struct {
	b *WriteBuffer
	r catalog.Replacing

	mu struct {
		sync.Mutex
		inflight int   // writes submitted and not yet waited for
		failed   error // of the first write that failed
		over     bool  // committed or aborted
	}
}

// BeginReplace begins a replace of db.table. If the table does not exist,
// ifNotExists says whether the replace creates it (on commit) or fails.
func (b *WriteBuffer) BeginReplace(db, table string, ifNotExists catalog.IfNotExists) (*Replace, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return nil, err
	}
	if err := b.cat.CheckReplace(db, table, ifNotExists); err != nil {
		return nil, err // nothing to roll over for
	}
	from, err := b.rollForDropLocked(fmt.Sprintf("replace of table %s.%s", db, table))
	if err != nil {
		return nil, err
	}
	r, err := b.cat.BeginReplace(b.catPath, db, table, from, ifNotExists)
	if err != nil {
		return nil, err
	}
	b.log.Info("replace begun", "database", db, "table", table, "from_segment", from, "new_table_id", r.ID)
	rep := &Replace{b: b, r: r}
	if b.mu.replaces == nil {
		b.mu.replaces = map[*Replace]bool{}
	}
	b.mu.replaces[rep] = true
	return rep, nil
}

// Replacing is what the catalog records of the replace.
func (r *Replace) Replacing() catalog.Replacing { return r.r }

// errReplaceOver: a write submitted to a replace that has ended.
var errReplaceOver = errors.New("buffer: the replace is over")

// Submit submits a batch of the replace's new content, as
// WriteBuffer.Submit does; the PendingWrite's Wait must be called before
// Commit.
func (r *Replace) Submit(ctx context.Context, rec arrow.RecordBatch) (*PendingWrite, error) {
	r.mu.Lock()
	if r.mu.over {
		failed := r.mu.failed
		r.mu.Unlock()
		if failed != nil {
			return nil, fmt.Errorf("%w: database %q table %q: %w", errReplaceOver, r.r.Database, r.r.Table, failed)
		}
		return nil, fmt.Errorf("%w: database %q table %q", errReplaceOver, r.r.Database, r.r.Table)
	}
	r.mu.inflight++
	r.mu.Unlock()
	p, err := r.b.Submit(ctx, r.r.Database, r.r.Table, rec, catalog.WriteOptions{Replace: r.r.ID})
	if err != nil {
		r.waited(err)
		return nil, err
	}
	p.rep = r
	return p, nil
}

// waited records the end of a write of the replace.
func (r *Replace) waited(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.inflight--
	if err != nil && r.mu.failed == nil {
		r.mu.failed = err
	}
}

// Commit makes the replace's rows the table's content, at once for every
// View taken from then on. Every write submitted must have been waited
// for, successfully. On error the replace is still in progress: Abort it.
func (r *Replace) Commit() error {
	r.mu.Lock()
	over, inflight, failed := r.mu.over, r.mu.inflight, r.mu.failed
	r.mu.Unlock()
	switch {
	case over && failed != nil:
		return fmt.Errorf("%w: database %q table %q: %w", errReplaceOver, r.r.Database, r.r.Table, failed)
	case over:
		return fmt.Errorf("%w: database %q table %q", errReplaceOver, r.r.Database, r.r.Table)
	case inflight > 0:
		return fmt.Errorf("buffer: replace of %s.%s: %d writes not yet waited for", r.r.Database, r.r.Table, inflight)
	case failed != nil:
		return fmt.Errorf("buffer: replace of %s.%s: a write failed: %w", r.r.Database, r.r.Table, failed)
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return err
	}
	if b.cfg.WALSync != wal.SyncFsync {
		if _, err := b.rollForDropLocked(fmt.Sprintf("commit of the replace of table %s.%s", r.r.Database, r.r.Table)); err != nil {
			return err
		}
	}
	if err := b.cat.CommitReplace(b.catPath, r.r.Database, r.r.Table, r.r.ID); err != nil {
		return err
	}
	r.mu.Lock()
	r.mu.over = true
	r.mu.Unlock()
	delete(b.mu.replaces, r)
	b.log.Info("replace committed", "database", r.r.Database, "table", r.r.Table, "from_segment", r.r.From, "table_id", r.r.ID)
	b.forgetDroppedLocked() // the old table's persisted files
	b.kickPersister()
	return nil
}

// Abort ends the replace without a trace: its rows are hidden for good,
// the table is as it was. Idempotent; a no-op after Commit.
func (r *Replace) Abort() {
	if !r.end(nil) {
		return
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	r.abortLocked()
}

// end marks the replace over, with why (nil: ended by its stream) as the
// error its later calls get; false if it already was.
func (r *Replace) end(why error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.over {
		return false
	}
	r.mu.over = true
	if why != nil && r.mu.failed == nil {
		r.mu.failed = why
	}
	return true
}

// shedReplacesLocked aborts the replaces in progress when a write is
// refused at MemLimit while they keep segments from being persisted: one
// client's replace must not leave every other writer refused for as long
// as its stream stays open. The replace's stream gets full (the reason)
// at its next call.
func (b *WriteBuffer) shedReplacesLocked(full error) {
	if b.replaceHoldLocked() == "" {
		return
	}
	for r := range b.mu.replaces {
		why := fmt.Errorf("%w (the replace of %s.%s was aborted to let persistence free memory: what was written while it ran reached the limit; send less at once, or raise --buffer-mem-limit)",
			full, r.r.Database, r.r.Table)
		if r.end(why) {
			r.abortLocked()
		}
	}
}

// abortLocked records the abort; the replace is over already.
func (r *Replace) abortLocked() {
	b := r.b
	delete(b.mu.replaces, r)
	args := []any{"database", r.r.Database, "table", r.r.Table, "from_segment", r.r.From}
	if err := b.ddlAllowedLocked(); err != nil {
		// The catalog file still has the replace: the next start aborts it.
		b.log.Warn("replace aborted; the next start records it", append(args, "err", err)...)
		return
	}
	to, err := b.rollForDropLocked(fmt.Sprintf("abort of the replace of table %s.%s", r.r.Database, r.r.Table))
	if err == nil {
		_, err = b.cat.AbortReplace(b.catPath, r.r.Database, r.r.Table, r.r.ID, to)
	}
	if err != nil {
		// Its rows stay hidden and the table refuses writes until a
		// restart aborts it from the catalog file.
		b.log.Error("recording the abort of a replace failed; its table refuses writes until a restart, which aborts it", append(args, "err", err)...)
		return
	}
	b.log.Info("replace aborted", append(args, "to_segment", to)...)
	b.kickPersister()
}

// abortInterrupted aborts, at startup before the WAL replay, the replaces
// a crash or shutdown cut short: their rows are in segments up to the
// largest of the WAL files and persisted segments, and are hidden.
func (b *WriteBuffer) abortInterrupted() error {
	reps := b.cat.Snapshot().Replaces()
	if len(reps) == 0 {
		return nil
	}
	ids, err := wal.ListSegments(b.cfg.WALFS, b.walDir)
	if err != nil {
		return fmt.Errorf("buffer: %w", err)
	}
	to := b.maxSegID
	for _, id := range ids {
		to = max(to, id)
	}
	to++
	for _, r := range reps {
		if _, err := b.cat.AbortReplace(b.catPath, r.Database, r.Table, r.ID, to); err != nil {
			return fmt.Errorf("buffer: aborting the interrupted replace of table %s.%s: %w", r.Database, r.Table, err)
		}
		b.log.Warn("aborted a replace that the last run did not finish: the table keeps its old content",
			"database", r.Database, "table", r.Table, "from_segment", r.From, "to_segment", to)
	}
	return nil
}

// holdsPersistLocked says whether a replace in progress keeps segment id
// from being persisted.
func (b *WriteBuffer) holdsPersistLocked(id uint64) bool {
	return id >= b.cat.Snapshot().ReplacingFrom()
}

// replaceHoldLocked says which replaces keep closed segments in memory,
// for the error of a write refused at MemLimit; "" if none.
func (b *WriteBuffer) replaceHoldLocked() string {
	snap := b.cat.Snapshot()
	if snap.ReplacingFrom() == math.MaxUint64 {
		return ""
	}
	var names []string
	for _, r := range snap.Replaces() {
		names = append(names, r.Database+"."+r.Table)
	}
	return fmt.Sprintf("a replace (ADBC ingest mode replace) of %s is in progress: the segments written since it began stay in memory until it commits or aborts",
		strings.Join(names, ", "))
}
