package buffer

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var stringDictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// stringDict interns the strings of one column of one partition. The
// chunks of the partition share it: each chunk's dictionary is the prefix
// of its values as they were when the chunk was built. Values are only ever
// appended, so that prefix never changes under a reader, and a tag's value
// is stored and hashed once per partition rather than once per chunk.
type stringDict struct {
	index   map[string]int32
	offsets []int32 // offsets[0] == 0
	data    []byte

	// remap caches, for the last dictionary-encoded input array, 1 + our
	// index of each of its values (0: not looked up yet). A batch spread
	// over several chunks is thus looked up once.
	src   arrow.Array
	remap []int32
	// srcOffsets and srcData are a copy of src's strings (offsets from
	// 0), kept when they are at most maxRemapCopy bytes (counted in
	// size): a writer's
	// batches each carry a dictionary of their own, most often with the
	// same strings in the same order as the one before (the same hosts
	// every second); remap then serves the next batch too, after a
	// comparison instead of a map lookup per string. A copy, because src
	// itself may have been released and its memory reused.
	srcOffsets []int32
	srcData    []byte

	chunks int // sealed chunks that use it

	// series, when not nil, numbers the values across the partition's
	// dictionaries of the column and looks them up in place of index
	// (which stays empty), and ids[i] is the i-th value's id (series.go);
	// gen is the dictionary's stamp in the space. Dropped, index made,
	// once the space is full.
	series *SeriesSpace
	gen    uint32
	ids    []int32
}

func newStringDict() *stringDict {
	return &stringDict{index: make(map[string]int32), offsets: []int32{0}}
}

func (d *stringDict) len() int { return len(d.offsets) - 1 }

func (d *stringDict) intern(s string) int32 {
	if d.series != nil {
		if id, ok := d.internSeries(s); ok {
			return id
		}
	}
	if id, ok := d.index[s]; ok {
		return id
	}
	id := d.add(s)
	// s may point into an Arrow buffer released after the write: the key
	// must own its bytes.
	d.index[strings.Clone(s)] = id
	return id
}

// add appends s to the values and returns its index.
func (d *stringDict) add(s string) int32 {
	id := int32(d.len())
	d.data = append(d.data, s...)
	d.offsets = append(d.offsets, int32(len(d.data)))
	return id
}

// values is the dictionary as it is now, sharing memory.
func (d *stringDict) values() arrow.ArrayData {
	nd := d.len()
	offsets := d.offsets[: nd+1 : nd+1]
	data := d.data[:offsets[nd]:offsets[nd]]
	return array.NewData(arrow.BinaryTypes.String, nd,
		[]*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(offsets)), memory.NewBufferBytes(data)}, nil, 0, 0)
}

// shrink copies the values into slices of their own length.
func (d *stringDict) shrink() {
	d.offsets = shrink(d.offsets)
	d.data = shrink(d.data)
	if d.ids != nil {
		d.ids = shrink(d.ids)
	}
}

func (d *stringDict) size() int64 {
	// A map entry costs its key's bytes again plus about 48 bytes.
	return int64(cap(d.offsets))*4 + int64(cap(d.data)) + int64(len(d.index))*48 + int64(len(d.data)) + int64(cap(d.ids))*4 +
		int64(cap(d.srcOffsets))*4 + int64(cap(d.srcData))
}

// stringColumn stores strings dictionary-encoded: each row holds an int32
// index into a stringDict. Tags and other repeated strings of time series
// take 4 bytes a row instead of their length.
type stringColumn struct {
	idx   []int32
	valid validity
	dict  *stringDict
}

// newStringColumn returns an empty string column over dict, or over a
// dictionary of its own when dict is nil.
func newStringColumn(dict *stringDict) *stringColumn {
	if dict == nil {
		dict = newStringDict()
	}
	return &stringColumn{dict: dict}
}

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
		c.idx = append(c.idx, c.dict.intern(sv.value(i)))
	}
	if len(c.dict.data) > 1<<30 {
		return fmt.Errorf("buffer: string dictionary over 1 GiB")
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
	if c.dict.src != d.Dictionary() {
		c.dict.setSource(sv, d.Dictionary())
	}
	remap := c.dict.remap
	lookup := func(di int) (int32, error) {
		if di < 0 || di >= dictLen {
			return 0, fmt.Errorf("buffer: dictionary index %d out of range [0, %d)", di, dictLen)
		}
		if id := remap[di]; id > 0 {
			return id - 1, nil
		}
		var id int32
		if sv.dstr != nil {
			id = c.dict.intern(sv.dstr.Value(di))
		} else {
			id = c.dict.intern(sv.dlarge.Value(di))
		}
		remap[di] = id + 1
		return id, nil
	}
	var idx32 []int32
	if d.Indices().DataType().ID() == arrow.INT32 {
		idx32 = valuesOf[int32](d.Indices())
	}
	if idx32 != nil && d.NullN() == 0 {
		// The common case (every string column is encoded so before the
		// WAL): a tight loop, values looked up once per batch.
		start := len(c.idx)
		if cap(c.idx) < start+n {
			c.idx = grow(c.idx, max(start+n, 2*cap(c.idx)))
		}
		c.idx = c.idx[:start+n]
		out := c.idx[start:]
		for i, di := range idx32[off : off+n] {
			if uint(di) < uint(len(remap)) {
				if id := remap[di]; id > 0 {
					out[i] = id - 1
					continue
				}
			}
			id, err := lookup(int(di))
			if err != nil {
				c.idx = c.idx[:start]
				return err
			}
			out[i] = id
		}
	} else if err := c.appendDictionarySlow(d, idx32, lookup, off, n); err != nil {
		return err
	}
	if len(c.dict.data) > 1<<30 {
		return fmt.Errorf("buffer: string dictionary over 1 GiB")
	}
	c.valid.appendFrom(d, off, n)
	return nil
}

// maxRemapCopy bounds the strings of a dictionary kept to compare the next
// one with (stringDict.srcData).
const maxRemapCopy = 64 << 10

// setSource makes src, the dictionary of sv, the one remap is for: the
// remap of the one before is kept if src holds the same strings in the
// same order.
func (d *stringDict) setSource(sv stringValues, src arrow.Array) {
	d.src = src
	n := src.Len()
	var data []byte
	var offsetAt func(i int) int64
	switch {
	case sv.dstr != nil:
		offs := sv.dstr.ValueOffsets()
		data, offsetAt = sv.dstr.ValueBytes(), func(i int) int64 { return int64(offs[i] - offs[0]) }
	case sv.dlarge != nil:
		offs := sv.dlarge.ValueOffsets()
		data, offsetAt = sv.dlarge.ValueBytes(), func(i int) int64 { return offs[i] - offs[0] }
	}
	if offsetAt != nil && len(d.remap) == n && len(d.srcOffsets) == n+1 && bytes.Equal(data, d.srcData) {
		same := true
		for i, o := range d.srcOffsets {
			if int64(o) != offsetAt(i) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	d.remap = make([]int32, n)
	d.srcOffsets, d.srcData = d.srcOffsets[:0], d.srcData[:0]
	if offsetAt == nil || len(data)+4*(n+1) > maxRemapCopy {
		d.srcOffsets, d.srcData = nil, nil
		return
	}
	for i := range n + 1 {
		d.srcOffsets = append(d.srcOffsets, int32(offsetAt(i)))
	}
	d.srcData = append(d.srcData, data...)
}

// appendDictionarySlow is appendDictionary's loop for nulls and indexes of
// other types.
func (c *stringColumn) appendDictionarySlow(d *array.Dictionary, idx32 []int32, lookup func(int) (int32, error), off, n int) error {
	for i := off; i < off+n; i++ {
		if d.IsNull(i) {
			c.idx = append(c.idx, c.nullIndex())
			continue
		}
		var di int
		if idx32 != nil {
			di = int(idx32[i])
		} else {
			di = d.GetValueIndex(i)
		}
		id, err := lookup(di)
		if err != nil {
			return err
		}
		c.idx = append(c.idx, id)
	}
	return nil
}

// nullIndex is the index stored in null rows: it must point into the
// dictionary, since some readers look values up before checking validity.
func (c *stringColumn) nullIndex() int32 {
	if c.dict.len() == 0 {
		return c.dict.intern("")
	}
	return 0
}

func (c *stringColumn) reserve(n int) { c.idx = grow(c.idx, n) }

func (c *stringColumn) appendNulls(n int) {
	id := c.nullIndex()
	for range n {
		c.idx = append(c.idx, id)
	}
	c.valid.appendNulls(n)
}

func (c *stringColumn) array(n int, own bool) arrow.Array {
	idx := c.idx[:n:n]
	if own {
		idx = shrink(c.idx[:n])
	}
	// The dictionary holds at least the strings of the first n rows; those
	// interned later sit beyond and do no harm.
	dictData := c.dict.values()
	defer dictData.Release()
	bitmap, nulls := c.valid.buffer(n, own)
	idxData := array.NewDataWithDictionary(stringDictType, n,
		[]*memory.Buffer{bitmap, memory.NewBufferBytes(bytesOf(idx))}, nulls, 0, dictData.(*array.Data))
	defer idxData.Release()
	arr := array.MakeFromData(idxData).(*array.Dictionary)
	// Dictionary() builds its array on first call, unsynchronized; build it
	// now, before readers share the chunk.
	arr.Dictionary()
	return arr
}

// size counts the indexes only: the dictionary is the partition's, counted
// there.
func (c *stringColumn) size() int64 { return int64(cap(c.idx))*4 + c.valid.size() }
