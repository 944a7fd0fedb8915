package query

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestProcBoost: GOMAXPROCS is raised while any query is active, stays
// raised across queries that follow each other within the linger (no
// change, so no stop of the world, per query), is put back once none has
// run for the linger, and at close; an extra of 0 changes nothing.
func TestProcBoost(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	procs := func() int { return runtime.GOMAXPROCS(0) }

	p := &procBoost{extra: 3, linger: time.Hour, now: clock}
	defer p.close()
	p.enter()
	p.enter()
	if got := procs(); got != base+3 {
		t.Fatalf("two queries: GOMAXPROCS %d, want %d", got, base+3)
	}
	p.exit()
	p.exit()
	if got := procs(); got != base+3 {
		t.Fatalf("no query, within the linger: GOMAXPROCS %d, want %d", got, base+3)
	}
	// A query now: nothing to change.
	p.enter()
	advance(50 * time.Minute)
	p.exit()
	advance(30 * time.Minute) // 80 minutes since the first idle, 30 since the last
	p.lowerIfIdle()
	if got := procs(); got != base+3 {
		t.Fatalf("30 minutes idle of a 1-hour linger: GOMAXPROCS %d, want %d", got, base+3)
	}
	advance(31 * time.Minute)
	p.lowerIfIdle()
	if got := procs(); got != base {
		t.Fatalf("idle past the linger: GOMAXPROCS %d, want %d", got, base)
	}

	// Close puts it back at once.
	p.enter()
	p.exit()
	p.close()
	if got := procs(); got != base {
		t.Fatalf("after close: GOMAXPROCS %d, want %d", got, base)
	}
	if p.mu.timer != nil {
		t.Fatal("close left a timer")
	}

	// The timer does it by itself.
	q := newProcBoost(2)
	q.linger = 10 * time.Millisecond
	q.enter()
	q.exit()
	deadline := time.Now().Add(10 * time.Second)
	for procs() != base {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS still %d a while after the linger", procs())
		}
		time.Sleep(time.Millisecond)
	}

	off := newProcBoost(0)
	off.enter()
	if got := procs(); got != base {
		t.Fatalf("extra 0: GOMAXPROCS %d, want %d", got, base)
	}
	off.exit()
}
