package output

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// A row group's column is converted to a dictionary only while its
// dictionary stays under the writer's dictionary page limit: at it, the
// column writer would fall back to plain encoding, so the column is
// handed over as it is.
const maxDictBytes = int(parquet.DefaultDictionaryPageSizeLimit)

// dictColumn returns column col of a row group's batches (rows in all) as
// one dictionary array of type dt, the values in the order they first
// appear, each of them used; or nil if its dictionary would reach
// maxDictBytes. The column chunk then has one dictionary, as pqarrow
// requires (one that changes between its calls makes it fall back to
// plain encoding). The caller releases the array.
func dictColumn(recs []arrow.RecordBatch, col int, rows int, dt *arrow.DictionaryType, mem memory.Allocator) arrow.Array {
	idxBuf := memory.NewResizableBuffer(mem)
	defer idxBuf.Release()
	idxBuf.Resize(rows * arrow.Int32SizeBytes)
	idx := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(idxBuf.Bytes()))), rows)
	var dict arrow.Array
	switch dt.ValueType.ID() {
	case arrow.STRING, arrow.BINARY:
		dict = stringDict(recs, col, idx, dt.ValueType, mem)
	case arrow.FLOAT64, arrow.INT64:
		dict = fixedDict[uint64](recs, col, idx, dt.ValueType, mem)
	case arrow.FLOAT32, arrow.INT32:
		dict = fixedDict[uint32](recs, col, idx, dt.ValueType, mem)
	}
	if dict == nil {
		return nil
	}
	defer dict.Release()
	valid, nulls := concatValidity(recs, col, rows, mem)
	if valid != nil {
		defer valid.Release()
	}
	data := array.NewData(dt, rows, []*memory.Buffer{valid, idxBuf}, nil, nulls, 0)
	defer data.Release()
	data.SetDictionary(dict.Data())
	return array.MakeFromData(data)
}

// concatValidity is the validity bitmap of column col across recs, nil
// when it has no nulls, and its null count.
func concatValidity(recs []arrow.RecordBatch, col int, rows int, mem memory.Allocator) (*memory.Buffer, int) {
	var valid *memory.Buffer
	nulls, pos := 0, 0
	for _, r := range recs {
		a := r.Column(col)
		if a.NullN() > 0 {
			if valid == nil {
				valid = memory.NewResizableBuffer(mem)
				valid.Resize(int(bitutil.BytesForBits(int64(rows))))
				bitutil.SetBitsTo(valid.Bytes(), 0, int64(rows), true)
			}
			bitutil.CopyBitmap(a.NullBitmapBytes(), a.Data().Offset(), a.Len(), valid.Bytes(), pos)
			nulls += a.NullN()
		}
		pos += a.Len()
	}
	return valid, nulls
}

// stringDict fills idx with the dictionary indices of utf8 or binary
// column col and returns its dictionary (of type dt), or nil past
// maxDictBytes. Null rows get index 0.
func stringDict(recs []arrow.RecordBatch, col int, idx []int32, dt arrow.DataType, mem memory.Allocator) arrow.Array {
	index := newStringIndex()
	var values []string // the dictionary, in index order
	size := 0           // of the values
	pageSize := 0       // of the dictionary page, as pqarrow counts it
	pos := 0
	for _, r := range recs {
		a := r.Column(col)
		str := stringValues(a)
		var valid []byte // nil: no nulls
		if a.NullN() > 0 {
			valid = a.NullBitmapBytes()
		}
		off := a.Data().Offset()
		// Sorted results repeat a value over many rows: the last value
		// is checked before the index.
		prev, prevIdx := "", int32(-1)
		for i := range a.Len() {
			if valid != nil && !bitutil.BitIsSet(valid, off+i) {
				idx[pos+i] = 0
				continue
			}
			v := str(i)
			if prevIdx >= 0 && v == prev {
				idx[pos+i] = prevIdx
				continue
			}
			k, added := index.get(v, int32(len(values)))
			if added {
				if pageSize += len(v) + arrow.Uint32SizeBytes; pageSize >= maxDictBytes {
					return nil
				}
				size += len(v)
				values = append(values, v) // the batch's memory: dictValues copies it
			}
			idx[pos+i] = k
			prev, prevIdx = v, k
		}
		pos += a.Len()
	}
	return dictValues(dt, values, size, mem)
}

// fixedDict is stringDict for a column of float64 or int64 (K uint64) or
// float32 or int32 (K uint32), its values told apart by their bits (so
// zeros of both signs and NaNs of every payload stay what they are).
func fixedDict[K uint64 | uint32](recs []arrow.RecordBatch, col int, idx []int32, dt arrow.DataType, mem memory.Allocator) arrow.Array {
	index := newValueIndex(hashBits[K], func(k K) K { return k })
	var values []K
	pos := 0
	for _, r := range recs {
		a := r.Column(col)
		out := idx[pos : pos+a.Len()]
		pos += a.Len()
		vals := arrow.GetValues[K](a.Data(), 1)
		if len(vals) < len(out) { // no value buffer: every row is null
			clear(out)
			continue
		}
		var valid []byte // nil: no nulls
		if a.NullN() > 0 {
			valid = a.NullBitmapBytes()
		}
		off := a.Data().Offset()
		prev, prevIdx := K(0), int32(-1)
		for i, v := range vals {
			if valid != nil && !bitutil.BitIsSet(valid, off+i) {
				out[i] = 0
				continue
			}
			if v == prev && prevIdx >= 0 {
				out[i] = prevIdx
				continue
			}
			k, added := index.get(v, int32(len(values)))
			if added {
				if (len(values)+1)*int(unsafe.Sizeof(v)) >= maxDictBytes {
					return nil
				}
				values = append(values, v)
			}
			out[i] = k
			prev, prevIdx = v, k
		}
	}
	buf := memory.NewResizableBuffer(mem)
	defer buf.Release()
	buf.Resize(len(values) * int(unsafe.Sizeof(K(0))))
	copy(arrow.GetData[K](buf.Bytes()), values)
	data := array.NewData(dt, len(values), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// dictValues builds the dictionary array (utf8 or binary) of values, size
// bytes in all.
func dictValues(dt arrow.DataType, values []string, size int, mem memory.Allocator) arrow.Array {
	if dt.ID() == arrow.STRING {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(len(values))
		b.ReserveData(size)
		b.AppendValues(values, nil)
		return b.NewArray()
	}
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	b.Reserve(len(values))
	b.ReserveData(size)
	for _, v := range values {
		b.AppendString(v)
	}
	return b.NewArray()
}

// dictEncoder is the part of arrow-go's dictionary encoder (the column
// writer's current encoder while it dictionary-encodes) that
// writeDictColumn uses.
type dictEncoder interface {
	PutDictionary(arrow.Array) error
	NumEntries() int
}

// writeDictColumn writes a (non-nested) column chunk's values, a from
// dictColumn, as pqarrow's WriteArrowToColumn does for a dictionary array,
// less one step: pqarrow computes the distinct indices used (compute's
// unique kernel, a hash of every row, a tenth of BenchmarkParquet/cli's
// CPU) to take the statistics of only the dictionary values referenced;
// dictColumn's are all referenced, so the statistics are the dictionary's.
// It reports false, having written no values, when the column writer is
// not dictionary-encoding a fresh chunk or falls back: pqarrow is then
// given the array. arrow-go v18.8.0 cuts the pages of a dictionary-encoded
// chunk by the raw bytes its encoder was given, which indices are not: the
// chunk is one data page, as when pqarrow itself is given a dictionary
// array; readers read it as any other.
func writeDictColumn(cw file.ColumnChunkWriter, a *array.Dictionary, def []int16) (bool, error) {
	cur := cw.CurrentEncoder()
	enc, ok := cur.(dictEncoder)
	if !ok || cur.Encoding() != parquet.Encodings.PlainDict || enc.NumEntries() != 0 {
		return false, nil
	}
	dict := a.Dictionary()
	if err := enc.PutDictionary(dict); err != nil {
		return true, err
	}
	if enc.NumEntries() != dict.Len() {
		// Values the encoder takes for equal (NaNs of other payloads):
		// as pqarrow does, the chunk falls back to plain encoding, and
		// the array is written as its values.
		cw.FallbackToPlain()
		return false, nil
	}
	if st := cw.PageStatistics(); st != nil {
		values := a.Len() - a.NullN()
		st.IncNulls(int64(max(len(def)-values, 0)))
		st.IncNumValues(int64(values))
		if err := st.UpdateFromArrow(dict, false); err != nil {
			return true, err
		}
	}
	return true, cw.WriteDictIndices(a.Indices(), def, nil)
}
