package persist

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestTight: a batch read from Parquet may sit on buffers with far more
// room than its bytes (the Go allocator shrinks by reslicing); tight
// copies those into buffers of their size, and leaves the others.
func TestTight(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	roomy := memory.NewResizableBuffer(memory.NewGoAllocator())
	roomy.Resize(1 << 20)
	roomy.Resize(8 * 100) // the room stays behind the slice
	if cap(roomy.Buf()) < 1<<20 {
		t.Skip("the Go allocator no longer keeps the room of a shrunk buffer")
	}
	values := arrow.Int64Traits.CastFromBytes(roomy.Bytes())
	for i := range values {
		values[i] = int64(i * 7)
	}
	data := array.NewData(arrow.PrimitiveTypes.Int64, 100, []*memory.Buffer{nil, roomy}, nil, 0, 0)
	a := array.NewInt64Data(data)
	data.Release()
	roomy.Release()
	defer a.Release()

	got := tight(a, mem).(*array.Int64)
	defer got.Release()
	if b := got.Data().Buffers()[1]; cap(b.Buf()) > 8*100+4096 {
		t.Fatalf("the copy keeps %d bytes of room for %d", cap(b.Buf()), b.Len())
	}
	if !array.Equal(got, a) {
		t.Fatalf("the copy differs: %v, want %v", got, a)
	}

	b := array.NewInt64Builder(memory.NewGoAllocator())
	b.AppendValues(values, nil)
	fit := b.NewInt64Array()
	b.Release()
	defer fit.Release()
	same := tight(fit, mem)
	defer same.Release()
	if same != arrow.Array(fit) {
		t.Fatal("an array without room was copied")
	}
}
