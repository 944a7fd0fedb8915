package buffer

import (
	"context"
	"fmt"
	"sync"
)

// Compactions and rewrites (DELETEs of persisted rows) take turns.
// Both hold WriteBuffer.rewriting while they run, and a compaction round,
// which runs in the persister's goroutine, never waits for it: it skips
// its round when a rewrite holds it. Without turns, a client issuing
// DELETEs back to back would keep every table from being compacted. So a
// round that finds a rewrite in progress leaves a debt (compactTurn.owed),
// the rewrite that ends asks the persister for the round at once, and the
// next rewrite waits until that round has run (or its context ends).
type compactTurn struct {
	mu   sync.Mutex
	owed chan struct{} // closed when the round owed has run; nil if none is
}

// owe records that a compaction round was skipped for a rewrite.
func (t *compactTurn) owe() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owed == nil {
		t.owed = make(chan struct{})
	}
}

// paid records that a compaction round ran (under rewriting).
func (t *compactTurn) paid() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owed != nil {
		close(t.owed)
		t.owed = nil
	}
}

// debt is the channel closed when the round owed has run, nil if none.
func (t *compactTurn) debt() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owed
}

// kickCompaction asks the persister for a compaction round as soon as it
// is between two persists (persister).
func (b *WriteBuffer) kickCompaction() {
	select {
	case b.persist.compactNow <- struct{}{}:
	default:
	}
}

// releaseRewriting ends a rewrite's hold of rewriting, and asks for the
// compaction round it delayed, if any.
func (b *WriteBuffer) releaseRewriting() {
	<-b.rewriting
	if b.compactTurn.debt() != nil {
		b.kickCompaction()
	}
}

// waitCompactionTurn lets a compaction round that a rewrite made skip run
// before another rewrite of db.table begins.
func (b *WriteBuffer) waitCompactionTurn(ctx context.Context, db, table string) error {
	owed := b.compactTurn.debt()
	if owed == nil {
		return nil
	}
	// The rewrite that made the round skip asks for it as it ends
	// (releaseRewriting); a kick from here could make a second round,
	// which would find this rewrite holding rewriting and owe again.
	select {
	case <-owed:
		return nil
	case <-b.persist.drain:
		return fmt.Errorf("%w: a rewrite of %s.%s waits for the compaction it delayed", ErrClosed, db, table)
	case <-b.stopc:
		return fmt.Errorf("%w: a rewrite of %s.%s waits for the compaction it delayed", ErrClosed, db, table)
	case <-ctx.Done():
		return fmt.Errorf("buffer: rewrite of %s.%s: waiting for the compaction round an earlier rewrite delayed: %w", db, table, ctx.Err())
	}
}
