package buffer

import (
	"fmt"
	"strings"
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
	// array returns the first n rows. own means the chunk is being sealed
	// and the column will not be appended to again.
	array(n int, own bool) arrow.Array
	// size is the memory held, in bytes.
	size() int64
}

// newColumn returns an empty column for a catalog logical type.
func newColumn(dt arrow.DataType) (column, error) {
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
		return newStringColumn(0), nil
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

// stringColumn dictionary-encodes its strings: each distinct string of the
// chunk is stored once, and each row holds an int32 index. Tags and other
// repeated strings of time series take 4 bytes a row instead of their length.
type stringColumn struct {
	idx     []int32
	valid   validity
	index   map[string]int32
	offsets []int32 // of the dictionary values; offsets[0] == 0
	data    []byte
}

// newStringColumn returns an empty string column expecting about
// distinct values.
func newStringColumn(distinct int) *stringColumn {
	return &stringColumn{index: make(map[string]int32, distinct), offsets: []int32{0}}
}

var stringDictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

func (c *stringColumn) appendFrom(arr arrow.Array, off, n int) error {
	sv, err := newStringValues(arr)
	if err != nil {
		return err
	}
	if sv.dict != nil {
		return c.appendDictionary(sv, off, n)
	}
	for i := off; i < off+n; i++ {
		if arr.IsNull(i) {
			c.idx = append(c.idx, c.nullIndex())
			continue
		}
		c.idx = append(c.idx, c.intern(sv.value(i)))
	}
	if len(c.data) > 1<<30 {
		return fmt.Errorf("buffer: string dictionary of a chunk over 1 GiB")
	}
	c.valid.appendFrom(arr, off, n)
	return nil
}

// appendDictionary appends dictionary-encoded strings, looking up each
// distinct value of the batch once rather than each row. The write path
// dictionary-encodes every string column before the WAL (see
// encodeStrings), so this is how rows reach the buffer, live and on replay.
func (c *stringColumn) appendDictionary(sv stringValues, off, n int) error {
	d := sv.dict
	dictLen := d.Dictionary().Len()
	// remap[i] is 1 + our index of the batch's dictionary value i.
	remap := make([]int32, dictLen)
	for i := off; i < off+n; i++ {
		if d.IsNull(i) {
			c.idx = append(c.idx, c.nullIndex())
			continue
		}
		di := d.GetValueIndex(i)
		if di < 0 || di >= dictLen {
			return fmt.Errorf("buffer: dictionary index %d out of range [0, %d)", di, dictLen)
		}
		id := remap[di] - 1
		if id < 0 {
			if sv.dstr != nil {
				id = c.intern(sv.dstr.Value(di))
			} else {
				id = c.intern(sv.dlarge.Value(di))
			}
			remap[di] = id + 1
		}
		c.idx = append(c.idx, id)
	}
	if len(c.data) > 1<<30 {
		return fmt.Errorf("buffer: string dictionary of a chunk over 1 GiB")
	}
	c.valid.appendFrom(d, off, n)
	return nil
}

func (c *stringColumn) intern(s string) int32 {
	if id, ok := c.index[s]; ok {
		return id
	}
	id := int32(len(c.offsets) - 1)
	c.data = append(c.data, s...)
	c.offsets = append(c.offsets, int32(len(c.data)))
	// s may point into an Arrow buffer that is released after the write;
	// the key must own its bytes.
	c.index[strings.Clone(s)] = id
	return id
}

// nullIndex is the index stored in null rows: it must point into the
// dictionary, since some readers look values up before checking validity.
func (c *stringColumn) nullIndex() int32 {
	if len(c.offsets) == 1 {
		return c.intern("")
	}
	return 0
}

func (c *stringColumn) appendNulls(n int) {
	id := c.nullIndex()
	for range n {
		c.idx = append(c.idx, id)
	}
	c.valid.appendNulls(n)
}

func (c *stringColumn) array(n int, own bool) arrow.Array {
	// The dictionary holds at least the strings of the first n rows; strings
	// interned later sit beyond and do no harm.
	nd := len(c.offsets) - 1
	offsets := c.offsets[: nd+1 : nd+1]
	data := c.data[:offsets[nd]:offsets[nd]]
	idx := c.idx[:n:n]
	if own {
		offsets = shrink(offsets)
		data = shrink(data)
		idx = shrink(idx)
		c.index = nil // let the map go with the chunk
	}
	dictData := array.NewData(arrow.BinaryTypes.String, nd,
		[]*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(offsets)), memory.NewBufferBytes(data)}, nil, 0, 0)
	defer dictData.Release()
	bitmap, nulls := c.valid.buffer(n, own)
	idxData := array.NewDataWithDictionary(stringDictType, n,
		[]*memory.Buffer{bitmap, memory.NewBufferBytes(bytesOf(idx))}, nulls, 0, dictData)
	defer idxData.Release()
	arr := array.MakeFromData(idxData).(*array.Dictionary)
	// Dictionary() builds its array on first call, unsynchronized; build it
	// now, before readers share the chunk.
	arr.Dictionary()
	return arr
}

func (c *stringColumn) size() int64 {
	// A Go map entry for a string key costs about 16 bytes of header plus
	// the index and bucket overhead; the string bytes are shared with no
	// one, so count them again.
	return int64(cap(c.idx))*4 + c.valid.size() + int64(cap(c.offsets))*4 + int64(cap(c.data)) +
		int64(len(c.index))*48 + int64(len(c.data))
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
