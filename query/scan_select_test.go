//go:build duckdb_arrow

package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestSelectRowsBySeries: a dictionary's entries searched by series id
// (dictHits with ids) are the ones searched by string, for a chunk and
// then a longer one over the same dictionary memory (the entries past
// the first chunk's searched from where it stopped), for one value and
// for several, and none for a value of no entry.
func TestSelectRowsBySeries(t *testing.T) {
	v := newEnv(t, Config{})
	const hosts = 10
	vals := make([]any, 0, 40)
	ts := make([]any, 0, 40)
	for i := range 40 {
		vals = append(vals, fmt.Sprintf("g%d", i%hosts))
		ts = append(ts, base+int64(i))
	}
	v.write("db", "grow", batch(v.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, vals}))
	view := v.wb.View()
	defer view.Release()
	var chunk buffer.Chunk
	for _, seg := range view.Buffered {
		for _, c := range view.Chunks(seg, "db", "grow") {
			chunk = c
			defer c.Rec.Release()
		}
	}
	ids, ok := chunk.Series["host"]
	if !ok || len(ids.IDs) != hosts {
		t.Fatalf("the chunk's host has series ids %v, want %d", ids, hosts)
	}
	dict := chunk.Rec.Column(chunk.Rec.Schema().FieldIndices("host")[0]).(*array.Dictionary).Dictionary().(*array.String)
	// rec of the dictionary's first n entries, one row of each code and
	// a NULL, and ids of those entries.
	recOf := func(n int) (arrow.RecordBatch, map[string]buffer.SeriesIDs) {
		d := array.NewSlice(dict, 0, int64(n))
		defer d.Release()
		ib := array.NewInt32Builder(memory.DefaultAllocator)
		defer ib.Release()
		for k := range n {
			ib.Append(int32(n - 1 - k))
		}
		ib.AppendNull()
		idx := ib.NewArray()
		defer idx.Release()
		a := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, idx, d)
		defer a.Release()
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "host", Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, int64(n+1))
		sid := ids
		sid.IDs = ids.IDs[:n]
		return rec, map[string]buffer.SeriesIDs{"host": sid}
	}
	short, shortIDs := recOf(4)
	defer short.Release()
	long, longIDs := recOf(hosts)
	defer long.Release()
	for _, want := range [][]string{{dict.Value(7)}, {dict.Value(1), dict.Value(8)}, {dict.Value(2), "nope", dict.Value(9)}, {"nope"}} {
		slices.Sort(want)
		equals := map[string][]string{"host": want}
		memo := newSelectMemo()
		for _, c := range []struct {
			rec arrow.RecordBatch
			ids map[string]buffer.SeriesIDs
		}{{short, shortIDs}, {long, longIDs}} {
			byID, _, _ := selectRows(c.rec, c.ids, equals, memo)
			byString, _, _ := selectRows(c.rec, nil, equals, nil)
			if !slices.Equal(byID, byString) {
				t.Errorf("%q in %d entries: rows %v by id, %v by string", want, c.rec.NumRows()-1, byID, byString)
			}
		}
		if len(memo.wanted) != 1 {
			t.Errorf("%q: searched by id in %d spaces, want 1", want, len(memo.wanted))
		}
	}
}
