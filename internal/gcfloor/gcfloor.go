package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// liveMetric is the heap the last collection marked live.
const liveMetric = "/gc/heap/live:bytes"

// Floor keeps the heap goal at least its bytes; Stop ends it.
type Floor struct {
	gogc    int   // the configured GOGC (> 0)
	bytes   int64 // the floor
	stopped atomic.Bool
	percent atomic.Int64 // the GOGC last set (Percent)
	sample  []metrics.Sample
}

// Start keeps the heap goal at least floor bytes above a GOGC of gogc.
// It does nothing (and returns nil) when gogc is off (< 0) or floor is 0.
// Only one Floor should run at a time.
func Start(gogc int, floor int64) *Floor {
	if gogc < 0 || floor <= 0 {
		return nil
	}
	f := &Floor{gogc: max(gogc, 1), bytes: floor, sample: []metrics.Sample{{Name: liveMetric}}}
	f.adjust()
	f.arm()
	return f
}

// Stop puts back the configured GOGC; the hook ends at the next
// collection.
func (f *Floor) Stop() {
	if f == nil || f.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(f.gogc)
}

// Percent is the GOGC the floor last set.
func (f *Floor) Percent() int {
	if f == nil {
		return 0
	}
	return int(f.percent.Load())
}

// sentinel is freed by every collection that finds it unreachable, which
// is the first after it was armed; 16 bytes keep it out of the tiny
// allocator, whose objects may not be finalized.
type sentinel struct{ _ [2]int64 }

func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if f.stopped.Load() {
			return
		}
		f.adjust()
		f.arm()
	})
}

// adjust sets GOGC for the live heap the last collection left.
func (f *Floor) adjust() {
	metrics.Read(f.sample)
	var live int64
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(f.sample[0].Value.Uint64())
	}
	p := percentFor(f.gogc, f.bytes, live)
	if int64(p) != f.percent.Load() {
		debug.SetGCPercent(p)
		f.percent.Store(int64(p))
	}
}

// percentFor is the GOGC whose goal for a live heap of live bytes is at
// least floor, and never under gogc. A live heap under 1 MiB counts as
// 1 MiB (at start, and so that the percentage stays sane).
func percentFor(gogc int, floor, live int64) int {
	live = max(live, 1<<20)
	want := (floor - live) * 100 / live
	if want <= int64(gogc) {
		return gogc
	}
	return int(min(want, 1<<20))
}
