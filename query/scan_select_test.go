//go:build duckdb_arrow

package query

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
)

// TestTakeColumnsStrings: takeColumns of string and binary columns of
// values of very different lengths, with NULLs, through a buffer.Recycler
// (what the direct scan takes rows with), gives the selected rows
// (takeBinary, not arrow-go's Take: see there), all of each value.
func TestTakeColumnsStrings(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer checked.AssertSize(t, 0)
	mem := buffer.NewRecycler(checked)
	defer mem.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 3000
	sb := array.NewStringBuilder(mem)
	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	var want []string
	for i := range n {
		if i%17 == 0 {
			sb.AppendNull()
			bb.AppendNull()
			want = append(want, "<null>")
			continue
		}
		v := strings.Repeat(string(rune('a'+i%26)), rng.IntN(40)) // many empty and short, some long
		if rng.IntN(50) == 0 {
			v = strings.Repeat("x", 2000+rng.IntN(2000))
		}
		sb.Append(v)
		bb.Append([]byte(v))
		want = append(want, v)
	}
	cols := []arrow.Array{sb.NewArray(), bb.NewArray()}
	sb.Release()
	bb.Release()
	defer cols[0].Release()
	defer cols[1].Release()
	var sel []int32
	for i := range n {
		if rng.IntN(3) == 0 {
			sel = append(sel, int32(i))
		}
	}
	out, err := takeColumns(mem, cols, sel)
	if err != nil {
		t.Fatal(err)
	}
	for c, a := range out {
		if a.Len() != len(sel) {
			t.Fatalf("column %d: %d rows, want %d", c, a.Len(), len(sel))
		}
		for i, r := range sel {
			got := "<null>"
			if a.IsValid(i) {
				switch v := a.(type) {
				case *array.String:
					got = v.Value(i)
				case *array.Binary:
					got = string(v.Value(i))
				default:
					t.Fatalf("column %d is %T", c, a)
				}
			}
			if got != want[r] {
				t.Fatalf("column %d, row %d (of %d): %q, want %q", c, i, r, got, want[r])
			}
		}
		a.Release()
	}
}
