package query

import (
	"runtime"
	"testing"
)

// TestProcBoost: GOMAXPROCS is raised while any query is active and put
// back when the last one ends; an extra of 0 changes nothing.
func TestProcBoost(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	p := &procBoost{extra: 3}
	p.enter()
	p.enter()
	if got := runtime.GOMAXPROCS(0); got != base+3 {
		t.Fatalf("two queries: GOMAXPROCS %d, want %d", got, base+3)
	}
	p.exit()
	if got := runtime.GOMAXPROCS(0); got != base+3 {
		t.Fatalf("one query left: GOMAXPROCS %d, want %d", got, base+3)
	}
	p.exit()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("no query: GOMAXPROCS %d, want %d", got, base)
	}
	off := &procBoost{}
	off.enter()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("extra 0: GOMAXPROCS %d, want %d", got, base)
	}
	off.exit()
}
