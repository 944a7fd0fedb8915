package persist

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// keyedRow is a row of keyedChunks: three string keys (nil is null) and
// a time.
type keyedRow struct {
	a, b, c *string
	time    int64
}

// keyedChunks builds chunks of rows with string columns a, b, c as the
// buffer holds them (dictionary<int32, utf8>), each chunk its own
// dictionary in shuffled order (so an index is not a rank); chunks listed
// in skipC lack column c (written before it was added).
func keyedChunks(t testing.TB, mem memory.Allocator, rng *rand.Rand, rows []keyedRow, sizes []int, skipC map[int]bool) []Chunk {
	t.Helper()
	var chunks []Chunk
	start := 0
	for ci, n := range sizes {
		part := rows[start : start+n]
		start += n
		fields := []arrow.Field{{Name: "time", Type: catalog.TimeType()}}
		tb := array.NewTimestampBuilder(mem, catalog.TimeType())
		c := Chunk{MinTime: part[0].time, MaxTime: part[0].time}
		for _, r := range part {
			tb.Append(arrow.Timestamp(r.time))
			c.MinTime, c.MaxTime = min(c.MinTime, r.time), max(c.MaxTime, r.time)
		}
		cols := []arrow.Array{tb.NewArray()}
		tb.Release()
		for k, name := range []string{"a", "b", "c"} {
			if k == 2 && skipC[ci] {
				continue
			}
			val := func(r keyedRow) *string { return []*string{r.a, r.b, r.c}[k] }
			index := map[string]int32{}
			var vals []string
			for _, r := range part {
				if v := val(r); v != nil {
					if _, ok := index[*v]; !ok {
						index[*v] = 0
						vals = append(vals, *v)
					}
				}
			}
			rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
			sb := array.NewStringBuilder(mem)
			for i, v := range vals {
				index[v] = int32(i)
				sb.Append(v)
			}
			dict := sb.NewArray()
			sb.Release()
			ib := array.NewInt32Builder(mem)
			for _, r := range part {
				if v := val(r); v != nil {
					ib.Append(index[*v])
				} else {
					ib.AppendNull()
				}
			}
			idx := ib.NewArray()
			ib.Release()
			cols = append(cols, array.NewDictionaryArray(dictType, idx, dict))
			idx.Release()
			dict.Release()
			fields = append(fields, arrow.Field{Name: name, Type: dictType, Nullable: true})
		}
		c.Rec = array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
		for _, a := range cols {
			a.Release()
		}
		chunks = append(chunks, c)
	}
	return chunks
}

// TestBucketSort: the permutation sorted through bucket keys is the order
// of the partition's rows by every string key (nulls last, a chunk
// without the column as nulls), then time, then buffer order: compared
// with a plain sort of the rows themselves, through the keyed path and
// through the chunks (buckets over maxKeyedRows).
func TestBucketSort(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	str := func(p string, n int, nulls int) *string {
		v := rng.IntN(n + nulls)
		if v >= n {
			return nil
		}
		s := fmt.Sprintf("%s-%d", p, v)
		return &s
	}
	var rows []keyedRow
	var sizes []int
	skipC := map[int]bool{}
	for ci := range 60 {
		n := 1 + rng.IntN(200)
		sizes = append(sizes, n)
		skipC[ci] = ci < 10 // the first chunks predate column c
		for range n {
			// Few times, so that ties go to the later keys and buffer order.
			rows = append(rows, keyedRow{a: str("a", 7, 1), b: str("b", 5, 1), c: str("c", 300, 20), time: int64(rng.IntN(50))})
		}
	}
	chunks := keyedChunks(t, mem, rng, rows, sizes, skipC)
	defer releaseChunks(chunks)
	out := arrow.NewSchema([]arrow.Field{{Name: "time", Type: catalog.TimeType()},
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "c", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	src, err := newPartSource(out, chunks, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer src.release()

	// The expected order: the rows' indices in buffer order, sorted.
	want := make([]int, len(rows))
	for i := range want {
		want[i] = i
	}
	for i := range skipC {
		if skipC[i] {
			first := 0
			for _, n := range sizes[:i] {
				first += n
			}
			for r := first; r < first+sizes[i]; r++ {
				rows[r].c = nil
			}
		}
	}
	nullsLast := func(x, y *string) int {
		switch {
		case x == nil && y == nil:
			return 0
		case x == nil:
			return 1
		case y == nil:
			return -1
		}
		return cmp.Compare(*x, *y)
	}
	slices.SortStableFunc(want, func(i, j int) int {
		x, y := rows[i], rows[j]
		if c := nullsLast(x.a, y.a); c != 0 {
			return c
		}
		if c := nullsLast(x.b, y.b); c != 0 {
			return c
		}
		if c := nullsLast(x.c, y.c); c != 0 {
			return c
		}
		return cmp.Compare(x.time, y.time)
	})
	// A permutation entry is chunk<<32 | row; the rows' index is their
	// place in buffer order.
	firstOf := make([]int, len(sizes))
	for i := 1; i < len(sizes); i++ {
		firstOf[i] = firstOf[i-1] + sizes[i-1]
	}
	check := func(t *testing.T) {
		for _, workers := range []int{1, 3} {
			perm := src.sortedPermutation(workers)
			got := perm.expand(0, perm.len(), nil)
			if len(got) != len(want) {
				t.Fatalf("%d rows in the permutation, want %d", len(got), len(want))
			}
			for i, v := range got {
				if r := firstOf[v>>32] + int(v&0xffffffff); r != want[i] {
					t.Fatalf("workers %d: row %d of the order is row %d of the buffer, want %d", workers, i, r, want[i])
				}
			}
		}
	}
	t.Run("keyed", check)
	t.Run("through the chunks", func(t *testing.T) {
		defer func(n int) { maxKeyedRows = n }(maxKeyedRows)
		maxKeyedRows = 1
		check(t)
	})
}
