package buffer

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Sealed chunks hold most of the buffer's memory, for as long as their
// segment is buffered. With Config.ChunkAllocator set (the server's is
// internal/offheap's, outside the Go heap), sealing copies the open
// chunk's values, which were appended into Go slices, into one block of
// that allocator, each column's buffers sliced from it (64-byte aligned,
// as Arrow prefers). The block goes back to the allocator when the last
// slice is released: the chunk's record and every reader's reference to
// it (snapshots retain the record; DuckDB's conversion holds the exported
// arrays). The open chunk's slices are then garbage for the collector;
// their size is bounded by one chunk per partition being filled, not by
// the buffer. The copy costs one memcpy of each row, once.
//
// String dictionaries are shared by a partition's chunks and stay on the
// Go heap (the partition counts them); a column with child arrays (none
// of the buffer's types) would keep its Go memory.
const sealAlign = 64

// seal returns the open chunk as an immutable Chunk; the open chunk is not
// appended to again. mem nil keeps the values where they are (shrunk).
func (c *openChunk) seal(mem memory.Allocator) Chunk {
	if mem == nil {
		return c.chunk(true)
	}
	ch := c.chunk(false) // the values shared, not copied
	rec := relocate(ch.Rec, mem)
	ch.Rec.Release()
	ch.Rec = rec
	return ch
}

// relocate returns rec with the buffers of its columns copied into one
// block of mem.
func relocate(rec arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	total := 0
	for _, col := range rec.Columns() {
		if len(col.Data().Children()) > 0 {
			continue
		}
		for _, b := range col.Data().Buffers() {
			if b != nil {
				total += alignUp(b.Len())
			}
		}
	}
	if total == 0 {
		rec.Retain()
		return rec
	}
	block := memory.NewBufferWithAllocator(mem.Allocate(total), mem)
	defer block.Release()
	dst := block.Bytes()
	off := 0
	cols := make([]arrow.Array, rec.NumCols())
	for i, col := range rec.Columns() {
		d := col.Data()
		if len(d.Children()) > 0 {
			col.Retain()
			cols[i] = col
			continue
		}
		bufs := make([]*memory.Buffer, len(d.Buffers()))
		for j, b := range d.Buffers() {
			if b == nil {
				continue
			}
			n := copy(dst[off:off+b.Len()], b.Bytes())
			bufs[j] = memory.SliceBuffer(block, off, n)
			off += alignUp(n)
		}
		var nd *array.Data
		if dict := d.Dictionary(); dict != nil {
			nd = array.NewDataWithDictionary(d.DataType(), d.Len(), bufs, d.NullN(), d.Offset(), dict.(*array.Data))
		} else {
			nd = array.NewData(d.DataType(), d.Len(), bufs, nil, d.NullN(), d.Offset())
		}
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
		cols[i] = array.MakeFromData(nd)
		nd.Release()
		if da, ok := cols[i].(*array.Dictionary); ok {
			// Dictionary() builds its array on first call, unsynchronized;
			// build it now, before readers share the chunk.
			da.Dictionary()
		}
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func alignUp(n int) int { return (n + sealAlign - 1) &^ (sealAlign - 1) }
