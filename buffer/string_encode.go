package buffer

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// maxEncodedDictBytes bounds the distinct strings of one encoded column;
// past it the column keeps its plain form (see encodeStrings).
const maxEncodedDictBytes = 1 << 30

// encodeStrings dictionary-encodes a utf8, large utf8 or dictionary-of-
// either column into dictionary<int32, utf8>, the distinct values in the
// order of their first row. Hashing each string once here, before the WAL,
// makes the WAL record smaller (repeated tags cost 4 bytes a row) and lets
// the buffer and replay intern each distinct value of a batch once instead
// of each row.
//
// It also checks what a client sent: offsets that go backwards or past the
// data, and dictionary indexes out of range, are errors (wrapping
// ErrInvalidBatch), found before anything is written. A column whose
// distinct strings pass 1 GiB is returned as it is (retained), to be
// interned row by row by the buffer.
func encodeStrings(arr arrow.Array) (arrow.Array, error) {
	var (
		out arrow.Array
		err error
	)
	switch a := arr.(type) {
	case *array.String:
		out, err = encodeOffsets(a, offsetsOf[int32](a), rawData(a))
	case *array.LargeString:
		out, err = encodeOffsets(a, offsetsOf[int64](a), rawData(a))
	case *array.Dictionary:
		out, err = encodeDictionary(a)
	default:
		return nil, fmt.Errorf("%w: string column of type %s", ErrInvalidBatch, arr.DataType())
	}
	if err != nil {
		return nil, err
	}
	if out == nil {
		arr.Retain()
		return arr, nil
	}
	return out, nil
}

// offsetsOf is the offsets of a variable-length array's rows, from its
// offset on: all the buffer holds, which validateOffsets checks against the
// array's length (arrow-go's ValueOffsets panics on a short buffer).
func offsetsOf[O int32 | int64](a arrow.Array) []O {
	b := a.Data().Buffers()[1]
	if b == nil {
		return nil
	}
	all := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(b.Bytes()))), b.Len()/int(unsafe.Sizeof(O(0))))
	if off := a.Data().Offset(); off < len(all) {
		return all[off:]
	}
	return nil
}

// rawData is the whole value buffer of a string array: offsets index it.
func rawData(a arrow.Array) []byte {
	if b := a.Data().Buffers()[2]; b != nil {
		return b.Bytes()
	}
	return nil
}

// encodeOffsets encodes the strings of arr given by offsets into data.
func encodeOffsets[O int32 | int64](arr arrow.Array, offsets []O, data []byte) (arrow.Array, error) {
	n := arr.Len()
	if err := validateOffsets(offsets, n, len(data)); err != nil {
		return nil, fmt.Errorf("string column: %w", err)
	}
	var e stringEncoder
	e.init(n)
	idx := make([]int32, n)
	var bitmap []byte
	if arr.NullN() > 0 {
		bitmap = arr.NullBitmapBytes()
	}
	off := arr.Data().Offset()
	for i := range n {
		if i == reserveCheckRow && 2*e.len() > i {
			e.reserve(n, i)
		}
		if bitmap != nil && !bitutil.BitIsSet(bitmap, off+i) {
			idx[i] = e.nullIndex()
			continue
		}
		start, l := int(offsets[i]), int(offsets[i+1]-offsets[i])
		// The common case inline: a short value away from the end of the
		// data, the same as the last one or found at its first slot.
		if l <= 16 && start+16 <= len(data) {
			k := wordsKey(data[start:start+16], l)
			if k == e.last && e.lastID >= 0 {
				idx[i] = e.lastID
				continue
			}
			h := k.hash()
			if slot := e.slots[h&e.mask]; slot>>32 == h>>32 {
				if id := int32(uint32(slot)) - 1; e.keys[id] == k {
					idx[i] = id
					e.last, e.lastID = k, id
					continue
				}
			}
		}
		id := e.intern(data, start, l)
		if e.full() {
			return nil, nil
		}
		idx[i] = id
	}
	return e.array(arr, idx), nil
}

// encodeDictionary re-encodes a dictionary column into ours: its values
// are interned once each (equal values merge), its indexes remapped.
func encodeDictionary(arr *array.Dictionary) (arrow.Array, error) {
	var (
		remap []int32
		e     stringEncoder
		err   error
	)
	switch d := arr.Dictionary().(type) {
	case *array.String:
		remap, err = internAll(&e, d, offsetsOf[int32](d), rawData(d))
	case *array.LargeString:
		remap, err = internAll(&e, d, offsetsOf[int64](d), rawData(d))
	default:
		return nil, fmt.Errorf("%w: string column with a dictionary of %s", ErrInvalidBatch, d.DataType())
	}
	if err != nil || remap == nil {
		return nil, err
	}
	n := arr.Len()
	idx := make([]int32, n)
	var bitmap []byte
	if arr.NullN() > 0 {
		bitmap = arr.NullBitmapBytes()
	}
	off := arr.Data().Offset()
	var idx32 []int32
	if arr.Indices().DataType().ID() == arrow.INT32 {
		idx32 = valuesOf[int32](arr.Indices())
	}
	for i := range n {
		if bitmap != nil && !bitutil.BitIsSet(bitmap, off+i) {
			idx[i] = e.nullIndex()
			continue
		}
		var di int
		if idx32 != nil {
			di = int(idx32[i])
		} else {
			di = arr.GetValueIndex(i)
		}
		if di < 0 || di >= len(remap) {
			return nil, fmt.Errorf("%w: string column row %d: dictionary index %d outside the dictionary's %d values", ErrInvalidBatch, i, di, len(remap))
		}
		idx[i] = remap[di]
	}
	return e.array(arr, idx), nil
}

// stringEncoder builds the dictionary of one column: an open-addressing
// hash table over the dictionary's own bytes. Strings of up to 16 bytes
// (most tags) are hashed and compared as two words and a length, without a
// call; longer ones with hash/maphash. A Go map keyed by string costs twice
// as much, and needs each key copied into a string of its own.
type stringEncoder struct {
	// slots hold a value's hash in the high 32 bits and its id + 1 in the
	// low ones; 0 is an empty slot.
	slots    []uint64
	mask     uint64
	keys     []shortKey // per id
	offsets  []int32    // offsets[0] == 0
	data     []byte
	overflow bool // see full
	// the last short value looked up and its id (-1: none yet)
	last   shortKey
	lastID int32
}

// shortKey is a string of at most 16 bytes as two little-endian words
// (zero past its end) and its length; n is -1 for a longer string.
type shortKey struct {
	a, b uint64
	n    int
}

// encoderSeed is per process, so that a client cannot aim at a known hash.
var (
	encoderSeed           = maphash.MakeSeed()
	shortSeedA, shortSeed = maphash.Comparable(encoderSeed, 1) | 1, maphash.Comparable(encoderSeed, 2)
)

// keyOf reads s (s = data[start:start+n]) as a shortKey; ok is false when
// it is longer than 16 bytes.
func keyOf(data []byte, start, n int) (k shortKey, ok bool) {
	if n > 16 {
		return shortKey{n: -1}, false
	}
	w := data[start:]
	if len(w) < 16 {
		var buf [16]byte
		copy(buf[:], data[start:start+n])
		w = buf[:]
	}
	return wordsKey(w, n), true
}

// wordsKey is the shortKey of the first n (<= 16) of the 16 bytes of w.
func wordsKey(w []byte, n int) shortKey {
	return shortKey{binary.LittleEndian.Uint64(w) & maskLow[n], binary.LittleEndian.Uint64(w[8:16]) & maskHigh[n], n}
}

// maskLow[n] and maskHigh[n] keep the first n bytes of a value read as
// two little-endian words.
var maskLow, maskHigh = func() (lo, hi [17]uint64) {
	for n := 1; n <= 16; n++ {
		lo[n] = ^uint64(0) >> (64 - 8*min(n, 8))
		if n > 8 {
			hi[n] = ^uint64(0) >> (64 - 8*(n-8))
		}
	}
	return lo, hi
}()

func (k shortKey) hash() uint64 {
	h := (k.a ^ shortSeed) * shortSeedA
	h ^= bits.RotateLeft64((k.b^uint64(k.n))*0x9e3779b97f4a7c15, 29)
	h ^= h >> 32
	h *= 0xd6e8feb86659fd93
	return h ^ h>>32
}

func (e *stringEncoder) init(rows int) {
	// Tags have few distinct values: start small, grow as needed.
	size := 1 << min(7, max(4, bits.Len(uint(4*rows))))
	e.slots = make([]uint64, size)
	e.mask = uint64(size - 1)
	e.offsets = make([]int32, 1, 64)
	e.keys = make([]shortKey, 0, 64)
	e.lastID = -1
}

func (e *stringEncoder) len() int { return len(e.offsets) - 1 }

// full: a value did not fit under maxEncodedDictBytes.
func (e *stringEncoder) full() bool { return e.overflow }

// intern returns the id of data[start:start+n], adding it if new.
func (e *stringEncoder) intern(data []byte, start, n int) int32 {
	k, short := keyOf(data, start, n)
	if !short {
		return e.lookup(k, false, data, start, n)
	}
	if k == e.last && e.lastID >= 0 {
		return e.lastID // a run of one value (rows sorted by series): no lookup
	}
	id := e.lookup(k, true, data, start, n)
	e.last, e.lastID = k, id
	return id
}

func (e *stringEncoder) lookup(k shortKey, short bool, data []byte, start, n int) int32 {
	var h uint64
	if short {
		h = k.hash()
	} else {
		h = maphash.Bytes(encoderSeed, data[start:start+n])
	}
	tag := h >> 32
	for i := h & e.mask; ; i = (i + 1) & e.mask {
		slot := e.slots[i]
		if slot == 0 {
			break
		}
		if slot>>32 != tag {
			continue
		}
		id := int32(slot&0xffffffff) - 1
		if short {
			if e.keys[id] == k {
				return id
			}
		} else if e.keys[id].n < 0 && string(e.data[e.offsets[id]:e.offsets[id+1]]) == string(data[start:start+n]) {
			return id
		}
	}
	id := int32(e.len())
	if len(e.data)+n > maxEncodedDictBytes {
		e.overflow = true
		return 0 // the caller gives up on encoding
	}
	e.data = append(e.data, data[start:start+n]...)
	e.offsets = append(e.offsets, int32(len(e.data)))
	e.keys = append(e.keys, k)
	e.insert(h, id)
	// At most a quarter full while the table is small (then most lookups
	// end at their first slot), half full once it is large.
	if 4*e.len() > len(e.slots) && len(e.slots) < 8192 || 2*e.len() > len(e.slots) {
		e.grow()
	}
	return id
}

func (e *stringEncoder) insert(h uint64, id int32) {
	i := h & e.mask
	for e.slots[i] != 0 {
		i = (i + 1) & e.mask
	}
	e.slots[i] = h>>32<<32 | uint64(id+1)
}

func (e *stringEncoder) grow() { e.rehash(2 * len(e.slots)) }

// reserveCheckRow is the row at which encodeOffsets looks at how many of
// the rows so far were new values: over half, and the column is taken for
// one of many series (a value per row in the batch), and the encoder is
// sized at once for every row to be new (reserve), instead of doubling its
// table and slices a dozen times on the way to 65,536 values (9 ms a
// 64k-row batch, against 0.8 with 1,000 values; 3.7-4.3 sized at once).
const reserveCheckRow = 4096

// reserve sizes the encoder for rows values in all, at the average length
// of the values of the first seen rows.
func (e *stringEncoder) reserve(rows, seen int) {
	if size := 1 << bits.Len(uint(2*rows)); size > len(e.slots) {
		e.rehash(size)
	}
	e.keys = slices.Grow(e.keys, rows-len(e.keys))
	e.offsets = slices.Grow(e.offsets, rows+1-len(e.offsets))
	if seen > 0 {
		e.data = slices.Grow(e.data, len(e.data)/seen*(rows-seen)+len(e.data)/8)
	}
}

// rehash moves every value into a table of size slots (a power of two).
func (e *stringEncoder) rehash(size int) {
	e.slots = make([]uint64, size)
	e.mask = uint64(len(e.slots) - 1)
	for id, k := range e.keys {
		var h uint64
		if k.n >= 0 {
			h = k.hash()
		} else {
			h = maphash.Bytes(encoderSeed, e.data[e.offsets[id]:e.offsets[id+1]])
		}
		e.insert(h, int32(id))
	}
}

// internAll interns every value of a dictionary, giving each index its id.
func internAll[O int32 | int64](e *stringEncoder, arr arrow.Array, offsets []O, data []byte) ([]int32, error) {
	n := arr.Len()
	if err := validateOffsets(offsets, n, len(data)); err != nil {
		return nil, fmt.Errorf("string column's dictionary: %w", err)
	}
	e.init(n)
	remap := make([]int32, n)
	for i := range n {
		// A null value of the dictionary reads as its bytes (""), as
		// arrow-go's Value gives it: only null indexes make null rows.
		remap[i] = e.intern(data, int(offsets[i]), int(offsets[i+1]-offsets[i]))
		if e.full() {
			return nil, nil
		}
	}
	return remap, nil
}

// validateOffsets checks the n+1 offsets of a variable-length column
// against its data: none negative, none going backwards, none past the end.
func validateOffsets[O int32 | int64](offsets []O, n, dataLen int) error {
	if len(offsets) < n+1 {
		return fmt.Errorf("%w: %d rows but %d offsets", ErrInvalidBatch, n, len(offsets))
	}
	if n == 0 {
		return nil
	}
	if offsets[0] < 0 || offsets[n] > O(dataLen) {
		return fmt.Errorf("%w: offsets from %d to %d outside the %d bytes of data", ErrInvalidBatch, offsets[0], offsets[n], dataLen)
	}
	for i := range n {
		if offsets[i+1] < offsets[i] {
			return fmt.Errorf("%w: row %d: offsets go backwards (%d, %d)", ErrInvalidBatch, i, offsets[i], offsets[i+1])
		}
	}
	return nil
}

// nullIndex is the index stored in null rows: it must point into the
// dictionary, since some readers look values up before checking validity.
func (e *stringEncoder) nullIndex() int32 {
	if e.len() == 0 {
		return e.intern(nil, 0, 0)
	}
	return 0
}

// array makes the encoded column: idx over the dictionary, with arr's
// validity.
func (e *stringEncoder) array(arr arrow.Array, idx []int32) arrow.Array {
	n := len(idx)
	var bitmap *memory.Buffer
	nulls := arr.NullN()
	if nulls > 0 {
		bits := make([]byte, bitutil.BytesForBits(int64(n)))
		bitutil.CopyBitmap(arr.NullBitmapBytes(), arr.Data().Offset(), n, bits, 0)
		bitmap = memory.NewBufferBytes(bits)
	}
	dict := array.NewData(arrow.BinaryTypes.String, e.len(),
		[]*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(e.offsets)), memory.NewBufferBytes(e.data)}, nil, 0, 0)
	defer dict.Release()
	data := array.NewDataWithDictionary(stringDictType, n, []*memory.Buffer{bitmap, memory.NewBufferBytes(bytesOf(idx))}, nulls, 0, dict)
	defer data.Release()
	out := array.MakeFromData(data).(*array.Dictionary)
	out.Dictionary() // built now, before the array is shared (see stringColumn.array)
	return out
}
