package persist

import "runtime"

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
// file of the Store, to one fewer than the machine's cores (at least
// one), so that a core is left to writes and queries, but only while
// Config.BoundEncoding says so: the buffer asks for it while writes come
// in and memory is plentiful, and lets persistence take every core when
// the buffer fills (bound to one core a persist takes about twice as
// long, and the memory it frees comes back later). Work holds a slot only
// while it computes, never while it waits on another step of the
// pipeline, so the bound cannot deadlock.
type encodeSlots struct {
	ch    chan struct{}
	bound func() bool // nil: always
}

// defaultEncodeSlots is one fewer than the cores, at least one.
func defaultEncodeSlots() int { return max(1, runtime.NumCPU()-1) }

func newEncodeSlots(n int, bound func() bool) *encodeSlots {
	if n <= 0 {
		n = defaultEncodeSlots()
	}
	return &encodeSlots{ch: make(chan struct{}, n), bound: bound}
}

// do runs fn, holding a slot if the encoding is bound now. A nil
// *encodeSlots runs fn at once.
func (s *encodeSlots) do(fn func() error) error {
	return s.doSpread(1, func(int) error { return fn() })
}

// doSpread is do for work that can spread over goroutines, at most max:
// fn is told how many it may use. Unbound, max. Bound, the slot it holds
// and whichever others are free now, taken without waiting (a slot
// held while waiting for another could deadlock two such callers) and
// given back when fn returns.
func (s *encodeSlots) doSpread(max int, fn func(workers int) error) error {
	if s == nil || (s.bound != nil && !s.bound()) {
		return fn(max)
	}
	s.ch <- struct{}{}
	n := 1
	defer func() {
		for range n {
			<-s.ch
		}
	}()
	for n < max {
		select {
		case s.ch <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	return fn(n)
}
