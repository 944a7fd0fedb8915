package buffer

import (
	"context"
	"time"

	"github.com/apron-db/apron/persist"
)

// A compaction is background work that competes with writes for CPU: on
// two cores, merging a day's files (decode, sort, encode) took a core
// that bulk ingest wanted, which then ran at 0.58–0.76 of its rate. And
// it runs in the persister's goroutine, so a long merge kept closed
// segments waiting in memory. Its pacer (persist.Pacer, called between
// the batches it reads and writes, a few ms apart) shares the time:
//
//   - a closed segment waiting to be persisted is persisted from inside
//     the compaction. Nothing of the compaction is committed yet (its
//     merged file is a local temporary file until its last step), and
//     the persister's steps stay in one goroutine, in an order the crash
//     tests already cover: a persist during the compaction is a persist
//     before it;
//   - but not every waiting segment at once. Under writes that never let
//     the persister rest (16 writers with a 512 MiB buffer: a segment
//     closed about every 4 s, persisted in about as long), one always
//     waits, and a compaction that persisted all of them first never
//     finished, nor did one that had to wait for the persister to be
//     idle ever start: after 180 s, 40 files of one day were unmerged
//     and no expired file was swept. So the persister takes turns: a
//     round that is due starts between two persists (persister in
//     persist.go), and after each persist the compaction works for that
//     persist's time times share/(1-share) (persisterTurn) before the
//     next waiting segment is persisted — at least one step, so a round
//     always ends. While the buffer holds three quarters of its limit
//     (memoryPressing), persists go first, all of them, as the memory
//     they free is what keeps writes from waiting;
//   - while writes arrive (one in the last writeActiveWindow) and no
//     segment waits, it sleeps after each step for as long as that step
//     took, times (1-share)/share: the compaction takes at most share of
//     a core, and all of it when writes stop. With a segment waiting, it
//     does not sleep: the persister's time is the segment's, lent.
//
// A shutdown (FinishPersist) stops a compaction at its next step instead
// of waiting for it: nothing is committed, and the next start compacts
// again.

// DefaultCompactionShare is Config.CompactionShare's default.
const DefaultCompactionShare = 0.25

const (
	// writeActiveWindow: writes are arriving if one came this recently.
	writeActiveWindow = 200 * time.Millisecond
	// maxPaceSleep bounds one sleep (a step that took long, or was itself
	// held up by the machine).
	maxPaceSleep = time.Second
	// maxTurn bounds the compaction's turn between two persists.
	maxTurn = 10 * time.Second
)

// compactionPacer paces one compaction; stopped is set to why it ended
// the compaction, if it did.
type compactionPacer struct {
	b   *WriteBuffer
	ctx context.Context
	// inPersister: the compaction runs in the persister's goroutine, and
	// persists what waits; else (WriteBuffer.Compact, tests) the
	// persister does.
	inPersister bool
	last        time.Time
	stopped     error
	slept       time.Duration // how long it held the compaction back
	persisted   int           // segments it persisted meanwhile
}

func (b *WriteBuffer) newCompactionPacer(ctx context.Context, inPersister bool) *compactionPacer {
	return &compactionPacer{b: b, ctx: ctx, inPersister: inPersister, last: time.Now()}
}

func (p *compactionPacer) pace() error {
	b := p.b
	if b.draining() {
		p.stopped = errDraining
		return p.stopped
	}
	worked := time.Since(p.last)
	waiting := false
	if p.inPersister {
		var err error
		if waiting, err = p.persistDue(worked); err != nil {
			p.stopped = err // only cancellation (or shutdown) ends its retries
			return err
		}
	}
	if share := b.compactionShare(); share < 1 && b.writesActive() && !waiting {
		d := min(time.Duration(float64(worked)*(1-share)/share), maxPaceSleep)
		t := time.NewTimer(d)
		select {
		case <-t.C:
			p.slept += d
		case <-p.ctx.Done():
			t.Stop()
			p.stopped = p.ctx.Err()
			return p.stopped
		case <-b.persist.drain:
			t.Stop()
			p.stopped = errDraining
			return p.stopped
		}
	}
	p.last = time.Now()
	return nil
}

// persistDue persists the waiting segments whose turn it is, after a
// compaction step that took worked: all of them while memory presses,
// else the next one once the compaction's turn (persisterTurn) is
// spent. It says whether a segment still waits.
func (p *compactionPacer) persistDue(worked time.Duration) (waiting bool, err error) {
	b := p.b
	turn := &b.persist.turn
	for {
		seg := b.nextToPersist()
		if seg == nil {
			turn.left = 0 // none waits: the next to close is persisted at once
			return false, nil
		}
		if !b.memoryPressing() {
			if turn.left -= worked; turn.left > 0 {
				return true, nil // the compaction's turn
			}
			worked = 0
		}
		if err := b.persistTimed(p.ctx, seg); err != nil {
			return false, err
		}
		p.persisted++
		if b.draining() {
			return false, errDraining
		}
		if !b.memoryPressing() {
			return b.nextToPersist() != nil, nil // the compaction's turn again
		}
	}
}

// pacer is pace as a persist.Pacer.
func (p *compactionPacer) pacer() persist.Pacer { return p.pace }

func (b *WriteBuffer) compactionShare() float64 {
	if s := b.cfg.CompactionShare; s > 0 {
		return min(s, 1)
	}
	return DefaultCompactionShare
}

// writesActive says whether a write was submitted in the last
// writeActiveWindow.
func (b *WriteBuffer) writesActive() bool {
	return time.Since(time.Unix(0, b.lastWrite.Load())) < writeActiveWindow
}

// persisterTurn is the compaction's share of the persister's time while
// segments keep waiting (the persister's goroutine only).
type persisterTurn struct {
	// left is how long the compaction works before the next waiting
	// segment is persisted.
	left time.Duration
}

// persistTimed persists seg from the persister's goroutine, and gives the
// compaction its turn after it: the persist's time, times
// share/(1-share).
func (b *WriteBuffer) persistTimed(ctx context.Context, seg *Segment) error {
	seg.seal()
	start := time.Now()
	b.pacer.persisting(start, seg.size.Load())
	err := b.persistSegment(ctx, seg)
	took := time.Since(start)
	b.pacer.persisted(err == nil, took)
	if err != nil {
		return err
	}
	if share := b.compactionShare(); share >= 1 {
		b.persist.turn.left = maxTurn
	} else {
		b.persist.turn.left = min(time.Duration(float64(took)*share/(1-share)), maxTurn)
	}
	return nil
}
