//go:build duckdb_arrow

package query

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLatestDirect: the latest row per key of a query that selects only
// the key, max(time) and arg_max(col, time), with no ORDER BY or LIMIT
// and no WHERE or one of bounds on time, is answered from the chunks
// without DuckDB (a direct scan) when no picked row is NULL where
// arg_max reads (persisted files left after pruning give their latest
// row of each key value, read once; a file with rows past an upper
// bound leaves the query to DuckDB), and by DuckDB otherwise; both agree
// with DuckDB over the same rows. Times are unique: among ties the row
// answered is arbitrary.
func TestLatestDirect(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 3)
	hosts := func(n int) func(int) any {
		return func(int) any {
			if rng.IntN(50) == 0 {
				return nil
			}
			return fmt.Sprintf("h%d", rng.IntN(n))
		}
	}
	// someNull: NULL in one row of nine; set: never NULL; h3Null: NULL
	// for h3.
	someNull := func(int, any) any {
		if rng.IntN(9) == 0 {
			return nil
		}
		return float64(rng.IntN(1000)) / 10
	}
	set := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	h3Null := func(i int, h any) any {
		if h == "h3" {
			return nil
		}
		return set(i, h)
	}

	direct := []string{
		"SELECT host, max(time) FROM db.cpu GROUP BY host",
		"SELECT host, max(time), arg_max_null(usage, time), arg_max_null(region, time) FROM db.cpu GROUP BY host",
		"SELECT max(time) AS t, host FROM db.cpu GROUP BY host",
		"SELECT region, max(time), arg_max_null(host, time) FROM db.cpu GROUP BY region",
	}
	withUsage := []string{
		"SELECT host, arg_max(usage, time) AS u, max(time) FROM db.cpu GROUP BY host",
		"SELECT host, max_by(usage, time), max(time) FROM db.cpu GROUP BY host",
	}
	viaDuckDB := []string{
		"SELECT host, max(time), arg_max_null(usage, time) AS u FROM db.cpu GROUP BY host ORDER BY u",
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY lower(host)",
		fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE time >= %s AND host <> 'h1' GROUP BY host", nsLiteral(base)),
		"SELECT 1, host, max(time) FROM db.cpu GROUP BY host",
	}
	// A WHERE of bounds on time: the latest rows within them. A lower
	// bound alone is answered from the latest rows (of the files too);
	// with an upper bound before a file's last row, DuckDB answers.
	at := func(d time.Duration) string { return nsLiteral(base + int64(d)) }
	lowerOnly := []string{
		fmt.Sprintf("SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE time >= %s GROUP BY host", at(30*time.Minute)),
		fmt.Sprintf("SELECT region, max(time), arg_max_null(host, time) FROM db.cpu WHERE %s < time GROUP BY region", at(-2*time.Hour)),
		fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE time >= %s GROUP BY host", at(100*time.Hour)),
		// now() from the Go clock (the rows are of 2024).
		"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE time >= now() - INTERVAL 100000 HOUR GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE time > now() - INTERVAL 1 HOUR GROUP BY host",
	}
	bounded := []string{
		fmt.Sprintf("SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE time BETWEEN %s AND %s GROUP BY host", at(20*time.Minute), at(45*time.Minute)),
		fmt.Sprintf("SELECT host, max(time), arg_max_null(region, time) FROM db.cpu WHERE time > %s AND time < %s GROUP BY host", at(-25*time.Hour), at(3*time.Hour+30*time.Second)),
	}
	// ORDER BY the key or max(time), LIMIT, OFFSET: compared in order.
	ordered := []string{
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host LIMIT 3",
		"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu GROUP BY host ORDER BY host DESC NULLS FIRST",
		"SELECT host, max(time) AS t FROM db.cpu GROUP BY host ORDER BY t DESC LIMIT 4 OFFSET 1",
		"SELECT max(time), host FROM db.cpu GROUP BY host ORDER BY 1 DESC",
		"SELECT host AS h, max(time) FROM db.cpu GROUP BY host ORDER BY h LIMIT 2",
		"SELECT region, max(time) FROM db.cpu GROUP BY region ORDER BY region NULLS FIRST",
		"SELECT region, max(time) AS time FROM db.cpu GROUP BY region ORDER BY time, region",
		fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE time >= %s GROUP BY host ORDER BY host OFFSET 2", at(30*time.Minute)),
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host LIMIT 0",
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host DESC LIMIT 3",
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host DESC NULLS LAST, 2",
		// A LIMIT as large as it gets, past an OFFSET.
		"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host LIMIT 9223372036854775807 OFFSET 1",
		"SELECT DISTINCT ON (host) * FROM db.cpu ORDER BY host, time DESC LIMIT 9223372036854775807 OFFSET 2",
	}
	// PostgreSQL's DISTINCT ON: whole rows, NULLs included.
	distinctOn := []string{
		"SELECT DISTINCT ON (host) * FROM db.cpu ORDER BY host, time DESC",
		"SELECT DISTINCT ON (host) host, usage, time FROM db.cpu ORDER BY host DESC NULLS FIRST, time DESC LIMIT 4",
		"SELECT DISTINCT ON (region) time, region FROM db.cpu ORDER BY region, time DESC OFFSET 1",
		fmt.Sprintf("SELECT DISTINCT ON (host) * FROM db.cpu WHERE time >= %s ORDER BY host, time DESC", at(30*time.Minute)),
		// Plain DISTINCT of the key: its values, NULL included.
		"SELECT DISTINCT host FROM db.cpu",
		"SELECT DISTINCT host FROM db.cpu ORDER BY host",
		"SELECT DISTINCT region AS r FROM db.cpu ORDER BY r DESC NULLS FIRST LIMIT 2",
		fmt.Sprintf("SELECT DISTINCT c.host FROM db.cpu c WHERE c.time >= %s ORDER BY 1 LIMIT 3 OFFSET 1", at(30*time.Minute)),
		"SELECT DISTINCT host FROM db.cpu WHERE host IN ('h1', 'h2', 'nope')",
		fmt.Sprintf("SELECT DISTINCT host FROM db.cpu WHERE time > %s", at(100*time.Hour)),
	}
	distinctViaDuckDB := []string{
		"SELECT DISTINCT ON (host) host, usage * 2 AS u FROM db.cpu ORDER BY host, time DESC",
		// A window over every row: no row may be left out.
		"SELECT DISTINCT ON (host) host, count(*) OVER () AS n FROM db.cpu ORDER BY host, time DESC",
		"SELECT DISTINCT ON (host) * REPLACE (count(*) OVER () AS usage) FROM db.cpu ORDER BY host, time DESC",
		"SELECT DISTINCT ON (host) host, time FROM db.cpu ORDER BY host, time",
		"SELECT DISTINCT host, region FROM db.cpu",
		"SELECT DISTINCT host FROM db.cpu WHERE usage > 50",
		"SELECT DISTINCT lower(host) FROM db.cpu",
		"SELECT DISTINCT host FROM db.cpu ORDER BY lower(host)",
	}
	// Equalities of the key column beside the bounds: the latest rows of
	// those values alone. Of one value of another column: that column a
	// key of its own (latest_multi.go), picked without DuckDB too. Of
	// several values of another column, or not equalities: DuckDB.
	keyed := []string{
		"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE host = 'h3' GROUP BY host",
		fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE host = 'h0' AND time >= %s GROUP BY host", at(30*time.Minute)),
		"SELECT host, max(time) FROM db.cpu WHERE 'h2' = host GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE host = 'nope' GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE host = 'h1' AND host = 'h2' GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE host = 'h1' AND host = 'h1' GROUP BY host",
		"SELECT region, max(time), arg_max_null(host, time) FROM db.cpu WHERE region = 'r1' GROUP BY region",
		"SELECT DISTINCT ON (host) * FROM db.cpu WHERE host = 'h5' ORDER BY host, time DESC",
		"SELECT host, max(time) AS t FROM db.cpu WHERE host = 'h6' GROUP BY host ORDER BY t DESC LIMIT 1",
		"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE host IN ('h1', 'h3', 'nope') GROUP BY host",
		fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE host IN ('h0', 'h2') AND time < %s GROUP BY host ORDER BY host", at(5*time.Hour)),
		"SELECT host, max(time) FROM db.cpu WHERE host IN ('h0', 'h2') AND host IN ('h2', 'h4') GROUP BY host",
		"SELECT DISTINCT ON (host) * FROM db.cpu WHERE host IN ('h5', 'h7') ORDER BY host DESC, time DESC",
		"SELECT host, max(time) FROM db.cpu WHERE region = 'r1' GROUP BY host",
		"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE host = 'h1' AND region = 'r1' GROUP BY host",
	}
	keyedViaDuckDB := []string{
		"SELECT host, max(time) FROM db.cpu WHERE region IN ('r1', 'r2') GROUP BY host",
		"SELECT DISTINCT ON (host) * FROM db.cpu WHERE region = 'r2' ORDER BY host, time DESC",
		"SELECT host, max(time) FROM db.cpu WHERE host IN ('h1', region) GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE host NOT IN ('h1', 'h2') GROUP BY host",
	}
	// How many series: count(DISTINCT key), NULL not counted.
	counts := []string{
		"SELECT count(DISTINCT host) FROM db.cpu",
		"SELECT count(DISTINCT region) AS n FROM db.cpu",
		fmt.Sprintf("SELECT count(DISTINCT host) FROM db.cpu WHERE time >= %s", at(30*time.Minute)),
		"SELECT count(DISTINCT host) FROM db.cpu WHERE host IN ('h1', 'h3', 'nope')",
		"SELECT COUNT(DISTINCT host) FROM db.cpu WHERE host = 'nope'",
		fmt.Sprintf("SELECT count(DISTINCT c.host) FROM db.cpu c WHERE c.time > %s", at(100*time.Hour)),
	}
	countsViaDuckDB := []string{
		"SELECT count(DISTINCT host) FROM db.cpu WHERE usage > 50",
		"SELECT count(DISTINCT host), count(*) FROM db.cpu",
		"SELECT count(host) FROM db.cpu",
		"SELECT count(DISTINCT lower(host)) FROM db.cpu",
		"SELECT count(DISTINCT host) FROM db.cpu LIMIT 1",
		"SELECT count(DISTINCT host) FILTER (WHERE usage > 50) FROM db.cpu",
		"SELECT count(DISTINCT usage) FROM db.cpu",
		"SELECT count(DISTINCT host) FROM db.cpu WHERE region = 'r1'",
		"SELECT count(DISTINCT host) FROM db.cpu GROUP BY region",
	}
	bounded = append(bounded, fmt.Sprintf("SELECT count(DISTINCT host) FROM db.cpu WHERE time BETWEEN %s AND %s", at(20*time.Minute), at(45*time.Minute)))
	check := func(what string, qs []string, wantDirect bool) {
		t.Helper()
		for _, q := range qs {
			before := s.e.Stats().DirectScans
			// Apron's now() is a UTC TIMESTAMP (views.go), DuckDB's has a zone.
			refQ := strings.ReplaceAll(q, "now()", "(now() AT TIME ZONE 'UTC')")
			got, want := s.query(q, ""), ref.query(refQ)
			if !strings.Contains(q, "ORDER BY") {
				got, want = sorted(got), sorted(want)
			}
			equalRows(t, what+": "+q, got, want)
			if got := s.e.Stats().DirectScans > before; got != wantDirect {
				t.Errorf("%s: %s: direct %v, want %v", what, q, got, wantDirect)
			}
		}
	}

	// Buffered only: several chunks, a partition a day before, and
	// batches without region among the newest (chunks that lack the
	// column: every row NULL there, for GROUP BY region too).
	write(base-int64(24*time.Hour), int64(time.Hour), 3000, hosts(8), someNull, true)
	for j := range 5 {
		write(base+int64(j)*int64(10*time.Minute), int64(12*time.Minute), 5000, hosts(8), someNull, j < 3)
	}
	check("buffered", direct, true)
	check("buffered", lowerOnly, true)
	check("buffered", bounded, true)
	check("buffered", ordered, true)
	check("buffered", distinctOn, true)
	check("buffered", distinctViaDuckDB, false)
	check("buffered", counts, true)
	check("buffered", countsViaDuckDB, false)
	pruned := s.e.Stats().LatestChunks
	check("buffered", keyed, true)
	if s.e.Stats().LatestChunks == pruned {
		t.Error("no chunk left out of the latest rows of one host")
	}
	check("buffered", keyedViaDuckDB, false)
	// Where a host's newest row has no usage, arg_max answers an older
	// row: DuckDB.
	write(base+int64(time.Hour), int64(time.Minute), 2000, hosts(8), h3Null, true)
	check("h3's newest usage NULL", withUsage, false)
	// Only the picked rows of the values asked for must hold arg_max's
	// column.
	check("h3's newest usage NULL", []string{"SELECT host, arg_max(usage, time), max(time) FROM db.cpu WHERE host = 'h3' GROUP BY host"}, false)
	check("h3's newest usage NULL", []string{"SELECT host, arg_max(usage, time), max(time) FROM db.cpu WHERE host = 'h4' GROUP BY host"}, true)
	check("h3's newest usage NULL", distinctOn, true)
	write(base+2*int64(time.Hour), int64(time.Minute), 2000, func(i int) any { return fmt.Sprintf("h%d", i%8) }, set, true)
	write(base+2*int64(time.Hour)+int64(time.Minute), int64(time.Second), 50, func(int) any { return nil }, set, true)
	check("every newest usage set", withUsage, true)
	check("not projected", viaDuckDB, false)

	// Persisted, then newer rows of every host: the file is left out
	// (its key values all have later rows).
	s.roll()
	s.waitReleased(t, 1)
	write(base+3*int64(time.Hour), int64(time.Minute), 4000, func(i int) any { return fmt.Sprintf("h%d", i%8) }, set, true)
	write(base+3*int64(time.Hour)+int64(time.Minute), int64(time.Second), 100, func(int) any { return nil }, set, true)
	check("file left out", direct, true)
	check("file left out", withUsage, true)
	// A host found only in the files: each file left is read once for
	// its latest row of each key value, and picked from with the chunks.
	s.roll()
	s.waitReleased(t, 2)
	write(base+4*int64(time.Hour), int64(time.Minute), 500, func(i int) any { return fmt.Sprintf("h%d", 1+i%7) }, set, true)
	reads := s.e.Stats().LatestFileReads
	check("h0 only in files", direct, true)
	check("h0 only in files", withUsage, true)
	read := s.e.Stats().LatestFileReads - reads
	if read == 0 {
		t.Error("no file read for its latest rows")
	}
	check("h0 only in files, again", direct, true)
	if got := s.e.Stats().LatestFileReads - reads; got != read {
		t.Errorf("files read for their latest rows after a second run: %d, want still %d", got, read)
	}
	check("h0 only in files", lowerOnly, true)
	check("h0 only in files", keyed, true)
	check("h0 only in files", counts, true)
	check("h0 only in files", countsViaDuckDB, false)
	check("h0 only in files", keyedViaDuckDB, false)
	check("h0 only in files, a file's rows past the upper bound", bounded, false)

	// Nothing buffered: every row from the files.
	s.roll()
	s.waitReleased(t, 3)
	check("all persisted", direct, true)
	check("all persisted", lowerOnly, true)
	check("all persisted", ordered, true)
	check("all persisted", distinctOn, true)
	check("all persisted", counts, true)
	check("all persisted", distinctViaDuckDB, false)
	check("all persisted", withUsage, true)
	check("all persisted", keyed, true)
	check("all persisted", keyedViaDuckDB, false)
	check("all persisted, not projected", viaDuckDB, false)

	// A file whose newest row of h3 has no usage: DuckDB.
	write(base+5*int64(time.Hour), int64(time.Minute), 800, func(i int) any { return fmt.Sprintf("h%d", i%8) }, h3Null, true)
	s.roll()
	s.waitReleased(t, 4)
	check("h3's newest usage NULL in a file", withUsage, false)
	check("h3's newest usage NULL in a file", direct, true)
}

// TestLongInList: an IN list near the longest admission allows (40,000
// values, a few of them the table's; about 50,000 constants bind in
// time) is answered as DuckDB answers it,
// over buffered rows and persisted files, by every path that reads the
// list: the latest rows per key, a tag's values, a filtered direct scan,
// the rows handed to DuckDB. Its values are looked up, not searched
// (tableRef.equals is sorted): searched, each chunk's dictionary of
// 1,000 hosts cost 40M string comparisons.
func TestLongInList(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 21)
	host := func(int) any { return fmt.Sprintf("h%d", rng.IntN(1000)) }
	usage := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	vals := make([]string, 40000)
	for i := range vals {
		vals[i] = fmt.Sprintf("'x%d'", i)
	}
	vals[17], vals[30000], vals[39999] = "'h3'", "'h500'", "'h3'"
	in := "host IN (" + strings.Join(vals, ",") + ")"
	queries := []struct {
		sql    string
		direct bool
	}{
		{"SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu WHERE " + in + " GROUP BY host", true},
		{"SELECT DISTINCT host FROM db.cpu WHERE " + in, true},
		{"SELECT time, host, usage FROM db.cpu WHERE " + in, true},
		{"SELECT count(*), sum(usage) FROM db.cpu WHERE " + in, false},
	}
	check := func(what string) {
		t.Helper()
		for _, q := range queries {
			before := s.e.Stats().DirectScans
			equalRows(t, what+": "+q.sql[:60], sorted(s.query(q.sql, "")), sorted(ref.query(q.sql)))
			if got := s.e.Stats().DirectScans > before; got != q.direct {
				t.Errorf("%s: %s…: direct %v, want %v", what, q.sql[:60], got, q.direct)
			}
		}
	}
	write(base, int64(time.Hour), 20000, host, usage, true)
	check("buffered")
	s.roll()
	s.waitReleased(t, 1)
	write(base+int64(2*time.Hour), int64(time.Hour), 5000, host, usage, true)
	check("persisted and buffered")
}
