package buffer

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestRecycler(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := NewRecycler(mem)

	a := r.Allocate(1000)
	if len(a) != 1000 || cap(a) != 1024 {
		t.Fatalf("Allocate(1000): len %d cap %d, want 1000 and its class, 1024", len(a), cap(a))
	}
	for i := range a {
		a[i] = 0xff
	}
	r.Free(a)
	b := r.Allocate(600)
	if &b[0] != &a[0] {
		t.Fatal("a freed buffer of the class was not reused")
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d of a reused buffer is %#x, want zero", i, v)
		}
	}
	// Growing within the class stays in place and zeroes the new bytes.
	b[599] = 1
	c := r.Reallocate(1024, b)
	if &c[0] != &b[0] || c[599] != 1 || c[600] != 0 {
		t.Fatal("Reallocate within the class moved or did not zero")
	}
	// Growing past it copies.
	d := r.Reallocate(5000, c)
	if len(d) != 5000 || d[599] != 1 {
		t.Fatalf("Reallocate across classes: len %d, kept byte %d", len(d), d[599])
	}
	r.Free(d)
	if mem.CurrentAlloc() == 0 {
		t.Fatal("the Recycler gave freed buffers back early")
	}
	r.Close()
}
