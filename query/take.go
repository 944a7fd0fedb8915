//go:build duckdb_arrow

package query

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Gathering the selected rows of fixed-width columns (numbers, times,
// dates, durations, decimals, booleans) and of dictionary columns (their
// indices; the dictionary is shared, not copied) without arrow-go's
// compute.Take. A selective query over buffered chunks (one host's last
// 10 minutes: a few hundred rows out of two or three chunks) called Take
// once per column and chunk, and each call dispatched a kernel, built its
// datums and ran the kernel on a goroutine of its own whose stack then
// grew: a third of the server's CPU in a loop of such queries, most of it
// not the copying. takeFixed is a plain loop per width.

// takeFixed returns the rows sel of a fixed-width or dictionary column,
// nil for a column of another type (left to compute.Take). sel holds row
// numbers of c (its offset not included), each in [0, c.Len()).
func takeFixed(mem memory.Allocator, c arrow.Array, sel []int32) arrow.Array {
	d := c.Data()
	switch dt := c.DataType().(type) {
	case *arrow.DictionaryType:
		width := dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		valid, nulls := takeValidity(mem, c, sel)
		vals := takeBytes(mem, d.Buffers()[1], d.Offset(), width, sel)
		out := array.NewDataWithDictionary(dt, len(sel), []*memory.Buffer{valid, vals}, nulls, 0, d.Dictionary().(*array.Data))
		releaseBuffers(valid, vals)
		defer out.Release()
		return array.MakeFromData(out)
	case *arrow.BooleanType:
		valid, nulls := takeValidity(mem, c, sel)
		vals := takeBits(mem, d.Buffers()[1].Bytes(), d.Offset(), sel)
		out := array.NewData(dt, len(sel), []*memory.Buffer{valid, vals}, nil, nulls, 0)
		releaseBuffers(valid, vals)
		defer out.Release()
		return array.MakeFromData(out)
	case arrow.ExtensionType:
		return nil
	case arrow.FixedWidthDataType:
		bits := dt.BitWidth()
		if bits%8 != 0 || len(d.Buffers()) != 2 || len(d.Children()) != 0 {
			return nil
		}
		valid, nulls := takeValidity(mem, c, sel)
		vals := takeBytes(mem, d.Buffers()[1], d.Offset(), bits/8, sel)
		out := array.NewData(dt, len(sel), []*memory.Buffer{valid, vals}, nil, nulls, 0)
		releaseBuffers(valid, vals)
		defer out.Release()
		return array.MakeFromData(out)
	}
	return nil
}

func releaseBuffers(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}

// takeValidity is the validity bitmap of the rows sel of c and their
// count of nulls; nil and 0 when c has no nulls.
func takeValidity(mem memory.Allocator, c arrow.Array, sel []int32) (*memory.Buffer, int) {
	if c.NullN() == 0 {
		return nil, 0
	}
	out := takeBits(mem, c.NullBitmapBytes(), c.Data().Offset(), sel)
	return out, len(sel) - bitutil.CountSetBits(out.Bytes(), 0, len(sel))
}

// takeBits gathers the bits offset+sel[i] of bitmap.
func takeBits(mem memory.Allocator, bitmap []byte, offset int, sel []int32) *memory.Buffer {
	out := memory.NewResizableBuffer(mem)
	out.Resize(int(bitutil.BytesForBits(int64(len(sel)))))
	bs := out.Bytes()
	clear(bs)
	for i, r := range sel {
		if bitutil.BitIsSet(bitmap, offset+int(r)) {
			bitutil.SetBit(bs, i)
		}
	}
	return out
}

// takeBytes gathers the width-byte values offset+sel[i] of data.
func takeBytes(mem memory.Allocator, data *memory.Buffer, offset, width int, sel []int32) *memory.Buffer {
	out := memory.NewResizableBuffer(mem)
	out.Resize(len(sel) * width)
	gatherRows(out.Bytes(), data.Bytes()[offset*width:], width, sel)
	return out
}
