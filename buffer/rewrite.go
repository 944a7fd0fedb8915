package buffer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A rewrite replaces some of one table's persisted files by files that
// hold only some of their rows, all at once: a DELETE of rows that are
// persisted (query/delete.go). It streams the table a file at a time, so
// a table far larger than memory can be deleted from, and it refuses no
// write while it runs. Its steps:
//
//   - BeginRewrite rolls the open segment over if it holds rows of the
//     table, and waits until every segment before the new one that holds
//     rows of the table is persisted and out of memory: from then on the
//     rows written before the rewrite began are all in persisted files.
//     Rows written after it are in later segments, which the rewrite does
//     not touch (the DELETE is of the rows it found). It lets a
//     compaction round that an earlier rewrite made skip run first
//     (compact_turn.go). Then it takes WriteBuffer.rewriting (so no
//     compaction merges the files it reads, nor another rewrite replaces
//     them) and a View: the files of the table in that View are the
//     rewrite's Sources, read through it.
//   - Replace writes and uploads the file that replaces one source, with
//     the rows of it that stay (persist/rewrite.go); none when none stays.
//   - Commit stores one compaction file (persist/compaction.go) listing
//     the sources replaced and their new files: the commit point, after
//     which startup applies it as any compaction. Then, in one critical
//     section of mu, the replaced files leave the Index and the new ones
//     join it (a View has either) and the table's last-value cache stops
//     answering; the cache is filled again from a View taken after.
//   - Abort (or a failed Replace) deletes what was uploaded; nothing is
//     committed.
//
// A drop or a replace of the table while it runs hides the rewrite's
// files as it hides the files they replace (the compaction listing's ID
// is the newest segment its rows come from), and the sweep deletes them.

// ErrNoRewrite: this buffer cannot rewrite persisted files (it has no
// object store, or keeps persisted segments in memory); the caller uses
// another way.
var ErrNoRewrite = errors.New("buffer: persisted files cannot be rewritten by this buffer")

// RewriteSource is one persisted file of the table a rewrite may replace.
type RewriteSource struct {
	File persist.File
	// Segment and MinSegment are the newest and oldest segments its rows
	// come from (its listing's).
	Segment, MinSegment uint64
}

// Rewrite is a rewrite in progress: Replace the sources that change,
// then Commit; Abort in any case (a no-op after Commit).
type Rewrite struct {
	b         *WriteBuffer
	db, table string
	tbl       *catalog.Table
	view      *View
	gen       uint64
	sources   []RewriteSource

	replaced       []string
	files          []persist.File
	minSeg, maxSeg uint64
	committing     bool // a commit was attempted: its outcome may be unknown
	over           bool
}

// BeginRewrite begins a rewrite of db.table's persisted files (see
// above). It waits, within ctx, for the table's buffered rows to be
// persisted.
func (b *WriteBuffer) BeginRewrite(ctx context.Context, db, table string) (*Rewrite, error) {
	if b.persist.store == nil || !b.cfg.ReleasePersisted {
		return nil, ErrNoRewrite
	}
	b.mu.Lock()
	if err := b.ddlAllowedLocked(); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	if _, ok := b.cat.Snapshot().Table(db, table); !ok {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: database %q table %q", catalog.ErrTableNotFound, db, table)
	}
	if b.mu.open.HasTable(db, table) {
		if err := b.rollLocked(b.cfg.Now(), fmt.Sprintf("rewrite of table %s.%s", db, table)); err != nil {
			b.mu.Unlock()
			return nil, err
		}
	}
	upTo := b.mu.open.id - 1
	b.mu.Unlock()
	if err := b.waitPersisted(ctx, db, table, upTo); err != nil {
		return nil, err
	}
	if err := b.waitCompactionTurn(ctx, db, table); err != nil {
		return nil, err
	}
	select {
	case b.rewriting <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("buffer: rewrite of %s.%s: waiting for the compaction or rewrite in progress: %w", db, table, ctx.Err())
	}
	v := b.View()
	tbl, ok := v.Catalog().Table(db, table)
	if !ok {
		v.Release()
		b.releaseRewriting()
		return nil, fmt.Errorf("%w: database %q table %q (dropped meanwhile)", catalog.ErrTableNotFound, db, table)
	}
	r := &Rewrite{b: b, db: db, table: table, tbl: tbl, view: v, gen: b.persist.store.NextGeneration(), minSeg: math.MaxUint64}
	for _, s := range v.Persisted {
		if v.cat.Hidden(db, table, s.ID) {
			continue
		}
		minSeg := s.ID
		if s.Compaction != nil {
			minSeg = s.Compaction.MinSegment
		}
		for _, f := range s.Files {
			if f.Database == db && f.Table == table {
				r.sources = append(r.sources, RewriteSource{File: f, Segment: s.ID, MinSegment: minSeg})
			}
		}
	}
	return r, nil
}

// waitPersisted waits until no segment up to upTo that holds rows of
// db.table is in memory.
func (b *WriteBuffer) waitPersisted(ctx context.Context, db, table string, upTo uint64) error {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b.mu.Lock()
		pending := 0
		for _, s := range b.mu.closed {
			if s.id <= upTo && s.HasTable(db, table) {
				pending++
			}
		}
		ch := b.published
		b.mu.Unlock()
		if pending == 0 {
			if d := time.Since(start); d > time.Second {
				b.log.Info("rewrite: the table's buffered rows are persisted", "database", db, "table", table, "waited", d.Round(time.Millisecond))
			}
			return nil
		}
		if last, n := b.PersistError(); last != nil && n >= rewriteMaxPersistFailures {
			return fmt.Errorf("%w: a rewrite of %s.%s needs its buffered rows persisted first, and persisting failed %d times in a row (the last: %v); retry once the object store is back",
				ErrPersistFailing, db, table, n, last)
		}
		select {
		case <-ch:
		case <-tick.C: // a persist failure publishes nothing
		case <-b.persist.drain:
			return fmt.Errorf("%w: a rewrite of %s.%s waits for its buffered rows to be persisted", ErrClosed, db, table)
		case <-b.stopc:
			return fmt.Errorf("%w: a rewrite of %s.%s waits for its buffered rows to be persisted", ErrClosed, db, table)
		case <-ctx.Done():
			return fmt.Errorf("buffer: rewrite of %s.%s: waiting for %d segment(s) of its rows to be persisted: %w", db, table, pending, ctx.Err())
		}
	}
}

// rewriteMaxPersistFailures: a rewrite waiting for its table's rows to be
// persisted gives up after so many failed persist attempts in a row,
// rather than hold its client while the object store is down.
const rewriteMaxPersistFailures = 3

// ErrPersistFailing: work that needs rows persisted (a rewrite) gave up
// because persisting fails.
var ErrPersistFailing = errors.New("buffer: persisting fails")

// Sources are the table's persisted files, as the rewrite's View has them.
func (r *Rewrite) Sources() []RewriteSource { return r.sources }

// View is the View the sources are read through; the rewrite holds it
// until it ends (do not release it).
func (r *Rewrite) View() *View { return r.view }

// Table is the table as the View has it: the new files' columns.
func (r *Rewrite) Table() *catalog.Table { return r.tbl }

// Replace writes the file that replaces src, with chunks (the rows of src
// that stay, in the table's column types; none: src is replaced by no
// file). It does not take chunks' references.
func (r *Rewrite) Replace(ctx context.Context, src RewriteSource, chunks []persist.Chunk) error {
	if r.over || r.committing {
		return errors.New("buffer: rewrite is over")
	}
	st := r.b.persist.store
	var f persist.File
	var ok bool
	err := r.b.attempt(ctx, src.File.Size, func(ctx context.Context) (err error) {
		f, ok, err = st.WriteRewritten(ctx, persist.RewriteInput{Generation: r.gen, N: len(r.replaced) + 1, Schema: r.tbl,
			File: src.File, Segment: src.Segment, Chunks: chunks, Mem: r.b.mem})
		return err
	})
	if err != nil {
		return fmt.Errorf("buffer: rewriting %s: %w", src.File.Path, err)
	}
	r.replaced = append(r.replaced, src.File.Path)
	if ok {
		f.URI = st.Objects().URI(f.Path)
		r.files = append(r.files, f)
	}
	r.minSeg, r.maxSeg = min(r.minSeg, src.MinSegment), max(r.maxSeg, src.Segment)
	return nil
}

// rewriteCommitTimeout bounds the retries of a rewrite's commit once it
// started: past it (the store down), its outcome is unknown until the
// next start.
const rewriteCommitTimeout = 2 * time.Minute

// ErrRewriteUnknown: the commit of a rewrite failed after an attempt that
// may have landed; the next start tells (it applies the compaction file
// if it is there).
var ErrRewriteUnknown = errors.New("buffer: the object store did not confirm the commit, so it is not in effect now, but it may take effect at the next start; check the rows once the store is back and the server restarted, and run it again if they are still there")

// Commit commits the files replaced so far (nothing when none was), and
// ends the rewrite.
func (r *Rewrite) Commit(ctx context.Context) error {
	if r.over || r.committing {
		return errors.New("buffer: rewrite is over")
	}
	if len(r.replaced) == 0 {
		r.Abort()
		return nil
	}
	b, st := r.b, r.b.persist.store
	c := persist.Compaction{Generation: r.gen, MinSegment: r.minSeg, MaxSegment: r.maxSeg, Replaces: r.replaced, Files: r.files}
	r.committing = true
	// Once an attempt may have landed, giving up when the client goes
	// would leave the store and the Index apart: retry on its own.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rewriteCommitTimeout)
	defer cancel()
	err := b.retry(cctx, "committing the rewrite of "+r.db+"."+r.table, func() error {
		return b.attempt(cctx, 0, func(ctx context.Context) error { return st.PutCompactionFile(ctx, c) })
	})
	if err != nil {
		r.Abort()
		return fmt.Errorf("%w: %w", ErrRewriteUnknown, err)
	}
	k := TableKey{r.db, r.table}
	replaced := make(map[string]bool, len(c.Replaces))
	for _, p := range c.Replaces {
		replaced[p] = true
	}
	b.mu.Lock()
	b.removeFilesLocked("rewritten", func(_ persist.Segment, f persist.File) bool { return replaced[f.Path] })
	cache := b.lvc.retire(k)
	b.mu.persisted.Add(c.Segment())
	b.markStaleLocked()
	b.forgetDroppedLocked() // a drop while it ran
	b.mu.Unlock()
	b.lvc.refill(k, cache)
	b.kickSweep()
	var rows int64
	for _, f := range c.Files {
		rows += f.Rows
	}
	b.log.Info("rewrote persisted files", "database", r.db, "table", r.table, "generation", r.gen,
		"files_in", len(c.Replaces), "files_out", len(c.Files), "rows_out", rows)
	r.end()
	return nil
}

// Abort ends the rewrite without committing: the files it uploaded are
// deleted (unless a commit was attempted: they may be listed then).
func (r *Rewrite) Abort() {
	if r.over {
		return
	}
	if !r.committing {
		st := r.b.persist.store
		var settled []string
		for _, f := range r.files {
			if err := st.DeleteFile(context.Background(), f.Path); err != nil {
				r.b.log.Warn("deleting a file of an aborted rewrite failed; the next start deletes it", "object", f.Path, "err", err)
				continue
			}
			settled = append(settled, f.Path)
		}
		st.SettleUnlisted(settled...)
	}
	r.end()
}

func (r *Rewrite) end() {
	r.over = true
	r.view.Release()
	r.b.releaseRewriting()
}
