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
// the batches it reads and writes, a few ms apart) puts both first:
//
//   - a closed segment waiting to be persisted is persisted there and
//     then, from inside the compaction. Nothing of the compaction is
//     committed yet (its merged file is a local temporary file until its
//     last step), and the persister's steps stay in one goroutine, in an
//     order the crash tests already cover: a persist during the
//     compaction is a persist before it;
//   - while writes arrive (one in the last writeActiveWindow), it sleeps
//     after each step for as long as that step took, times
//     (1-share)/share: the compaction takes at most share of a core, and
//     all of it when writes stop.
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
	for p.inPersister {
		seg := b.nextToPersist()
		if seg == nil {
			break
		}
		seg.seal()
		if err := b.persistSegment(p.ctx, seg); err != nil {
			p.stopped = err // only cancellation ends its retries
			return err
		}
		p.persisted++
		if b.draining() {
			p.stopped = errDraining
			return p.stopped
		}
	}
	if share := b.compactionShare(); share < 1 && b.writesActive() {
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
