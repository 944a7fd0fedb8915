package persist

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBoundEncodingRunsLowered: work that holds a slot while the encoding
// is bound runs on a thread of nice encodeNice, unbound work at the
// server's own, and the lowered threads end with their work: after many,
// the process has no more threads than before, and no goroutine finds
// itself on a lowered thread.
func TestBoundEncodingRunsLowered(t *testing.T) {
	if !lowerThreadSupported {
		t.Skip("threads are lowered on Linux only")
	}
	base := niceHere(t)
	if base >= encodeNice {
		t.Skipf("the test runs at nice %d, not below encodeNice", base)
	}
	var bound atomic.Bool
	s := newEncodeSlots(1, 2, bound.Load)
	niceOf := func(spread bool) int {
		var got int
		fn := func(int) error { got = niceHere(t); return nil }
		if spread {
			s.doSpread(2, fn)
		} else {
			s.do(func() error { return fn(1) })
		}
		return got
	}
	bound.Store(true)
	if got := niceOf(false); got != encodeNice {
		t.Fatalf("bound work ran at nice %d, want %d", got, encodeNice)
	}
	if got := niceOf(true); got != encodeNice {
		t.Fatalf("bound spread work ran at nice %d, want %d", got, encodeNice)
	}
	bound.Store(false)
	if got := niceOf(false); got != base {
		t.Fatalf("unbound work ran at nice %d, want the process's %d", got, base)
	}

	before := threads(t)
	bound.Store(true)
	for range 200 {
		niceOf(false)
	}
	if after := threads(t); after > before+8 {
		t.Fatalf("%d threads after 200 lowered runs, %d before: the lowered threads did not end", after, before)
	}
	// Goroutines that lock a thread each get the pool's threads: none of
	// them may be a lowered one.
	var wg sync.WaitGroup
	var lowered atomic.Int64
	for range 32 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if niceHere(t) != base {
				lowered.Add(1)
			}
		})
	}
	wg.Wait()
	if n := lowered.Load(); n > 0 {
		t.Fatalf("%d of 32 goroutines ran on a lowered thread", n)
	}
}

// niceHere is the nice value of the thread the calling goroutine runs on,
// locked to it for the call.
func niceHere(t *testing.T) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := threadNice()
	if err != nil {
		t.Error(err)
	}
	return n
}

// threads is the process's thread count (/proc/self/status).
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}
