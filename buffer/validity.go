package buffer

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// validity is the null bitmap of a column being built. Until the first null
// arrives it holds no bitmap at all, which is the common case for time-series
// fields and saves a bit per row per column.
type validity struct {
	bits  []byte // nil while every value so far is valid
	n     int
	nulls int
}

func (v *validity) grow(n int) {
	need := int(bitutil.BytesForBits(int64(v.n + n)))
	if need > len(v.bits) {
		if need > cap(v.bits) {
			nb := make([]byte, need, max(need, 2*cap(v.bits)))
			copy(nb, v.bits)
			v.bits = nb
		} else {
			v.bits = v.bits[:need]
		}
	}
}

// materialize creates the bitmap with every bit so far set.
func (v *validity) materialize() {
	if v.bits != nil {
		return
	}
	v.bits = make([]byte, bitutil.BytesForBits(int64(v.n)), max(64, bitutil.BytesForBits(int64(v.n))*2))
	bitutil.SetBitsTo(v.bits, 0, int64(v.n), true)
}

func (v *validity) appendValid(n int) {
	if v.bits != nil {
		v.grow(n)
		bitutil.SetBitsTo(v.bits, int64(v.n), int64(n), true)
	}
	v.n += n
}

func (v *validity) appendNulls(n int) {
	v.materialize()
	v.grow(n)
	bitutil.SetBitsTo(v.bits, int64(v.n), int64(n), false)
	v.n += n
	v.nulls += n
}

// appendFrom appends the validity of arr's rows [off, off+n).
func (v *validity) appendFrom(arr arrow.Array, off, n int) {
	nulls := 0
	if arr.NullN() > 0 {
		nulls = n - bitutil.CountSetBits(arr.NullBitmapBytes(), arr.Data().Offset()+off, n)
	}
	if nulls == 0 {
		v.appendValid(n)
		return
	}
	v.materialize()
	v.grow(n)
	bitutil.CopyBitmap(arr.NullBitmapBytes(), arr.Data().Offset()+off, n, v.bits, v.n)
	v.n += n
	v.nulls += nulls
}

// buffer returns the bitmap of the first n rows as an Arrow buffer, or nil
// when they have no nulls. The bitmap's last byte may still change as rows
// are appended, so unless the column is being sealed it is copied.
func (v *validity) buffer(n int, own bool) (*memory.Buffer, int) {
	if v.bits == nil || v.nulls == 0 {
		return nil, 0
	}
	nb := int(bitutil.BytesForBits(int64(n)))
	var b []byte
	if own {
		b = v.bits[:nb]
	} else {
		b = make([]byte, nb)
		copy(b, v.bits[:nb])
	}
	nulls := n - bitutil.CountSetBits(b, 0, n)
	return memory.NewBufferBytes(b), nulls
}

func (v *validity) size() int64 { return int64(cap(v.bits)) }
