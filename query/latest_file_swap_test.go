//go:build duckdb_arrow

package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestLatestFilesAsRows: a latest row per key that DuckDB answers (several
// key columns; one key with an ORDER BY of an aggregate) is given
// persisted files as their latest rows (latest_file_swap.go), and answers
// as DuckDB does over every row. Three files and buffered rows: the
// oldest file written before the table had region (NULL in each of its
// combinations); the second of over 64k rows (read in several batches,
// each of its own dictionaries), whose rows of h1 end in a NULL usage, so
// arg_max(usage, time) must read it whole for an older usage; bounds on
// time at every chunk's and file's edges (a file past the upper bound is
// read whole).
func TestLatestFilesAsRows(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 5)
	host := func(int) any { return fmt.Sprintf("h%d", rng.IntN(10)) }
	usage := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	hour := int64(time.Hour)
	// File 1: no region yet.
	write(base, hour/2, 5000, host, usage, false)
	s.roll()
	s.waitReleased(t, 1)
	// File 2: 70,000 rows, then rows of h1 (and others) without usage.
	write(base+hour, hour/2, 70_000, host, usage, true)
	write(base+hour+hour/2, hour/4, 2000, host, func(_ int, h any) any {
		if h == "h1" {
			return nil
		}
		return usage(0, h)
	}, true)
	s.roll()
	s.waitReleased(t, 2)
	// Buffered: no h1.
	write(base+3*hour, hour/2, 9000, func(int) any { return fmt.Sprintf("h%d", 2+rng.IntN(8)) }, usage, true)

	queries := []string{
		"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region",
		"SELECT host, region, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host, region",
		"SELECT host, region, arg_max_null(usage, time) FROM db.cpu GROUP BY host, region",
		"SELECT region, host, max(time) AS t FROM db.cpu GROUP BY region, host ORDER BY t DESC LIMIT 7",
		"SELECT host, arg_max(usage, time) AS u FROM db.cpu GROUP BY host ORDER BY u DESC",
		"SELECT host, max(time) AS t, arg_max_null(usage, time) AS u FROM db.cpu GROUP BY host ORDER BY u, host",
		// Equalities of a column not grouped by (latest_multi.go).
		"SELECT host, arg_max(usage, time), max(time) FROM db.cpu WHERE region = 'r1' GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE region IN ('r0', 'r2') AND host IN ('h1', 'h3', 'h5') GROUP BY host",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE region = 'nope' GROUP BY host",
		"SELECT region, max(time) FROM db.cpu WHERE host = 'h1' GROUP BY region",
		// How many series per group (latest_multi.go).
		"SELECT region, count(DISTINCT host) FROM db.cpu GROUP BY region",
		"SELECT host, count(DISTINCT region), max(time) FROM db.cpu GROUP BY host",
		"SELECT region, count(DISTINCT host) AS n FROM db.cpu WHERE host IN ('h1', 'h2', 'h9') GROUP BY region ORDER BY n, region",
	}
	edges := timeEdges(s, "db", "cpu")
	for i, e := range edges {
		other := edges[(i*5+3)%len(edges)]
		lo, hi := min(e, other), max(e, other)
		queries = append(queries,
			fmt.Sprintf("SELECT host, region, max(time), arg_max(usage, time) FROM db.cpu WHERE time >= %s GROUP BY host, region", nsLiteral(e)),
			fmt.Sprintf("SELECT host, region, arg_max_null(usage, time) FROM db.cpu WHERE time > %s AND time <= %s GROUP BY host, region", nsLiteral(lo), nsLiteral(hi)),
			fmt.Sprintf("SELECT host, region, max(time) FROM db.cpu WHERE time < %s GROUP BY host, region", nsLiteral(e)),
			fmt.Sprintf("SELECT host, arg_max(usage, time) AS u FROM db.cpu WHERE time <= %s GROUP BY host ORDER BY u", nsLiteral(e)),
			fmt.Sprintf("SELECT host, max(time), arg_max(usage, time) FROM db.cpu WHERE region = 'r%d' AND time >= %s GROUP BY host", i%3, nsLiteral(e)),
			fmt.Sprintf("SELECT region, count(DISTINCT host), max(time) FROM db.cpu WHERE time >= %s AND time < %s GROUP BY region", nsLiteral(lo), nsLiteral(hi)))
	}
	before := s.e.Stats()
	for _, q := range queries {
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	}
	st := s.e.Stats()
	t.Logf("%d files read as their latest rows over %d queries", st.LatestFileSwaps-before.LatestFileSwaps, len(queries))

	// Each file is read as its rows where they stand for it, and whole
	// where they do not; without an ORDER BY the rows are picked
	// without DuckDB (latest_multi_direct.go) unless a picked row has no
	// usage for arg_max.
	paths := func(q string) (swaps, direct int64) {
		t.Helper()
		before := s.e.Stats()
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
		after := s.e.Stats()
		return after.LatestFileSwaps - before.LatestFileSwaps, after.DirectScans - before.DirectScans
	}
	for _, c := range []struct {
		q      string
		swaps  int64
		direct int64
	}{
		{"SELECT host, region, max(time) AS t FROM db.cpu GROUP BY host, region ORDER BY t", 2, 0},
		{"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region", 0, 1},
		// File 2's latest rows of h1 have no usage.
		{"SELECT host, region, arg_max(usage, time) AS u FROM db.cpu GROUP BY host, region ORDER BY u", 1, 0},
		{"SELECT host, region, arg_max(usage, time) FROM db.cpu GROUP BY host, region", 1, 0},
		{"SELECT host, region, arg_max_null(usage, time) AS u FROM db.cpu GROUP BY host, region ORDER BY u", 2, 0},
		{"SELECT host, region, arg_max_null(usage, time) FROM db.cpu GROUP BY host, region", 0, 1},
		// File 2 has rows past the upper bound.
		{fmt.Sprintf("SELECT host, region, max(time) AS t FROM db.cpu WHERE time <= %s GROUP BY host, region ORDER BY t", nsLiteral(base+hour+hour/4)), 1, 0},
		{fmt.Sprintf("SELECT host, region, max(time) FROM db.cpu WHERE time <= %s GROUP BY host, region", nsLiteral(base+hour+hour/4)), 1, 0},
		{fmt.Sprintf("SELECT host, region, max(time) FROM db.cpu WHERE time >= %s GROUP BY host, region", nsLiteral(base+hour+hour/4)), 0, 1},
		{"SELECT host, region, max(time) FROM db.cpu WHERE region IN ('r1', 'r2') GROUP BY host, region", 0, 1},
		// region is a key of the pruning, not of the answer: of one
		// value, each (host, region) is a host's row; of two, DuckDB
		// takes the later of a host's two.
		{"SELECT host, max(time) FROM db.cpu WHERE region IN ('r1', 'r2') GROUP BY host", 2, 0},
		{"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE region = 'r1' GROUP BY host", 0, 1},
		{"SELECT host, max(time) FROM db.cpu WHERE region = 'r1' AND region = 'r2' GROUP BY host", 0, 1},
	} {
		if swaps, direct := paths(c.q); swaps != c.swaps || direct != c.direct {
			t.Errorf("%s: %d files read as their latest rows, %d direct scans; want %d, %d", c.q, swaps, direct, c.swaps, c.direct)
		}
	}

	// The files' latest rows of (host, region) are one a combination.
	v := s.wb.View()
	defer v.Release()
	tbl, _ := v.Catalog().Table("db", "cpu")
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			fr, _, err := s.e.fileRowsOf(t.Context(), f, []string{"host", "region"}, tbl, false)
			if err != nil || fr.unusable != nil {
				t.Fatal(err, fr.unusable)
			}
			want := ref.query(fmt.Sprintf("SELECT count(*) FROM (SELECT DISTINCT host, region FROM db.cpu WHERE time BETWEEN %s AND %s)", nsLiteral(f.MinTime), nsLiteral(f.MaxTime)))
			if got := fr.chunk.Rec.NumRows(); fmt.Sprint(got) != want[0] {
				t.Errorf("%s: %d latest rows, want one for each of %s combinations", f.Path, got, want[0])
			}
			if _, ok := fr.chunk.Rec.Column(1).(*array.Dictionary); !ok {
				t.Errorf("%s: host read as %s, not as the buffer holds strings", f.Path, fr.chunk.Rec.Column(1).DataType())
			}
		}
	}
}
