package flightsvc

import "testing"

// TestFramePool: a buffer of the asked length, from the smallest class that
// holds it; a buffer put back is handed out again, whole.
func TestFramePool(t *testing.T) {
	var p framePool
	for _, tc := range []struct{ n, cap int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {16 << 10, 16 << 10}, {16<<10 + 1, 32 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1},
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.cap {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", tc.n, len(*b), cap(*b), tc.cap)
		}
	}
	b := p.Get(16 << 10)
	(*b)[0] = 42
	*b = (*b)[:10] // gRPC puts back a prefix
	p.Put(b)
	// sync.Pool may drop it (a GC in between); when it does not, it is the
	// same buffer, at the new length.
	if c := p.Get(9000); &(*c)[0] == &(*b)[0] && (len(*c) != 9000 || (*c)[0] != 42) {
		t.Errorf("reused buffer: len %d", len(*c))
	}
	p.Put(&[]byte{1, 2, 3}) // too small: ignored, no panic
	odd := make([]byte, 3000)
	p.Put(&odd) // not a power of two: ignored
	if c := p.Get(3000); cap(*c) != 4096 {
		t.Errorf("Get(3000) after putting a 3000-byte buffer: cap %d, want 4096", cap(*c))
	}
}
