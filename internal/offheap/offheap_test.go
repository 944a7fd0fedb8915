package offheap

import (
	"bytes"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

var _ memory.Allocator = (*Allocator)(nil)

func TestAllocateFree(t *testing.T) {
	a := New()
	if a.Fallbacks() != 0 {
		t.Fatal("fallbacks before any allocation")
	}
	for _, size := range []int{0, 1, MinMapped - 1, MinMapped, MinMapped + 1, 1 << 20, 3<<20 + 17} {
		b := a.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d): len %d", size, len(b))
		}
		if !bytes.Equal(b, make([]byte, size)) {
			t.Fatalf("Allocate(%d): not zeroed", size)
		}
		for i := range b {
			b[i] = byte(i)
		}
		want := int64(0)
		if size >= MinMapped {
			want = int64(size)
		}
		if got := a.Mapped(); got != want {
			t.Fatalf("Allocate(%d): Mapped %d, want %d", size, got, want)
		}
		b = a.Reallocate(size*2+MinMapped, b)
		for i := range size {
			if b[i] != byte(i) {
				t.Fatalf("Reallocate from %d: byte %d changed", size, i)
			}
		}
		a.Free(b)
		if got := a.Mapped(); got != 0 {
			t.Fatalf("after Free: Mapped %d", got)
		}
	}
}

// TestWithArrowBuffers: buffers sliced from one block keep it until the
// last is released, under CheckedAllocator's accounting.
func TestWithArrowBuffers(t *testing.T) {
	a := NewMapAll()
	mem := memory.NewCheckedAllocator(a)
	defer mem.AssertSize(t, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				block := memory.NewBufferWithAllocator(mem.Allocate(256<<10), mem)
				if a.Mapped() == 0 {
					t.Error("nothing mapped")
				}
				parts := []*memory.Buffer{memory.SliceBuffer(block, 0, 64<<10), memory.SliceBuffer(block, 64<<10, 192<<10)}
				block.Release()
				parts[0].Bytes()[0] = 1
				parts[0].Release()
				parts[1].Bytes()[100] = 2 // the block is still mapped
				parts[1].Release()
			}
		}()
	}
	wg.Wait()
	if got := a.Mapped(); got != 0 {
		t.Fatalf("Mapped %d after every buffer was released", got)
	}
}
