package input

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fixedCol builds an int64, uint64, float64 or timestamp column of a CSV
// chunk by writing values straight into an Arrow buffer sized for the
// chunk's rows, which the splitter counted. Compared with an
// array.Builder it saves a capacity check and a validity-bit write per
// value: the validity bitmap exists only once a null turns up, and most
// columns of measurement data have none.
type fixedCol struct {
	mem   memory.Allocator
	kind  Kind
	vals  *memory.Buffer
	i64   []int64 // int64 and timestamp: a view of vals
	u64   []uint64
	f64   []float64
	valid *memory.Buffer // nil until the first null
	bits  []byte
	n     int
	room  int // values vals holds (kept, not divided out of vals.Len() per value)
	nulls int
}

func newFixedCol(mem memory.Allocator, kind Kind, rows int) *fixedCol {
	f := &fixedCol{mem: mem, kind: kind, vals: memory.NewResizableBuffer(mem)}
	f.grow(max(rows, 16))
	return f
}

// grow makes room for rows values; rare (the row count is exact for
// well-formed input).
func (f *fixedCol) grow(rows int) {
	f.vals.ResizeNoShrink(rows * 8)
	f.room = f.vals.Len() / 8
	switch f.kind {
	case KindUint64:
		f.u64 = arrow.Uint64Traits.CastFromBytes(f.vals.Bytes())
	case KindFloat64:
		f.f64 = arrow.Float64Traits.CastFromBytes(f.vals.Bytes())
	default:
		f.i64 = arrow.Int64Traits.CastFromBytes(f.vals.Bytes())
	}
	if f.valid != nil {
		f.valid.ResizeNoShrink(int(bitutil.BytesForBits(int64(rows))))
		f.bits = f.valid.Bytes()
	}
}

func (f *fixedCol) cap() int { return f.room }

// slot returns the index for the next value, marking it valid.
func (f *fixedCol) slot() int {
	if f.n == f.cap() {
		f.grow(2 * f.n)
	}
	if f.bits != nil {
		bitutil.SetBit(f.bits, f.n)
	}
	f.n++
	return f.n - 1
}

func (f *fixedCol) putInt(v int64)     { i := f.slot(); f.i64[i] = v }
func (f *fixedCol) putUint(v uint64)   { i := f.slot(); f.u64[i] = v }
func (f *fixedCol) putFloat(v float64) { i := f.slot(); f.f64[i] = v }

func (f *fixedCol) putNull() {
	if f.bits == nil {
		f.valid, f.bits = newValidity(f.mem, f.cap(), f.n)
	}
	i := f.slot()
	bitutil.ClearBit(f.bits, i)
	switch f.kind {
	case KindUint64:
		f.u64[i] = 0
	case KindFloat64:
		f.f64[i] = 0
	default:
		f.i64[i] = 0
	}
	f.nulls++
}

// cutValidity is valid (nil: no nulls) cut to n rows.
func cutValidity(valid *memory.Buffer, n int) *memory.Buffer {
	if valid != nil {
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
	}
	return valid
}

// newValidity is the validity bitmap a column starts at its first null:
// room for rows values, the n before it valid.
func newValidity(mem memory.Allocator, rows, n int) (*memory.Buffer, []byte) {
	valid := memory.NewResizableBuffer(mem)
	valid.Resize(int(bitutil.BytesForBits(int64(rows))))
	bits := valid.Bytes()
	bitutil.SetBitsTo(bits, 0, int64(n), true)
	return valid, bits
}

func (f *fixedCol) newArray() arrow.Array {
	f.vals.Resize(f.n * 8)
	data := array.NewData(f.kind.arrowType(), f.n, []*memory.Buffer{cutValidity(f.valid, f.n), f.vals}, nil, f.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (f *fixedCol) release() {
	f.vals.Release()
	if f.valid != nil {
		f.valid.Release()
	}
}
