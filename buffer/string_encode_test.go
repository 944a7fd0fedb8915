package buffer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestEncodeStrings: every kind of string column encodes to a dictionary
// whose rows read as the input's (values, nulls, slicing), distinct values
// in first-row order, each once.
func TestEncodeStrings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rnd := rand.New(rand.NewPCG(1, 2))
	value := func(distinct int, prefix string) *string {
		if rnd.IntN(10) == 0 {
			return nil
		}
		s := prefix + strconv.Itoa(rnd.IntN(distinct))
		if rnd.IntN(7) == 0 {
			s = "" // the empty string is a value, not a null
		}
		return &s
	}
	for _, tc := range []struct {
		name     string
		rows     int
		distinct int
		typ      arrow.DataType
		prefix   string // values are prefix + a number
		sorted   bool   // in runs of a value
	}{
		// Short values (up to 16 bytes) and long ones take different paths.
		{"utf8-long-values", 5000, 40, arrow.BinaryTypes.String, "a-value-longer-than-16-bytes-", false},
		{"utf8-16-byte-values", 5000, 40, arrow.BinaryTypes.String, "sixteen-bytes-", false},
		{"utf8-runs", 5000, 30, arrow.BinaryTypes.String, "", true},
		{"utf8-long-runs", 5000, 30, arrow.BinaryTypes.String, "a-value-longer-than-16-bytes-", true},
		{"utf8", 5000, 20, arrow.BinaryTypes.String, "", false},
		// Past reserveCheckRow with over half its rows new: sized at once.
		{"utf8-many-distinct", 20000, 15000, arrow.BinaryTypes.String, "", false},
		{"utf8-long-many-distinct", 20000, 15000, arrow.BinaryTypes.String, "a-value-longer-than-16-bytes-", false},
		{"large-utf8", 3000, 50, arrow.BinaryTypes.LargeString, "", false},
		{"dictionary-int8", 3000, 40, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, "", false},
		{"dictionary-uint16-large", 3000, 300, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.LargeString}, "", false},
		{"dictionary-int32", 3000, 300, stringDictType, "", false},
		{"one-row", 1, 1, arrow.BinaryTypes.String, "", false},
		{"empty", 0, 1, arrow.BinaryTypes.String, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := tc.prefix
			if prefix == "" {
				prefix = "v-"
			}
			vals := make([]*string, tc.rows)
			for i := range vals {
				vals[i] = value(tc.distinct, prefix)
			}
			if tc.sorted {
				slices.SortFunc(vals, func(a, b *string) int {
					if a == nil || b == nil {
						return 0 // nulls stay among the runs
					}
					return strings.Compare(*a, *b)
				})
			}
			arr := buildStrings(t, mem, tc.typ, vals)
			defer arr.Release()
			// Whole, and sliced (the array's offset is not 0).
			for _, cut := range [][2]int{{0, tc.rows}, {tc.rows / 3, tc.rows - tc.rows/5}} {
				in := array.NewSlice(arr, int64(cut[0]), int64(cut[1]))
				out, err := encodeStrings(in)
				if err != nil {
					t.Fatal(err)
				}
				// A dictionary input keeps its values' order.
				checkEncoded(t, out, vals[cut[0]:cut[1]], tc.typ.ID() != arrow.DICTIONARY)
				out.Release()
				in.Release()
			}
		})
	}
}

// checkEncoded: out is a dictionary<int32, utf8> that reads as want, with
// each distinct value once, in first-row order if firstRowOrder.
func checkEncoded(t *testing.T, out arrow.Array, want []*string, firstRowOrder bool) {
	t.Helper()
	d, ok := out.(*array.Dictionary)
	if !ok || !arrow.TypeEqual(out.DataType(), stringDictType) {
		t.Fatalf("encoded as %s", out.DataType())
	}
	if d.Len() != len(want) {
		t.Fatalf("%d rows, want %d", d.Len(), len(want))
	}
	dict := d.Dictionary().(*array.String)
	var order []string
	seen := map[string]bool{}
	for i, w := range want {
		if w == nil {
			if !d.IsNull(i) {
				t.Fatalf("row %d: %q, want null", i, dict.Value(d.GetValueIndex(i)))
			}
			if d.GetValueIndex(i) >= dict.Len() {
				t.Fatalf("row %d: null row's index %d outside the dictionary", i, d.GetValueIndex(i))
			}
			continue
		}
		if d.IsNull(i) || dict.Value(d.GetValueIndex(i)) != *w {
			t.Fatalf("row %d: got %q (null %v), want %q", i, dict.Value(d.GetValueIndex(i)), d.IsNull(i), *w)
		}
		if !seen[*w] {
			seen[*w] = true
			order = append(order, *w)
		}
	}
	got := map[string]int{}
	for i := range dict.Len() {
		got[dict.Value(i)]++
	}
	for v, n := range got {
		if n > 1 {
			t.Fatalf("%q is %d times in the dictionary", v, n)
		}
	}
	if !firstRowOrder {
		return
	}
	// Non-null values in first-row order (a null may have added "" first).
	j := 0
	for i := 0; i < dict.Len() && j < len(order); i++ {
		if dict.Value(i) == order[j] {
			j++
		}
	}
	if j != len(order) {
		t.Fatalf("dictionary not in first-row order")
	}
}

func buildStrings(t *testing.T, mem memory.Allocator, typ arrow.DataType, vals []*string) arrow.Array {
	t.Helper()
	switch typ := typ.(type) {
	case *arrow.DictionaryType:
		// Values in the order met, each once, plus one value no row uses.
		var distinct []*string
		pos := map[string]int{}
		ib := array.NewBuilder(mem, typ.IndexType)
		defer ib.Release()
		for _, v := range vals {
			if v == nil {
				ib.AppendNull()
				continue
			}
			p, ok := pos[*v]
			if !ok {
				p = len(distinct)
				pos[*v] = p
				distinct = append(distinct, v)
			}
			switch ib := ib.(type) {
			case *array.Int8Builder:
				ib.Append(int8(p))
			case *array.Uint16Builder:
				ib.Append(uint16(p))
			case *array.Int32Builder:
				ib.Append(int32(p))
			default:
				t.Fatalf("index type %s", typ.IndexType)
			}
		}
		unused := "unused"
		values := buildStrings(t, mem, typ.ValueType, append(distinct, &unused))
		defer values.Release()
		idx := ib.NewArray()
		defer idx.Release()
		return array.NewDictionaryArray(typ, idx, values)
	default:
		b := array.NewBuilder(mem, typ)
		defer b.Release()
		for _, v := range vals {
			switch {
			case v == nil:
				b.AppendNull()
			case typ.ID() == arrow.STRING:
				b.(*array.StringBuilder).Append(*v)
			default:
				b.(*array.LargeStringBuilder).Append(*v)
			}
		}
		return b.NewArray()
	}
}

// TestEncodeStringsRejectsBadInput: offsets and indexes a client got wrong
// are ErrInvalidBatch errors, never a panic or a read out of bounds. (An
// offsets buffer too short for the rows, or a last offset past the data,
// arrow-go refuses already when the IPC reader makes the array.)
func TestEncodeStringsRejectsBadInput(t *testing.T) {
	offsets := func(o ...int32) *memory.Buffer { return memory.NewBufferBytes(bytesOf(o)) }
	data := memory.NewBufferBytes([]byte("abcdef"))
	str := func(n int, off *memory.Buffer) arrow.Array {
		d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, off, data}, nil, 0, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	dictOf := func(idx ...int32) arrow.Array {
		values := str(2, offsets(0, 1, 3))
		defer values.Release()
		d := array.NewDataWithDictionary(stringDictType, len(idx), []*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(idx))}, 0, 0, values.Data().(*array.Data))
		defer d.Release()
		return array.MakeFromData(d)
	}
	for _, tc := range []struct {
		name string
		arr  arrow.Array
		want string
	}{
		{"offsets-backwards", str(3, offsets(0, 4, 2, 6)), "row 1: offsets go backwards (4, 2)"},
		{"offset-past-data", str(2, offsets(0, 9, 3)), "row 1: offsets go backwards (9, 3)"},
		{"negative-offset", str(1, offsets(-1, 2)), "offsets from -1 to 2 outside the 6 bytes of data"},
		{"dictionary-index-past-end", dictOf(0, 1, 2), "row 2: dictionary index 2 outside the dictionary's 2 values"},
		{"dictionary-index-negative", dictOf(-3), "row 0: dictionary index -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.arr.Release()
			out, err := encodeStrings(tc.arr)
			if err == nil {
				out.Release()
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidBatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrInvalidBatch saying %q", err, tc.want)
			}
		})
	}
}

// BenchmarkEncodeStrings encodes a 64k-row column of "host-N" values
// with 5, 1000 and 65536 distinct ones, rows interleaved (as the bulk
// ingest benchmark sends its tags), next to the reference: the same column
// interned through a Go map (stringColumn).
func BenchmarkEncodeStrings(b *testing.B) {
	for _, distinct := range []int{5, 1000, 65536} {
		bld := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range 65536 {
			bld.Append("host-" + strconv.Itoa(i%distinct))
		}
		arr := bld.NewArray()
		bld.Release()
		size := int64(arr.Data().Buffers()[2].Len())
		b.Run(fmt.Sprintf("table/distinct-%d", distinct), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				out, err := encodeStrings(arr)
				if err != nil {
					b.Fatal(err)
				}
				out.Release()
			}
		})
		b.Run(fmt.Sprintf("go-map/distinct-%d", distinct), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				c := newStringColumn(nil)
				c.reserve(arr.Len())
				if err := c.appendFrom(arr, 0, arr.Len()); err != nil {
					b.Fatal(err)
				}
				c.array(arr.Len(), true).Release()
			}
		})
		arr.Release()
	}
}

// TestEncodeStringsZeroBytes: values that differ only in trailing zero
// bytes (equal as zero-padded words) stay distinct.
func TestEncodeStringsZeroBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var vals []*string
	for _, v := range []string{"", "\x00", "ab", "ab\x00", "ab\x00\x00", "abcdefgh", "abcdefgh\x00", "abcdefghijklmnop", "abcdefghijklmno\x00", "abcdefghijklmnop\x00", "ab"} {
		vals = append(vals, &v)
	}
	arr := buildStrings(t, mem, arrow.BinaryTypes.String, vals)
	defer arr.Release()
	out, err := encodeStrings(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	checkEncoded(t, out, vals, true)
	if n := out.(*array.Dictionary).Dictionary().Len(); n != len(vals)-1 {
		t.Fatalf("%d distinct values, want %d", n, len(vals)-1)
	}
}

// TestStringColumnAppendsRowByRow: rows appended one at a time (a batch
// whose rows alternate between partitions) grow the column's storage in
// proportion to its rows.
func TestStringColumnAppendsRowByRow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	vals := make([]*string, 10000)
	for i := range vals {
		s := "v-" + strconv.Itoa(i%7)
		vals[i] = &s
	}
	arr := buildStrings(t, mem, arrow.BinaryTypes.String, vals)
	defer arr.Release()
	enc, err := encodeStrings(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	c := newStringColumn(nil)
	for i := range enc.Len() {
		if err := c.appendFrom(enc, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.idx) != len(vals) || cap(c.idx) > 4*len(vals) {
		t.Fatalf("%d rows in a column of length %d, capacity %d", len(vals), len(c.idx), cap(c.idx))
	}
	got := c.array(len(vals), true)
	defer got.Release()
	checkEncoded(t, got, vals, true)
}

// TestStringColumnRemapAcrossBatches: batches whose dictionaries hold the
// same strings in the same order share one lookup of them
// (stringDict.setSource); any other dictionary, even one of the same
// bytes cut elsewhere, is looked up afresh, and every row reads back as
// written, whatever the memory of the batches before holds once released.
func TestStringColumnRemapAcrossBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := newStringColumn(nil)
	var want []*string
	add := func(vals ...string) {
		t.Helper()
		ptrs := make([]*string, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		arr := buildStrings(t, mem, arrow.BinaryTypes.String, ptrs)
		enc, err := encodeStrings(arr)
		arr.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.appendFrom(enc, 0, enc.Len()); err != nil {
			t.Fatal(err)
		}
		enc.Release()
		want = append(want, ptrs...)
	}
	add("host-a", "host-b", "host-a")
	remap := c.dict.remap
	add("host-a", "host-b", "host-b") // the same dictionary: its lookup is kept
	if &c.dict.remap[0] != &remap[0] {
		t.Error("a dictionary equal to the last one was looked up again")
	}
	add("host-ah", "ost-b", "host-ah") // the same bytes, cut elsewhere
	add("host-b", "host-a")            // the same strings in another order
	add("host-b", "host-a")
	add("x")
	got := c.array(len(want), true)
	defer got.Release()
	checkEncoded(t, got, want, true)
}
