package buffer

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Recycler is a memory.Allocator that keeps what is freed and hands it out
// again, for work that allocates and frees many short-lived buffers: a
// persist (gathered batches, the Parquet writer's pages) or a query
// streaming decoded batches. From the Go heap each one would be garbage
// until the next GC: with a large buffer (GOGC=100: the GC's goal is twice
// the live heap) that garbage grows the heap, and the process's RSS, by up
// to the buffer's size; with a low GOGC it makes the GC run often; and
// every new buffer is memory the kernel must fault in. Recycled buffers
// are none of that.
//
// Buffers are kept by power-of-two size class, at most maxRecycled bytes
// in all. Close gives every kept buffer back to the parent allocator, so a
// checked parent still sees a leak. Safe for concurrent use.
type Recycler struct {
	parent memory.Allocator
	mu     struct {
		sync.Mutex
		free [maxRecycleClass + 1][][]byte
		kept int64 // bytes in free
	}
}

const (
	minRecycleClass = 6  // 64 B: smaller sizes round up
	maxRecycleClass = 26 // 64 MiB: larger ones (a huge batch) are not kept
	// maxRecycled bounds the bytes kept at once; beyond it, frees go to
	// the parent.
	maxRecycled = 128 << 20
)

func NewRecycler(parent memory.Allocator) *Recycler { return &Recycler{parent: parent} }

// class is the size class of a request of n bytes.
func recycleClass(n int) int {
	if n <= 1<<minRecycleClass {
		return minRecycleClass
	}
	return bits.Len(uint(n - 1))
}

// Allocate returns n zeroed bytes, as memory.Allocator requires.
func (r *Recycler) Allocate(n int) []byte {
	b, reused := r.take(n)
	if reused {
		// The parent's memory comes zeroed; a reused buffer is cleared.
		clear(b)
	}
	return b
}

// AllocateUninitialized is Allocate without zeroing a reused buffer, for
// a caller that overwrites every byte before anything reads it.
func (r *Recycler) AllocateUninitialized(n int) []byte {
	b, _ := r.take(n)
	return b
}

// take returns n bytes of a kept buffer of n's class (reused) or of a new
// one from the parent.
func (r *Recycler) take(n int) (_ []byte, reused bool) {
	c := recycleClass(n)
	if c > maxRecycleClass {
		return r.parent.Allocate(n), false
	}
	r.mu.Lock()
	if l := len(r.mu.free[c]); l > 0 {
		b := r.mu.free[c][l-1]
		r.mu.free[c] = r.mu.free[c][:l-1]
		r.mu.kept -= int64(cap(b))
		r.mu.Unlock()
		return b[:n], true
	}
	r.mu.Unlock()
	return r.parent.Allocate(1 << c)[:n], false
}

// Reallocate grows or shrinks b to n bytes, in place when its class has
// room.
func (r *Recycler) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) && recycleClass(cap(b)) == recycleClass(n) {
		old := len(b)
		b = b[:n]
		if n > old {
			clear(b[old:])
		}
		return b
	}
	nb := r.Allocate(n)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free keeps b for a later Allocate of its class.
func (r *Recycler) Free(b []byte) {
	c := recycleClass(cap(b))
	if cap(b) != 1<<c || c > maxRecycleClass {
		// Not one of ours (or too large to keep).
		r.parent.Free(b)
		return
	}
	r.mu.Lock()
	if r.mu.kept+int64(cap(b)) > maxRecycled {
		r.mu.Unlock()
		r.parent.Free(b[:cap(b)])
		return
	}
	r.mu.free[c] = append(r.mu.free[c], b[:cap(b)])
	r.mu.kept += int64(cap(b))
	r.mu.Unlock()
}

// Kept is the bytes of the buffers kept for reuse now.
func (r *Recycler) Kept() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.kept
}

// Close gives every kept buffer back to the parent. The Recycler may be
// used again after.
func (r *Recycler) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.mu.free {
		for _, b := range r.mu.free[c] {
			r.parent.Free(b)
		}
		r.mu.free[c] = nil
	}
	r.mu.kept = 0
}
