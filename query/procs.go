package query

import (
	"runtime"
	"sync"
	"time"
)

// procBoost raises GOMAXPROCS by extra while queries run, and puts it
// back once none has run for linger.
//
// DuckDB's worker threads call into Go (apron_scan fills every vector of a
// scan of the buffer) and each call needs a P: with one P per core, a
// worker waits whenever Go's goroutines (gRPC, the result stream, the GC)
// hold them all. Measured on 2 cores, BenchmarkSQLAggregate (10M rows):
// apron/DuckDB 1.48-1.52 with 2 Ps, 1.35-1.37 with 4. Not for good:
// persisting a segment with 4 Ps on 2 cores peaked at 1.51-1.53x the
// buffered bytes in RSS against 1.46-1.49x with 2.
//
// Not query by query either: every change of GOMAXPROCS stops the world,
// and a client running small queries one after the other paid two of
// them a query. The linger keeps the Ps raised across a run of queries
// (SELECT 1 from one client, 2 cores: p50 1.16-1.18 ms toggling,
// 1.04-1.06 with the linger; 34 and 28 context switches a query).
type procBoost struct {
	extra  int           // 0: off
	linger time.Duration // 0: put back as the last query ends
	now    func() time.Time
	mu     struct {
		sync.Mutex
		active    int
		raised    bool
		base      int       // GOMAXPROCS before it was raised
		idleSince time.Time // when active last went to 0
		timer     *time.Timer
	}
}

// defaultProcLinger is how long the Ps stay raised after the last query.
const defaultProcLinger = time.Second

func newProcBoost(extra int) *procBoost {
	return &procBoost{extra: extra, linger: defaultProcLinger, now: time.Now}
}

func (p *procBoost) enter() {
	if p.extra <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.raised {
		p.mu.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(p.mu.base + p.extra)
		p.mu.raised = true
	}
	p.mu.active++
}

func (p *procBoost) exit() {
	if p.extra <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.active--
	if p.mu.active > 0 {
		return
	}
	p.mu.idleSince = p.now()
	if p.linger <= 0 {
		p.lowerLocked()
		return
	}
	if p.mu.timer == nil {
		p.mu.timer = time.AfterFunc(p.linger, p.lowerIfIdle)
	}
}

// lowerIfIdle puts GOMAXPROCS back if no query has run for linger, and
// otherwise looks again when it will have been.
func (p *procBoost) lowerIfIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.timer = nil
	if !p.mu.raised || p.mu.active > 0 {
		return // the last query to end arms the timer again
	}
	if wait := p.linger - p.now().Sub(p.mu.idleSince); wait > 0 {
		p.mu.timer = time.AfterFunc(wait, p.lowerIfIdle)
		return
	}
	p.lowerLocked()
}

func (p *procBoost) lowerLocked() {
	if p.mu.raised {
		runtime.GOMAXPROCS(p.mu.base)
		p.mu.raised = false
	}
}

// close puts GOMAXPROCS back at once (Engine.Close); no timer is left.
func (p *procBoost) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.timer != nil {
		p.mu.timer.Stop()
		p.mu.timer = nil
	}
	if p.mu.active == 0 {
		p.lowerLocked()
	}
}
