package buffer

import (
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// column accumulates the values of one column of the open chunk of a
// partition in plain Go slices.
//
// Rows are only ever appended, never changed, so an Arrow array over the
// first n rows stays valid while more rows are appended behind it: a reader's
// snapshot shares the value slices instead of copying them (only the null
// bitmap, whose last byte is shared with later rows, is copied). When the
// chunk is sealed, the slices are handed to Arrow as they are.
type column interface {
	// appendFrom appends rows [off, off+n) of arr, whose logical type is the
	// column's.
	appendFrom(arr arrow.Array, off, n int) error
	appendNulls(n int)
	// reserve makes room for n rows in all, so that a chunk that will be
	// filled is allocated once, at its final size.
	reserve(n int)
	// array returns the first n rows. own means the chunk is being sealed
	// and the column will not be appended to again.
	array(n int, own bool) arrow.Array
	// size is the memory held, in bytes.
	size() int64
}

// newColumn returns an empty column for a catalog logical type; string
// columns intern into dict.
func newColumn(dt arrow.DataType, dict *stringDict) (column, error) {
	switch dt.ID() {
	case arrow.INT8:
		return &fixedColumn[int8]{dt: dt}, nil
	case arrow.INT16:
		return &fixedColumn[int16]{dt: dt}, nil
	case arrow.INT32, arrow.DATE32:
		return &fixedColumn[int32]{dt: dt}, nil
	case arrow.INT64, arrow.TIMESTAMP, arrow.DATE64:
		return &fixedColumn[int64]{dt: dt}, nil
	case arrow.UINT8:
		return &fixedColumn[uint8]{dt: dt}, nil
	case arrow.UINT16:
		return &fixedColumn[uint16]{dt: dt}, nil
	case arrow.UINT32:
		return &fixedColumn[uint32]{dt: dt}, nil
	case arrow.UINT64:
		return &fixedColumn[uint64]{dt: dt}, nil
	case arrow.FLOAT32:
		return &fixedColumn[float32]{dt: dt}, nil
	case arrow.FLOAT64:
		return &fixedColumn[float64]{dt: dt}, nil
	case arrow.BOOL:
		return &boolColumn{}, nil
	case arrow.STRING:
		return newStringColumn(dict), nil
	case arrow.BINARY:
		return &binaryColumn{offsets: []int32{0}}, nil
	}
	return nil, fmt.Errorf("buffer: no column builder for type %s", dt)
}

type fixedWidth interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

type fixedColumn[T fixedWidth] struct {
	dt    arrow.DataType
	vals  []T
	valid validity
}

func (c *fixedColumn[T]) appendFrom(arr arrow.Array, off, n int) error {
	if arr.DataType().ID() != c.dt.ID() {
		return fmt.Errorf("buffer: column of type %s got values of type %s", c.dt, arr.DataType())
	}
	src := valuesOf[T](arr)
	c.vals = append(c.vals, src[off:off+n]...)
	c.valid.appendFrom(arr, off, n)
	return nil
}

func (c *fixedColumn[T]) reserve(n int) { c.vals = grow(c.vals, n) }

func (c *fixedColumn[T]) appendNulls(n int) {
	var zero T
	for range n {
		c.vals = append(c.vals, zero)
	}
	c.valid.appendNulls(n)
}

func (c *fixedColumn[T]) array(n int, own bool) arrow.Array {
	vals := c.vals[:n:n]
	if own {
		vals = shrink(c.vals[:n])
	}
	bitmap, nulls := c.valid.buffer(n, own)
	data := array.NewData(c.dt, n, []*memory.Buffer{bitmap, memory.NewBufferBytes(bytesOf(vals))}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (c *fixedColumn[T]) size() int64 {
	var zero T
	return int64(cap(c.vals))*int64(unsafe.Sizeof(zero)) + c.valid.size()
}

// valuesOf views the value buffer of a fixed-width array as a []T, from the
// array's first row (its offset applied).
func valuesOf[T fixedWidth](arr arrow.Array) []T {
	d := arr.Data()
	buf := d.Buffers()[1]
	if buf == nil || buf.Len() == 0 {
		return nil
	}
	b := buf.Bytes()
	var zero T
	sz := int(unsafe.Sizeof(zero))
	all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
	return all[d.Offset() : d.Offset()+d.Len()]
}

func bytesOf[T fixedWidth](vals []T) []byte {
	if len(vals) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)*int(unsafe.Sizeof(zero)))
}

type boolColumn struct {
	bits  []byte
	n     int
	valid validity
}

func (c *boolColumn) growBits(n int) {
	need := int(bitutil.BytesForBits(int64(c.n + n)))
	for len(c.bits) < need {
		c.bits = append(c.bits, 0)
	}
}

func (c *boolColumn) appendFrom(arr arrow.Array, off, n int) error {
	b, ok := arr.(*array.Boolean)
	if !ok {
		return fmt.Errorf("buffer: bool column got values of type %s", arr.DataType())
	}
	c.growBits(n)
	bitutil.CopyBitmap(b.Data().Buffers()[1].Bytes(), b.Data().Offset()+off, n, c.bits, c.n)
	c.n += n
	c.valid.appendFrom(arr, off, n)
	return nil
}

func (c *boolColumn) reserve(n int) { c.bits = grow(c.bits, int(bitutil.BytesForBits(int64(n)))) }

func (c *boolColumn) appendNulls(n int) {
	c.growBits(n)
	bitutil.SetBitsTo(c.bits, int64(c.n), int64(n), false)
	c.n += n
	c.valid.appendNulls(n)
}

func (c *boolColumn) array(n int, own bool) arrow.Array {
	nb := int(bitutil.BytesForBits(int64(n)))
	bits := c.bits[:nb:nb]
	if !own {
		// The last byte is shared with rows appended later.
		bits = append([]byte(nil), bits...)
	}
	bitmap, nulls := c.valid.buffer(n, own)
	data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{bitmap, memory.NewBufferBytes(bits)}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (c *boolColumn) size() int64 { return int64(cap(c.bits)) + c.valid.size() }

// stringValues reads the strings of a utf8, large utf8 or dictionary of
// either column.
type stringValues struct {
	str   *array.String
	large *array.LargeString
	dict  *array.Dictionary
	// of the dictionary's values, one of:
	dstr   *array.String
	dlarge *array.LargeString
}

func newStringValues(arr arrow.Array) (stringValues, error) {
	switch a := arr.(type) {
	case *array.String:
		return stringValues{str: a}, nil
	case *array.LargeString:
		return stringValues{large: a}, nil
	case *array.Dictionary:
		sv := stringValues{dict: a}
		switch d := a.Dictionary().(type) {
		case *array.String:
			sv.dstr = d
		case *array.LargeString:
			sv.dlarge = d
		default:
			return sv, fmt.Errorf("buffer: string column got a dictionary of %s", a.Dictionary().DataType())
		}
		return sv, nil
	}
	return stringValues{}, fmt.Errorf("buffer: string column got values of type %s", arr.DataType())
}

func (s stringValues) value(i int) string {
	switch {
	case s.str != nil:
		return s.str.Value(i)
	case s.large != nil:
		return s.large.Value(i)
	case s.dstr != nil:
		return s.dstr.Value(s.dict.GetValueIndex(i))
	default:
		return s.dlarge.Value(s.dict.GetValueIndex(i))
	}
}

type binaryColumn struct {
	offsets []int32
	data    []byte
	valid   validity
}

func (c *binaryColumn) appendFrom(arr arrow.Array, off, n int) error {
	var value func(int) []byte
	switch a := arr.(type) {
	case *array.Binary:
		value = a.Value
	case *array.LargeBinary:
		value = a.Value
	default:
		return fmt.Errorf("buffer: binary column got values of type %s", arr.DataType())
	}
	for i := off; i < off+n; i++ {
		if !arr.IsNull(i) {
			c.data = append(c.data, value(i)...)
		}
		if len(c.data) > 1<<30 {
			return fmt.Errorf("buffer: binary values of a chunk over 1 GiB")
		}
		c.offsets = append(c.offsets, int32(len(c.data)))
	}
	c.valid.appendFrom(arr, off, n)
	return nil
}

func (c *binaryColumn) reserve(n int) { c.offsets = grow(c.offsets, n+1) }

func (c *binaryColumn) appendNulls(n int) {
	for range n {
		c.offsets = append(c.offsets, int32(len(c.data)))
	}
	c.valid.appendNulls(n)
}

func (c *binaryColumn) array(n int, own bool) arrow.Array {
	offsets := c.offsets[: n+1 : n+1]
	data := c.data[:offsets[n]:offsets[n]]
	if own {
		offsets, data = shrink(offsets), shrink(data)
	}
	bitmap, nulls := c.valid.buffer(n, own)
	d := array.NewData(arrow.BinaryTypes.Binary, n,
		[]*memory.Buffer{bitmap, memory.NewBufferBytes(bytesOf(offsets)), memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func (c *binaryColumn) size() int64 {
	return int64(cap(c.offsets))*4 + int64(cap(c.data)) + c.valid.size()
}

// shrink copies s into a slice of its own length when append left more than
// an eighth of it unused: sealed chunks live until persisted.
func shrink[T fixedWidth](s []T) []T {
	if cap(s) > len(s)+len(s)/8 {
		return append([]T(nil), s...)
	}
	return s
}

// grow returns s with capacity for n elements in all.
func grow[T fixedWidth](s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	out := make([]T, len(s), n)
	copy(out, s)
	return out
}
