package offheap

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinMapped is the smallest allocation that is mapped: below it, a page
// (or more, rounded up) per allocation would waste more than the Go heap's
// headroom costs.
const MinMapped = 64 << 10

// Allocator implements memory.Allocator (see the package comment). The
// zero value maps every allocation; it is safe for concurrent use.
type Allocator struct {
	min       int          // the smallest allocation mapped
	mapped    atomic.Int64 // bytes mapped now
	fallbacks atomic.Int64 // large allocations the map failed for
	fallback  sync.Map     // *byte -> struct{}: large allocations the map failed for, on the Go heap
}

// New returns an Allocator that maps allocations of MinMapped bytes or
// more.
func New() *Allocator { return &Allocator{min: MinMapped} }

// NewMapAll returns an Allocator that maps every allocation but empty
// ones, a page at least each: for tests, so that any use of a buffer
// after its last Release faults instead of reading stale memory.
func NewMapAll() *Allocator { return &Allocator{min: 1} }

// Fallbacks is the number of allocations that were to be mapped but came
// from the Go heap, the map having failed (vm.max_map_count reached, or
// out of memory).
func (a *Allocator) Fallbacks() int64 { return a.fallbacks.Load() }

// Mapped is the number of bytes mapped now: what this allocator holds
// outside the Go heap.
func (a *Allocator) Mapped() int64 { return a.mapped.Load() }

// Allocate returns size zeroed bytes.
func (a *Allocator) Allocate(size int) []byte {
	if size < a.min || size == 0 {
		return make([]byte, size)
	}
	if b, ok := mapAnon(size); ok {
		a.mapped.Add(int64(size))
		return b
	}
	a.fallbacks.Add(1)
	b := make([]byte, size)
	a.fallback.Store(unsafe.SliceData(b), struct{}{})
	return b
}

// Reallocate returns size bytes holding b's first bytes; b is freed.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	if size == len(b) {
		return b
	}
	out := a.Allocate(size)
	copy(out, b)
	a.Free(b)
	return out
}

// Free gives b back. b must be a slice Allocate or Reallocate returned,
// as returned.
func (a *Allocator) Free(b []byte) {
	if len(b) < a.min || len(b) == 0 {
		return
	}
	if _, ok := a.fallback.LoadAndDelete(unsafe.SliceData(b)); ok {
		return
	}
	unmap(b)
	a.mapped.Add(-int64(len(b)))
}
