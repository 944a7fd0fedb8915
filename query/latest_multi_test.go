//go:build duckdb_arrow

package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestLatestMultiNulls: the latest row per combination of several key
// columns (latest_multi.go) keeps NULL apart from every value, in
// chunks that have the column and in older ones written before it
// existed, with two and three key columns, checked against DuckDB; and
// the older chunks whose combinations all have later rows are left out.
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
