package persist

import (
	"runtime"
	"sync"
	"time"
)

// Encoding Parquet (sorting, gathering sorted rows, encoding and
// compressing pages) is the one CPU-bound thing the server does for long
// besides queries: a segment's persist, a compaction. Left alone it takes
// every P (the gatherer and the encoder of each file, PersistConcurrency
// files at once), and a write that arrives meanwhile waits for the Go
// scheduler to preempt one (up to a 10 ms time slice), while the writer's
// client contends with the encoders for the same cores. On 2 cores one
// writer's ack p99 while a 5M-row segment persisted was 31-48 ms; with
// the encoding bound to one core, 7.7-8.2 ms.
//
// encodeSlots bounds the goroutines doing that work at once, across every
// file of the Store. While Config.BoundEncoding says so (the buffer asks
// for it while writes come in and memory is plentiful) that is one fewer
// than the cores (at least one), so that a core is left to writes and
// queries. Otherwise it is the cores, not more: bound to one core a
// persist takes about twice as long, and when the buffer fills the memory
// it frees is what lets writes go on, but it still never takes every P
// when the server runs with one P more than its cores (apron serve does:
// cmd/apron/maxprocs.go). A write's goroutines then always find a P, and
// wait for the kernel's scheduler, whose time slices are a few ms, rather
// than for the Go scheduler's preemption, 10 ms a goroutine and several
// goroutines an ack. One pyarrow writer of 1,000-row batches (~1M rows/s)
// while a 16.7M-row segment persisted with 1.2 GiB buffered (2 cores,
// two to four runs each): ack p99 16.4-34.0 ms, max 80-104, with every P
// taken; 8.0-8.3 ms now. In the peer benchmark (bench/peer), one writer
// while 5M rows persist: p99 22.2 and 34.0 ms before, 8.6 now; 16
// writers: 66.8 and 68.5 ms before, 33.9 now.
//
// While bound, the work also runs on a thread of lower priority for the
// kernel (encode_nice.go).
//
// Work holds a slot only while it computes, never while it waits on
// another step of the pipeline, so the bound cannot deadlock.
type encodeSlots struct {
	bounded, full int         // slots while bound, and otherwise
	bound         func() bool // nil: always
	mu            sync.Mutex
	held          int
	freed         chan struct{} // closed when a slot is given back; nil: no one waits
}

// limitRecheck is how often a step waiting for a slot looks at the limit
// again: it rises when the encoding stops being bound, and no slot is
// given back to say so.
const limitRecheck = 20 * time.Millisecond

// newEncodeSlots bounds encoding to bounded goroutines while bound says
// so, and to full otherwise; 0 for full is the cores (GOMAXPROCS), 0 for
// bounded one fewer than full, at least one.
func newEncodeSlots(bounded, full int, bound func() bool) *encodeSlots {
	if full <= 0 {
		full = runtime.GOMAXPROCS(0)
	}
	if bounded <= 0 {
		bounded = max(1, full-1)
	}
	return &encodeSlots{bounded: bounded, full: max(full, bounded), bound: bound}
}

func (s *encodeSlots) limit() int {
	if s.bound == nil || s.bound() {
		return s.bounded
	}
	return s.full
}

// take takes a slot, waiting for one if wait; it says whether it took one.
func (s *encodeSlots) take(wait bool) bool {
	for {
		s.mu.Lock()
		if s.held < s.limit() {
			s.held++
			s.mu.Unlock()
			return true
		}
		if !wait {
			s.mu.Unlock()
			return false
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.mu.Unlock()
		t := time.NewTimer(limitRecheck)
		select {
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// give gives back n slots.
func (s *encodeSlots) give(n int) {
	s.mu.Lock()
	s.held -= n
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
	s.mu.Unlock()
}

// do runs fn, holding a slot. A nil *encodeSlots runs fn at once.
func (s *encodeSlots) do(fn func() error) error {
	return s.doSpread(1, func(int) error { return fn() })
}

// doSpread is do for work that can spread over goroutines, at most max:
// fn is told how many it may use: the slot it holds and whichever others
// are free now, taken without waiting (a slot held while waiting for
// another could deadlock two such callers) and given back when fn
// returns.
func (s *encodeSlots) doSpread(max int, fn func(workers int) error) error {
	if s == nil {
		return fn(max)
	}
	s.take(true)
	lowered := s.bound == nil || s.bound()
	n := 1
	defer func() { s.give(n) }()
	for n < max && s.take(false) {
		n++
	}
	if lowered {
		return runLowered(func() error { return fn(n) })
	}
	return fn(n)
}
