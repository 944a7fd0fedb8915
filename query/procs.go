package query

import (
	"runtime"
	"sync"
)

// procBoost raises GOMAXPROCS by extra while any connection is out of the
// pool (a query runs), and puts it back when the last one returns.
// DuckDB's worker threads call into Go (apron_scan fills every vector of a
// scan of the buffer) and each call needs a P: with one P per core, a
// worker waits whenever Go's goroutines (gRPC, the result stream, the GC)
// hold them all. Measured on 2 cores, BenchmarkSQLAggregate (10M rows):
// apron/DuckDB 1.48-1.52 with 2 Ps, 1.35-1.37 with 4. Only while queries
// run: persisting a segment with 4 Ps on 2 cores peaked at 1.51-1.53x the
// buffered bytes in RSS against 1.46-1.49x with 2.
type procBoost struct {
	extra int // 0: off
	mu    struct {
		sync.Mutex
		active int
		base   int // GOMAXPROCS before the first active query
	}
}

func (p *procBoost) enter() {
	if p.extra <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.active == 0 {
		p.mu.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(p.mu.base + p.extra)
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
	if p.mu.active == 0 {
		runtime.GOMAXPROCS(p.mu.base)
	}
}
