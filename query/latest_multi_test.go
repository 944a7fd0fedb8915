//go:build duckdb_arrow

package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
)

// TestLatestMultiNulls: the latest row per combination of several key
// columns (latest_multi.go) keeps NULL apart from every value, in
// chunks that have the column and in older ones written before it
// existed, with two and three key columns, and with equalities of
// string columns, grouped by or not, checked against DuckDB; and the
// older chunks whose combinations all have later rows are left out.
func TestLatestMultiNulls(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.tags (time TIMESTAMP_NS, host VARCHAR, region VARCHAR, az VARCHAR)`)
	const n = 8192 // a chunk each
	write := func(start int64, host func(i int) any, region func(i int) any) {
		ts, hosts, regions, azs := make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			ts[i] = start + int64(i)*int64(time.Millisecond)
			hosts[i] = host(i)
			azs[i] = fmt.Sprintf("az%d", i%2)
		}
		cols := []col{{"time", tsNs, ts}, {"host", arrow.BinaryTypes.String, hosts}}
		if region != nil {
			for i := range n {
				regions[i] = region(i)
			}
			cols = append(cols, col{"region", arrow.BinaryTypes.String, regions}, col{"az", arrow.BinaryTypes.String, azs})
		}
		rec := batch(s.mem, cols...)
		ref.append("db", "tags", rec)
		s.write("db", "tags", rec)
	}
	hosts := func(i int) any { return fmt.Sprintf("h%d", i%3) }
	step := int64(10 * time.Second)
	// Before the table had region and az: (h2, NULL, NULL) only here.
	write(base, func(i int) any { return fmt.Sprintf("h%d", 2+i%2) }, nil)
	// (h1, NULL, …) has its latest rows here, beside (h1, r0, …).
	write(base+step, hosts, func(i int) any {
		if i%3 == 1 && i%2 == 0 {
			return nil
		}
		return "r0"
	})
	// Older than what follows, and all of it there again later: left out.
	write(base+2*step, hosts, func(int) any { return "r0" })
	write(base+3*step, hosts, func(int) any { return "r0" })
	queries := []string{
		"SELECT host, region, max(time) FROM db.tags GROUP BY host, region",
		"SELECT host, region, az, max(time) FROM db.tags GROUP BY host, region, az",
		"SELECT region, host, arg_max(az, time) FROM db.tags GROUP BY region, host",
		// Equalities: only the combinations of their values need a
		// later row; NULL is none of them.
		"SELECT host, max(time) FROM db.tags WHERE region = 'r0' GROUP BY host",
		"SELECT host, region, arg_max(az, time) FROM db.tags WHERE az = 'az1' GROUP BY host, region",
		"SELECT host, max(time) FROM db.tags WHERE region IN ('r9', 'nope') AND host = 'h1' GROUP BY host",
		"SELECT az, max(time) FROM db.tags WHERE host IN ('h1', 'h2') AND region = 'r0' GROUP BY az",
		// How many series per group: NULL is no value counted.
		"SELECT region, count(DISTINCT host) FROM db.tags GROUP BY region",
		"SELECT region, count(DISTINCT host), count(DISTINCT az), max(time) FROM db.tags GROUP BY region",
	}
	check := func(when string) {
		t.Helper()
		for _, q := range queries {
			before := s.e.Stats()
			equalRows(t, when+": "+q, sorted(s.query(q, "")), sorted(ref.query(q)))
			if st := s.e.Stats(); st.LatestChunks == before.LatestChunks {
				t.Errorf("%s: %s: no chunk left out", when, q)
			}
		}
	}
	// Each chunk's combinations are found by a pass over its rows, kept
	// (latest_combos.go), and then read from what is kept.
	check("first")
	// Rows of values an equality does not admit need no later row: the
	// three older chunks go, the first (h3's only, of no region) and the
	// second ((h1, NULL)'s latest) among them.
	q := "SELECT host, max(time) FROM db.tags WHERE region = 'r0' GROUP BY host"
	before := s.e.Stats()
	equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	if got := s.e.Stats().LatestChunks - before.LatestChunks; got != 3 {
		t.Errorf("%s: %d chunks left out, want 3", q, got)
	}
	if kept := len(s.e.latestCombos.m); kept == 0 {
		t.Fatalf("no chunk's combinations kept")
	}
	check("again")
	// Rows that change the answers: a new combination, (h1, NULL, …)
	// newer, and combinations of the first chunk's again: the kept
	// combinations of the older chunks still hold.
	write(base+4*step, func(i int) any { return fmt.Sprintf("h%d", 1+i%3) }, func(i int) any {
		switch i % 4 {
		case 0:
			return nil
		case 1:
			return "r9"
		}
		return "r0"
	})
	check("after more rows")
}

// TestMultiMemosBounded: chunks of dictionaries of their own each need a
// memo of their combinations; past the memos' bound they go, one's
// memory taken again, and every chunk is still checked against the
// bounds as they are.
func TestMultiMemosBounded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := newMultiBounds(nil, []string{"host", "region"})
	b.memoLimit = 300 // a few chunks' numbers, not all six
	const n = 10
	chunk := func(c int) arrow.RecordBatch {
		ts := make([]arrow.Timestamp, n)
		hosts, regions := make([]string, n), make([]string, n)
		for i := range n {
			ts[i] = arrow.Timestamp(base + int64(c*n+i))
			// Regions in another order in each chunk: each has other
			// combination numbers.
			hosts[i], regions[i] = fmt.Sprintf("c%d-h%d", c, i), fmt.Sprintf("r%d", (i*c)%n)
		}
		tb := array.NewTimestampBuilder(mem, tsNs)
		defer tb.Release()
		tb.AppendValues(ts, nil)
		times := tb.NewArray()
		defer times.Release()
		cols := []arrow.Array{times}
		fields := []arrow.Field{{Name: "time", Type: tsNs}}
		for _, vals := range []struct {
			name string
			v    []string
		}{{"host", hosts}, {"region", regions}} {
			db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
			for _, v := range vals.v {
				if err := db.AppendString(v); err != nil {
					t.Fatal(err)
				}
			}
			a := db.NewArray()
			db.Release()
			defer a.Release()
			cols = append(cols, a)
			fields = append(fields, arrow.Field{Name: vals.name, Type: a.DataType(), Nullable: true})
		}
		return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, n)
	}
	// The chunks stay alive, as a pruning's do: a memo is named by its
	// dictionaries' memory.
	recs := make([]arrow.RecordBatch, 6)
	for c := range recs {
		recs[c] = chunk(c)
		defer recs[c].Release()
	}
	find := multiColsFinder{cols: b.cols}
	check := func(round string, order []int, want bool) {
		t.Helper()
		for _, c := range order {
			m, ok := find.of(recs[c])
			if !ok {
				t.Fatal("no key columns")
			}
			if got := b.covered(m, n, base+int64(c*n+n-1)); got != want {
				t.Errorf("%s: chunk %d covered %v, want %v", round, c, got, want)
			}
			if round == "none" {
				b.credit(recs[c], m, nil)
			}
			held := 0
			for _, mm := range b.memos {
				held += len(mm.bounds)
			}
			if held > b.memoLimit {
				t.Errorf("%s: %d memos of %d numbers, over %d", round, len(b.memos), held, b.memoLimit)
			}
		}
	}
	check("none", []int{0, 1, 2, 3, 4, 5}, false)
	// Each combination's bound is its own row's time; newest first, so
	// that the memos left are of the oldest chunks, whose bounds come
	// before the next chunks' times.
	check("own rows", []int{5, 4, 3, 2, 1, 0}, false)
	for k := range b.bound {
		b.bound[k] = base + 1000
	}
	b.version++
	// Newest first again: the first chunks take the memory of the memos
	// of the oldest, whose numbers looked up before must not answer.
	check("later", []int{5, 4, 3, 2, 1, 0}, true)
}
