package main

import (
	"runtime"
	"testing"
)

// TestRaiseProcs: serve runs Go with one P more than its cores unless
// GOMAXPROCS is set, and the query engine's extra Ps count that one.
func TestRaiseProcs(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(base)

	t.Setenv("GOMAXPROCS", "")
	if cores := raiseProcs(); cores != base || runtime.GOMAXPROCS(0) != base+1 {
		t.Fatalf("raiseProcs: cores %d (want %d), GOMAXPROCS %d (want %d)", cores, base, runtime.GOMAXPROCS(0), base+1)
	}
	if got := queryExtraProcs(0, 2); got != 1 {
		t.Errorf("queryExtraProcs(0 threads, 2 cores) = %d, want 1 (2 a core, less the one raiseProcs added)", got)
	}
	if got := queryExtraProcs(4, 2); got != 3 {
		t.Errorf("queryExtraProcs(4 threads, 2 cores) = %d, want 3", got)
	}

	runtime.GOMAXPROCS(base)
	t.Setenv("GOMAXPROCS", "3")
	if cores := raiseProcs(); cores != base || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("GOMAXPROCS set: raiseProcs: cores %d, GOMAXPROCS %d; want %d and unchanged", cores, runtime.GOMAXPROCS(0), base)
	}
	if got := queryExtraProcs(0, 2); got != 0 {
		t.Errorf("GOMAXPROCS set: queryExtraProcs = %d, want 0", got)
	}
}
