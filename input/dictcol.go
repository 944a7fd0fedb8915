package input

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dictType is the type of a CSV string column of few distinct values.
var dictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// dictCol builds a dictionary<int32, utf8> column of a CSV chunk: each
// distinct value once (in the order first seen, in a stringCol), and a
// row's index into them. A string column whose sample has few distinct
// values (a host, a region: inferCSV) is sent so: the batch carries a
// tag's bytes once instead of on every row, the IPC writer sends a
// dictionary again only when it changed, and the server looks each
// distinct value up once a batch instead of hashing every row
// (buffer/string_column.go), as for Parquet files' dictionary columns
// (parquet.go). The lookup here costs about what the copy of the value
// into a plain column did.
type dictCol struct {
	mem   memory.Allocator
	vals  *stringCol
	index map[string]int32
	idxs  *memory.Buffer
	idx   []int32 // a view of idxs
	valid *memory.Buffer
	bits  []byte // nil until the first null
	n     int
	nulls int
}

func newDictCol(mem memory.Allocator, rows, dataBytes int) *dictCol {
	d := &dictCol{mem: mem, vals: newStringCol(mem, 64, min(dataBytes, 4096)), index: make(map[string]int32), idxs: memory.NewResizableBuffer(mem)}
	d.growRows(max(rows, 16))
	return d
}

func (d *dictCol) growRows(rows int) {
	d.idxs.ResizeNoShrink(rows * 4)
	d.idx = arrow.Int32Traits.CastFromBytes(d.idxs.Bytes())
	if d.valid != nil {
		d.valid.ResizeNoShrink(int(bitutil.BytesForBits(int64(rows))))
		d.bits = d.valid.Bytes()
	}
}

// put appends v (not kept).
func (d *dictCol) put(v []byte) error {
	if d.n == len(d.idx) {
		d.growRows(2 * d.n)
	}
	id, ok := d.index[string(v)]
	if !ok {
		id = int32(d.vals.n)
		if err := d.vals.put(v); err != nil {
			return err
		}
		d.index[string(v)] = id
	}
	if d.bits != nil {
		bitutil.SetBit(d.bits, d.n)
	}
	d.idx[d.n] = id
	d.n++
	return nil
}

func (d *dictCol) putNull() {
	if d.bits == nil {
		d.valid, d.bits = newValidity(d.mem, len(d.idx), d.n)
	}
	if d.n == len(d.idx) {
		d.growRows(2 * d.n)
	}
	bitutil.ClearBit(d.bits, d.n)
	d.idx[d.n] = 0
	d.n++
	d.nulls++
}

func (d *dictCol) newArray() arrow.Array {
	d.idxs.Resize(d.n * 4)
	vals := d.vals.newArray()
	defer vals.Release()
	out := array.NewData(dictType, d.n, []*memory.Buffer{cutValidity(d.valid, d.n), d.idxs}, nil, d.nulls, 0)
	defer out.Release()
	out.SetDictionary(vals.Data())
	return array.MakeFromData(out)
}

func (d *dictCol) release() {
	d.vals.release()
	d.idxs.Release()
	if d.valid != nil {
		d.valid.Release()
	}
}
