package buffer

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// Writes faster than persistence fill the buffer, and at MemLimit they
// wait for a whole segment's memory (full_wait.go): with the default
// 2 GiB, 16 writers of 1,000-row batches ran at full speed for ~10 s,
// then every write waited 4-10 s for a 1 GiB segment's persist to end,
// again and again (max ack 8-10 s, a deadline of a few seconds fails).
// So before the limit, writes slow down instead of stopping (RocksDB's
// delayed writes): from seven eighths of MemLimit while a segment is
// being persisted, the room left is spread over the time the persist has
// left, and each write waits its turn to take its share of it. The
// buffer then reaches the limit about when the persist frees memory, and
// writers see their acknowledgements grow by tens or hundreds of ms
// rather than stop for seconds; over a persist the same bytes go in.
//
// The persist's time left is its segment's bytes over the rate the
// last persists freed memory at, less the time it has run
// (writePacer.timeLeft). Each write's share of the time is its batch's
// bytes × time left / room left, taken in turn on one clock (next):
// writes of any number of clients together go in at the rate, not each
// of them. A client of large batches takes turns as long as its bytes,
// so it cannot make the others' writes wait longer than maxSlowdown. A wait is at
// most maxSlowdown, and the clock never runs further ahead than that:
// when the estimate is wrong, the buffer fills and the full wait takes
// over, as without the slowdown. Nothing is refused here, and nothing
// waits below seven eighths, or while no segment is being persisted or
// its persist is failing (no room is coming: the full wait refuses at
// once, as before).
//
// --buffer-slowdown=false turns it off (Config.WriteSlowdown).

const (
	// maxSlowdown bounds one write's wait, and how far ahead of now the
	// pacer's clock may run.
	maxSlowdown = time.Second
	// minTimeToRoom is the least time left a persist is given: one past
	// its estimate is about to end.
	minTimeToRoom = 250 * time.Millisecond
	// initialPersistRate is the bytes of buffer a persist is taken to
	// free a second before one has been measured: about what 2 cores
	// persist while 16 writers write (1 GiB in 18-20 s).
	initialPersistRate = 64 << 20
)

// writePacer is the state of the slowdown: the persist in progress, the
// rate persists free memory at, and the writes' clock.
type writePacer struct {
	// began is when the persist in progress began (UnixNano), 0 if none;
	// size is its segment's bytes.
	began atomic.Int64
	size  atomic.Int64
	// rate is the bytes a second the last persists freed (float64 bits):
	// an average of the last ones, each weighing half.
	rate atomic.Uint64

	mu   sync.Mutex
	next time.Time // when the next write's share of the time begins
}

// persisting notes a persist of size bytes beginning at began.
func (p *writePacer) persisting(began time.Time, size int64) {
	p.size.Store(size)
	p.began.Store(began.UnixNano())
}

// persisted notes the end of the persist begun by persisting: ok says
// whether it freed its segment's memory, took how long it ran.
func (p *writePacer) persisted(ok bool, took time.Duration) {
	size := p.size.Load()
	p.began.Store(0)
	if !ok || size <= 0 || took <= 0 {
		return
	}
	r := float64(size) / took.Seconds()
	if old := math.Float64frombits(p.rate.Load()); old > 0 {
		r = (r + old) / 2
	}
	p.rate.Store(math.Float64bits(r))
}

// timeLeft is how long the persist in progress has left by the rate of
// the last ones, 0 if none is in progress. A persist past its estimate
// (slower than the last ones: more writes beside it, a slower store) is
// given a quarter of it: the room left then shrinks by about a half
// every 0.7 × quarter (the rate is room / time left), and the buffer
// nears its limit smoothly instead of filling at once, as it did with
// a floor of minTimeToRoom alone (a 3.5 s wait at the limit in 40 s of
// 16 writers).
func (p *writePacer) timeLeft(now time.Time) time.Duration {
	began := p.began.Load()
	if began == 0 {
		return 0
	}
	rate := math.Float64frombits(p.rate.Load())
	if rate <= 0 {
		rate = initialPersistRate
	}
	whole := time.Duration(float64(p.size.Load()) / rate * float64(time.Second))
	return max(whole-now.Sub(time.Unix(0, began)), whole/4, minTimeToRoom)
}

// take gives a write that needs cost of the time its turn: how long from
// now until it may go in, at most maxSlowdown.
func (p *writePacer) take(now time.Time, cost time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.next
	if at.Before(now) {
		at = now
	}
	if limit := now.Add(maxSlowdown); at.After(limit) {
		at = limit
	}
	p.next = at.Add(cost)
	return at.Sub(now)
}

// writeDelay is how long a write of rec is to wait before it goes in:
// 0 unless the buffer holds seven eighths of MemLimit or more, has room
// left, and a segment is being persisted.
func (b *WriteBuffer) writeDelay(rec arrow.RecordBatch) time.Duration {
	if !b.cfg.WriteSlowdown || b.cfg.MemLimit <= 0 {
		return 0
	}
	// No persist in progress (nearly every write): one atomic load, not
	// the buffer's size.
	now := time.Now()
	left := b.pacer.timeLeft(now)
	if left <= 0 {
		return 0
	}
	limit := b.cfg.MemLimit
	buffered := b.bufferedNow()
	room := limit - buffered
	if buffered < limit-limit/8 || room <= 0 {
		return 0 // below the zone, or full: the full wait decides
	}
	if err, _ := b.PersistError(); err != nil {
		return 0 // a persist being retried frees nothing on time: the full wait refuses at the limit, with its error
	}
	// A turn longer than maxSlowdown only makes the next write wait
	// maxSlowdown: capped, it cannot overflow.
	cost := time.Duration(min(float64(max(persist.RecordBytes(rec), 1))*float64(left)/float64(room), float64(maxSlowdown)))
	return b.pacer.take(now, cost)
}

// slowDown makes a write of rec to db.table wait its turn (writeDelay),
// or until memory leaves the buffer. If ctx ends first, the write is not
// to go in: the client has given up on it and may send it again, so
// writing it would write it twice. It is refused with ErrBufferFull, as a
// write whose call ends while it waits at the limit is (full_wait.go).
func (b *WriteBuffer) slowDown(ctx context.Context, db, table string, rec arrow.RecordBatch) error {
	d := b.writeDelay(rec)
	if d <= 0 {
		return nil
	}
	b.metrics.slowdowns.Inc()
	began := time.Now()
	defer func() { b.metrics.slowdownSeconds.Add(time.Since(began).Seconds()) }()
	b.mu.Lock()
	room := b.roomSignalLocked()
	b.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-room:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: database %q table %q: the call ended (%w) while the write was paced (the buffer nearly full while a segment persists, --buffer-slowdown); nothing was written: send it again",
			ErrBufferFull, db, table, err)
	}
	return nil
}

// slowDownSubmit is submitWaiting after the write's turn (slowDown).
func (b *WriteBuffer) slowDownSubmit(ctx context.Context, start time.Time, db, table string, rec arrow.RecordBatch,
	opts catalog.WriteOptions) (*PendingWrite, error) {
	if err := b.slowDown(ctx, db, table, rec); err != nil {
		return nil, err
	}
	return b.submitWaiting(ctx, start, db, table, rec, opts)
}
