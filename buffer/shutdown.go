package buffer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errDraining ends a persist step that failed during a shutdown: it is not
// retried (FinishPersist).
var errDraining = errors.New("buffer: shutting down")

// ErrPersistInterrupted: FinishPersist's context ended before the persist
// in progress reached its commit point. Nothing is lost: the segment's WAL
// file stays, and the next start persists the segment again.
var ErrPersistInterrupted = errors.New("buffer: persist interrupted by the shutdown")

// draining says whether FinishPersist was called.
func (b *WriteBuffer) draining() bool {
	select {
	case <-b.persist.drain:
		return true
	default:
		return false
	}
}

// persistStopWait is how long FinishPersist waits for a cancelled
// persister to stop before it leaves it to the process exit.
const persistStopWait = 100 * time.Millisecond

// FinishPersist is the first step of a graceful shutdown, before Close:
// the persister starts no new segment (nor catalog upload) and retries no
// failed attempt, but the persist in progress runs on to its commit point
// (its segment file written and its WAL file deleted), so that a server
// stopped while it persists a large segment, and started again, does not
// redo it from the start every time. When ctx ends first, the persist is
// cancelled (it stops at its next step: an upload is cancelled, an
// encoding fails at its next write) and ErrPersistInterrupted returned.
// A persister that does not stop within persistStopWait (an encoding
// between two writes) is left running: Close then waits for it no more
// and leaves the data dir locked until the process exits. That is safe:
// it holds a reference on the segment it persists and on the chunks it
// reads, and commits nothing once cancelled.
//
// On restart an interrupted persist is redone from the beginning: the
// Parquet files it uploaded are not listed by any segment file, so Open
// deletes them as orphans, and the segment, replayed from its WAL file,
// is persisted again.
func (b *WriteBuffer) FinishPersist(ctx context.Context) error {
	if b.persist.done == nil {
		return nil
	}
	b.persist.drainOnce.Do(func() { close(b.persist.drain) })
	seg := b.persist.current.Load()
	if seg != 0 {
		b.log.Info("shutting down: letting the persist of the segment in progress finish", "segment", seg)
	}
	start := time.Now()
	select {
	case <-b.persist.done:
		if seg != 0 {
			b.log.Info("the persist in progress is over", "segment", seg, "waited", time.Since(start).Round(time.Millisecond))
		}
		return nil
	case <-ctx.Done():
	}
	seg = b.persist.current.Load()
	if b.persist.cancel != nil {
		b.persist.cancel()
	}
	t := time.NewTimer(persistStopWait)
	defer t.Stop()
	stopped := true
	select {
	case <-b.persist.done:
	case <-t.C:
		stopped = false
		b.persist.abandoned.Store(true)
	}
	if seg == 0 && stopped {
		return nil // it was between two segments: nothing was cut short
	}
	b.log.Warn("the persist in progress did not finish in time; it is cancelled, its WAL file kept, and the next start persists the segment again from the beginning",
		"segment", seg, "waited", time.Since(start).Round(time.Millisecond), "persister_stopped", stopped)
	return fmt.Errorf("%w: segment %d: %w", ErrPersistInterrupted, seg, context.Cause(ctx))
}

// WaitReaders waits until no View holds a buffered segment (every query,
// scan and plain Flight read over buffered data has released its View), or
// ctx ends. A shutdown calls it before Close: Close frees the memory only
// of segments that no View holds.
func (b *WriteBuffer) WaitReaders(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n := b.heldSegments()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("buffer: %d buffered segments are still read (a View is held): %w", n, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// heldSegments counts the segments some View holds.
func (b *WriteBuffer) heldSegments() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := map[*Segment]bool{}
	for _, st := range b.liveStatesLocked() {
		for _, s := range st.segs {
			held[s] = true
		}
	}
	n := 0
	for _, s := range append(b.mu.closed[:len(b.mu.closed):len(b.mu.closed)], b.mu.open) {
		if s != nil && held[s] {
			n++
		}
	}
	return n
}

// releaseUnread drops the buffer's reference on segs, under b.mu, once
// the View state lists none of them (Close): the memory of those no View
// holds is freed; one still read is left to its last View's Release (as a
// dropped segment is): a query cut off by a shutdown may still read it,
// and freeing it under the query would be a use after free. It returns
// how many were left so.
func releaseUnread(segs []*Segment) int {
	left := 0
	for _, s := range segs {
		if !s.unref() {
			left++
		}
	}
	return left
}
