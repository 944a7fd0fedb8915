package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		gogc        int
		floor, live int64
		want        int
	}{
		{100, 64 << 20, 8 << 20, 700},    // goal 8 + 7*8 = 64 MiB
		{100, 64 << 20, 32 << 20, 100},   // goal 64 MiB already
		{100, 64 << 20, 1 << 30, 100},    // a large heap keeps GOGC
		{300, 64 << 20, 8 << 20, 700},    // over the configured
		{1000, 64 << 20, 8 << 20, 1000},  // the configured is more
		{100, 64 << 20, 0, 6300},         // nothing live: counted as 1 MiB
		{100, 1 << 50, 1 << 20, 1 << 20}, // bounded
	} {
		if got := percentFor(tc.gogc, tc.floor, tc.live); got != tc.want {
			t.Errorf("percentFor(%d, %d, %d) = %d, want %d", tc.gogc, tc.floor, tc.live, got, tc.want)
		}
	}
}

// TestFloorFollowsCollections: the floor raises GOGC for a small heap,
// lowers it back when the live heap grows, and Stop puts back the
// configured value.
func TestFloorFollowsCollections(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	f := Start(100, 64<<20)
	defer f.Stop()
	runtime.GC()
	if p := waitPercent(t, f, func(p int) bool { return p > 100 }); p <= 100 {
		t.Fatalf("GOGC %d with a small heap and a 64 MiB floor, want more than 100", p)
	}
	big := make([]byte, 192<<20) // live heap over the floor
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	runtime.GC()
	if p := waitPercent(t, f, func(p int) bool { return p == 100 }); p != 100 {
		t.Errorf("GOGC %d with 192 MiB live, want the configured 100", p)
	}
	runtime.KeepAlive(big)
	f.Stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC after Stop %d, want 100", p)
	}
	if Start(-1, 64<<20) != nil || Start(100, 0) != nil {
		t.Error("Start with GOGC off or no floor: want nil")
	}
}

// waitPercent waits up to a few seconds (the finalizer runs after the
// collection, on its own goroutine) for the floor's GOGC to satisfy ok.
func waitPercent(t *testing.T, f *Floor, ok func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := f.Percent()
		if ok(p) || time.Now().After(deadline) {
			return p
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
