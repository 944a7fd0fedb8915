package input

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// stringCol builds a utf8 column of a CSV chunk by writing offsets and
// bytes straight into Arrow buffers, as fixedCol does for numbers. An
// array.StringBuilder costs ~40 ns a value in a profile of `apron write`
// (a capacity check and a validity bit per value, the offset appended
// through two calls), more than scanning the field; this costs a copy.
// The offsets are sized from the splitter's row count and the data from
// the sample's average length; both grow by doubling when a chunk holds
// more.
type stringCol struct {
	mem   memory.Allocator
	offs  *memory.Buffer
	off   []int32 // a view of offs: off[i] is where value i starts
	data  *memory.Buffer
	buf   []byte // a view of data
	size  int    // bytes used in buf
	valid *memory.Buffer
	bits  []byte // nil until the first null
	n     int
	nulls int
}

func newStringCol(mem memory.Allocator, rows, dataBytes int) *stringCol {
	s := &stringCol{mem: mem, offs: memory.NewResizableBuffer(mem), data: memory.NewResizableBuffer(mem)}
	s.growRows(max(rows, 16))
	s.growData(max(dataBytes, 256))
	s.off[0] = 0
	return s
}

func (s *stringCol) rowCap() int { return len(s.off) - 1 }

func (s *stringCol) growRows(rows int) {
	s.offs.ResizeNoShrink((rows + 1) * 4)
	s.off = arrow.Int32Traits.CastFromBytes(s.offs.Bytes())
	if s.valid != nil {
		s.valid.ResizeNoShrink(int(bitutil.BytesForBits(int64(rows))))
		s.bits = s.valid.Bytes()
	}
}

func (s *stringCol) growData(n int) {
	s.data.ResizeNoShrink(n)
	s.buf = s.data.Bytes()
}

// put appends v. A chunk is at most 64 MiB plus a row (maxRowBytes), far
// from int32 offsets' 2 GiB; the check is for the day that changes.
func (s *stringCol) put(v []byte) error {
	if s.n == s.rowCap() {
		s.growRows(2 * s.n)
	}
	end := s.size + len(v)
	if end > len(s.buf) {
		if end > math.MaxInt32 {
			return fmt.Errorf("%w: the strings of one column of a batch pass 2 GiB: lower --batch-rows", ErrSyntax)
		}
		s.growData(max(2*len(s.buf), end))
	}
	copy(s.buf[s.size:end], v)
	s.size = end
	if s.bits != nil {
		bitutil.SetBit(s.bits, s.n)
	}
	s.n++
	s.off[s.n] = int32(end)
	return nil
}

func (s *stringCol) putNull() {
	if s.bits == nil {
		s.valid, s.bits = newValidity(s.mem, s.rowCap(), s.n)
	}
	if s.n == s.rowCap() {
		s.growRows(2 * s.n)
	}
	bitutil.ClearBit(s.bits, s.n)
	s.n++
	s.off[s.n] = int32(s.size)
	s.nulls++
}

func (s *stringCol) newArray() arrow.Array {
	s.offs.Resize((s.n + 1) * 4)
	s.data.Resize(s.size)
	data := array.NewData(arrow.BinaryTypes.String, s.n, []*memory.Buffer{cutValidity(s.valid, s.n), s.offs, s.data}, nil, s.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (s *stringCol) release() {
	s.offs.Release()
	s.data.Release()
	if s.valid != nil {
		s.valid.Release()
	}
}
