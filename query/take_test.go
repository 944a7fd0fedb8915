//go:build duckdb_arrow

package query

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
)

// TestTakeFixed: takeFixed of every fixed-width type a table or a query
// result can hold, and of dictionary columns, with and without nulls,
// sliced (an offset) or not, gives, row by row, the selected row's
// validity and bytes (a dictionary's index and the same dictionary), of
// the same type; through a buffer.Recycler as the scans use it, and with
// every buffer released. Selections are unsorted, repeat rows, or are
// empty.
func TestTakeFixed(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer checked.AssertSize(t, 0)
	mem := buffer.NewRecycler(checked)
	defer mem.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.FixedWidthTypes.Timestamp_ns, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64, arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Time64ns,
		arrow.FixedWidthTypes.Duration_us, arrow.FixedWidthTypes.MonthDayNanoInterval, arrow.FixedWidthTypes.DayTimeInterval,
		&arrow.Decimal128Type{Precision: 20, Scale: 3}, &arrow.Decimal256Type{Precision: 60, Scale: 5},
		&arrow.FixedSizeBinaryType{ByteWidth: 3},
		arrow.FixedWidthTypes.Boolean,
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.String},
	}
	const n = 700
	for _, dt := range types {
		for _, nulls := range []bool{false, true} {
			for _, sliced := range []bool{false, true} {
				name := fmt.Sprintf("%s/nulls=%v/sliced=%v", dt, nulls, sliced)
				src := randomFixed(mem, rng, dt, n, nulls)
				if sliced {
					s := array.NewSlice(src, 37, n-11)
					src.Release()
					src = s
				}
				for _, sel := range selections(rng, src.Len()) {
					out := takeFixed(mem, src, sel)
					if out == nil {
						t.Fatalf("%s: not taken", name)
					}
					checkTaken(t, name, src, out, sel)
					out.Release()
				}
				src.Release()
			}
		}
	}
	// Types it leaves to compute.Take.
	sb := array.NewStringBuilder(mem)
	sb.Append("a")
	s := sb.NewArray()
	sb.Release()
	defer s.Release()
	if out := takeFixed(mem, s, []int32{0}); out != nil {
		out.Release()
		t.Fatal("a string column was taken")
	}
}

func selections(rng *rand.Rand, n int) [][]int32 {
	var sorted, shuffled, repeats []int32
	for i := range n {
		if rng.IntN(3) == 0 {
			sorted = append(sorted, int32(i))
		}
	}
	shuffled = append(shuffled, sorted...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for range 50 {
		repeats = append(repeats, int32(rng.IntN(n)), int32(n-1), 0)
	}
	return [][]int32{sorted, shuffled, repeats, {}, {int32(n - 1)}}
}

// randomFixed is n random values of dt (no NaN concerns: values are
// compared as bytes), a third of them null if nulls.
func randomFixed(mem memory.Allocator, rng *rand.Rand, dt arrow.DataType, n int, nulls bool) arrow.Array {
	var valid *memory.Buffer
	nullN := 0
	if nulls {
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
		for i := range n {
			set := rng.IntN(3) != 0
			bitutil.SetBitTo(valid.Bytes(), i, set)
			if !set {
				nullN++
			}
		}
	}
	randomBytes := func(size int) *memory.Buffer {
		b := memory.NewResizableBuffer(mem)
		b.Resize(size)
		for i := range b.Bytes() {
			b.Bytes()[i] = byte(rng.Uint32())
		}
		return b
	}
	var data *array.Data
	switch dt := dt.(type) {
	case *arrow.DictionaryType:
		sb := array.NewStringBuilder(mem)
		for i := range 90 {
			sb.Append(fmt.Sprintf("host-%d", i))
		}
		dict := sb.NewArray()
		sb.Release()
		width := dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		idx := randomBytes(n * width)
		for i := range n { // in range of the dictionary
			b := idx.Bytes()[i*width : (i+1)*width]
			clear(b)
			b[0] = byte(rng.IntN(90))
		}
		data = array.NewDataWithDictionary(dt, n, []*memory.Buffer{valid, idx}, nullN, 0, dict.Data().(*array.Data))
		dict.Release()
		idx.Release()
	case *arrow.BooleanType:
		vals := randomBytes(int(bitutil.BytesForBits(int64(n))))
		data = array.NewData(dt, n, []*memory.Buffer{valid, vals}, nil, nullN, 0)
		vals.Release()
	default:
		vals := randomBytes(n * dt.(arrow.FixedWidthDataType).BitWidth() / 8)
		data = array.NewData(dt, n, []*memory.Buffer{valid, vals}, nil, nullN, 0)
		vals.Release()
	}
	if valid != nil {
		valid.Release()
	}
	defer data.Release()
	return array.MakeFromData(data)
}

// cell is row i of a as bytes: its value's (a dictionary's index), or its
// bit for booleans; "null" for a null.
func cell(a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return []byte("null")
	}
	d := a.Data()
	j := d.Offset() + i
	switch dt := a.DataType().(type) {
	case *arrow.BooleanType:
		if bitutil.BitIsSet(d.Buffers()[1].Bytes(), j) {
			return []byte{1}
		}
		return []byte{0}
	case *arrow.DictionaryType:
		w := dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		return d.Buffers()[1].Bytes()[j*w : (j+1)*w]
	default:
		w := dt.(arrow.FixedWidthDataType).BitWidth() / 8
		return d.Buffers()[1].Bytes()[j*w : (j+1)*w]
	}
}

func checkTaken(t *testing.T, name string, src, out arrow.Array, sel []int32) {
	t.Helper()
	if !arrow.TypeEqual(src.DataType(), out.DataType()) {
		t.Fatalf("%s: type %s, want %s", name, out.DataType(), src.DataType())
	}
	if out.Len() != len(sel) {
		t.Fatalf("%s: %d rows, want %d", name, out.Len(), len(sel))
	}
	nulls := 0
	for i, r := range sel {
		if src.IsNull(int(r)) {
			nulls++
		}
		if got, want := cell(out, i), cell(src, int(r)); !bytes.Equal(got, want) {
			t.Fatalf("%s: row %d (row %d of the column): %x, want %x", name, i, r, got, want)
		}
	}
	if out.NullN() != nulls {
		t.Fatalf("%s: %d nulls, want %d", name, out.NullN(), nulls)
	}
	if d, ok := out.(*array.Dictionary); ok && d.Dictionary() != nil {
		if !array.Equal(d.Dictionary(), src.(*array.Dictionary).Dictionary()) {
			t.Fatalf("%s: the dictionary changed", name)
		}
	}
	need := len(sel) * cellWidth(out)
	if cellWidth(out) == 0 {
		need = int(bitutil.BytesForBits(int64(len(sel))))
	}
	if out.Data().Buffers()[1].Len() < need {
		t.Fatalf("%s: a values buffer of %d bytes for %d rows", name, out.Data().Buffers()[1].Len(), len(sel))
	}
}

// cellWidth is a fixed-width column's bytes a value, 0 for booleans.
func cellWidth(a arrow.Array) int {
	switch dt := a.DataType().(type) {
	case *arrow.BooleanType:
		return 0
	case *arrow.DictionaryType:
		return dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
	default:
		return dt.(arrow.FixedWidthDataType).BitWidth() / 8
	}
}

// TestTakeColumnsFallback: a column takeFixed and takeBinary leave alone
// (a list) still goes through compute.Take, beside columns they take.
func TestTakeColumnsFallback(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer checked.AssertSize(t, 0)
	mem := buffer.NewRecycler(checked)
	defer mem.Close()
	lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
	ib := array.NewInt64Builder(mem)
	vb := lb.ValueBuilder().(*array.Int64Builder)
	for i := range 50 {
		lb.Append(true)
		for j := range i % 4 {
			vb.Append(int64(i*10 + j))
		}
		ib.Append(int64(i))
	}
	cols := []arrow.Array{lb.NewArray(), ib.NewArray()}
	lb.Release()
	ib.Release()
	defer cols[0].Release()
	defer cols[1].Release()
	sel := []int32{49, 3, 3, 0, 17}
	out, err := takeColumns(mem, cols, sel)
	if err != nil {
		t.Fatal(err)
	}
	for c, a := range out {
		for i, r := range sel {
			if got, want := a.ValueStr(i), cols[c].ValueStr(int(r)); got != want {
				t.Errorf("column %d, row %d (row %d): %s, want %s", c, i, r, got, want)
			}
		}
		a.Release()
	}
}
