//go:build duckdb_arrow

package query

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestLatestRows checks the latest row per key without a last-value cache
// (latest.go, latest_files.go) against a plain DuckDB holding the same
// rows (times all distinct, so that every answer is one): rows in
// persisted files, in two partitions of the buffer and in many chunks; a
// key value only in older chunks and one only in a file; NULL keys, in
// chunks and in a file; a key whose newest
// rows have a NULL usage (arg_max must reach back past them, arg_max_null
// must not); a key column added late (older chunks lack it: all NULL).
// Shapes that need older rows must read every row as before.
// Files' key values are read through the page cache, and without one.
func TestLatestRows(t *testing.T) {
	t.Run("page-cache", func(t *testing.T) { latestRows(t, Config{}) })
	t.Run("no-page-cache", func(t *testing.T) { latestRows(t, Config{PageCacheSize: -1}) })
}

func latestRows(t *testing.T, cfg Config) {
	s, ref, rng, write := cpuStore(t, cfg, 7)
	someHost := func(int) any { return fmt.Sprintf("h%d", rng.IntN(6)) }
	someUsage := func(int, any) any {
		if rng.IntN(9) == 0 {
			return nil
		}
		return float64(rng.IntN(1000)) / 10
	}
	// Two persisted segments; "gone" is only in the first.
	write(base, int64(time.Hour), 3000, func(i int) any {
		if i%50 == 0 {
			return "gone"
		}
		return someHost(i)
	}, someUsage, false)
	s.roll()
	write(base+int64(time.Hour), int64(time.Hour), 3000, someHost, someUsage, false)
	// db.fnull: a file whose NULL keys have no later row, then buffered
	// rows of its other keys (and of the empty string, which is not NULL).
	ref.exec(`CREATE TABLE db.fnull (time TIMESTAMP_NS, host VARCHAR)`)
	fnull := func(start int64, nulls bool) {
		n := 1000
		ts, hosts := make([]any, n), make([]any, n)
		for i := range n {
			ts[i] = start + int64(i)*int64(time.Second)
			hosts[i] = fmt.Sprintf("h%d", i%2)
			switch {
			case nulls && i%10 == 0:
				hosts[i] = nil
			case !nulls && i%10 == 0:
				// The empty string: the file's dictionary holds one
				// in the place of its NULLs.
				hosts[i] = ""
			}
		}
		rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, hosts})
		ref.append("db", "fnull", rec)
		s.write("db", "fnull", rec)
	}
	fnull(base+int64(time.Hour), true)
	s.roll()
	s.waitReleased(t, 2)
	fnull(base+int64(5*time.Hour), false)
	// The buffered segment: a day before (a partition of its own), then
	// batches of rising times, ~5 chunks of 8192 rows.
	write(base-int64(24*time.Hour), int64(time.Hour), 2000, someHost, someUsage, false)
	start := base + 3*int64(time.Hour)
	for j := range 8 {
		host := someHost
		switch j {
		case 0: // "early" only here
			host = func(i int) any {
				if i%40 == 0 {
					return "early"
				}
				return someHost(i)
			}
		case 3: // NULL keys only here: in chunks whose other keys all have later rows
			host = func(i int) any {
				if i%30 == 0 {
					return nil
				}
				return someHost(i)
			}
		}
		usage := someUsage
		if j >= 6 { // h1's newest rows have no usage: its arg_max is older
			usage = func(i int, h any) any {
				if h == "h1" {
					return nil
				}
				return someUsage(i, h)
			}
		}
		write(start+int64(j)*int64(10*time.Minute), int64(12*time.Minute), 5000, host, usage, j >= 3)
	}
	queries := []string{
		"SELECT host, max(time) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max(usage, time), max(time) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu GROUP BY host",
		"SELECT host, max_by(usage, time) AS u, max_by(region, time) AS r FROM db.cpu GROUP BY host ORDER BY host LIMIT 4",
		"SELECT region, max(time), arg_max(host, time), arg_max(usage, time) FROM db.cpu GROUP BY region",
		"SELECT region, arg_max_null(host, time) FROM db.cpu GROUP BY region",
		"SELECT c.host, max(c.time) FROM db.cpu c GROUP BY c.host",
		"SELECT HOST, MAX(TIME) FROM DB.CPU GROUP BY HOST",
		"SELECT 1, host FROM db.cpu GROUP BY host",
		"SELECT host FROM db.cpu GROUP BY host ORDER BY host DESC",
		"SELECT host, arg_max(time, time) FROM db.cpu GROUP BY host",
		// Several key columns (latest_multi.go).
		"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region",
		"SELECT region, host, arg_max(usage, time), max(time) FROM db.cpu GROUP BY region, host",
		"SELECT host, region, arg_max_null(usage, time) FROM db.cpu GROUP BY host, region ORDER BY host, region LIMIT 5",
		"SELECT c.host, c.region, max(c.time), 7 FROM db.cpu c GROUP BY c.region, c.host",
		"SELECT host, region, max(time) FROM db.cpu GROUP BY ALL",
	}
	queries = append(queries, "SELECT host, max(time) FROM db.fnull GROUP BY host")
	// Bounds on time, at chunk and file edges: only rows within them
	// credit.
	edges := timeEdges(s, "db", "cpu")
	for i, e := range edges {
		other := edges[(i*7+3)%len(edges)]
		lo, hi := min(e, other), max(e, other)
		queries = append(queries,
			fmt.Sprintf("SELECT host, max(time), arg_max(usage, time) FROM db.cpu WHERE time >= %s GROUP BY host", nsLiteral(e)),
			fmt.Sprintf("SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE time > %s AND time <= %s GROUP BY host", nsLiteral(lo), nsLiteral(hi)),
			fmt.Sprintf("SELECT host, max(time) FROM db.cpu WHERE time < %s GROUP BY host", nsLiteral(e)),
			fmt.Sprintf("SELECT host, region, max(time), arg_max(usage, time) FROM db.cpu WHERE time >= %s AND time < %s GROUP BY host, region", nsLiteral(lo), nsLiteral(hi)))
	}
	before := s.e.Stats()
	for _, q := range queries {
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	}
	st := s.e.Stats()
	if st.LatestChunks == before.LatestChunks || st.LatestFiles == before.LatestFiles {
		t.Errorf("no chunk or no file left out: %d chunks, %d files", st.LatestChunks-before.LatestChunks, st.LatestFiles-before.LatestFiles)
	}
	t.Logf("%d chunks and %d files left out over %d queries", st.LatestChunks-before.LatestChunks, st.LatestFiles-before.LatestFiles, len(queries))
	for _, q := range []string{
		"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region",
		"SELECT host, region, max(time) FROM db.cpu WHERE time >= TIMESTAMP '2024-03-01 12:00:00' GROUP BY host, region",
		"SELECT host, region, max(time) FROM db.cpu WHERE host = 'h1' GROUP BY host, region",
		"SELECT host, max(time), arg_max(usage, time) FROM db.cpu WHERE region = 'r1' GROUP BY host",
		"SELECT region, count(DISTINCT host) FROM db.cpu GROUP BY region",
	} {
		before := s.e.Stats()
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
		if st := s.e.Stats(); st.LatestChunks == before.LatestChunks {
			t.Errorf("%s: no chunk left out", q)
		}
	}

	// A chunk without the column arg_max reads (its rows are NULL there)
	// credits nothing: here the newest chunks, a day later, were written
	// before the table had "region".
	ref.exec(`CREATE TABLE db.late (time TIMESTAMP_NS, host VARCHAR, region VARCHAR)`)
	for day, withRegion := range []bool{false, true} {
		n := 3000
		ts, hosts, regions := make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			ts[i] = base + int64(1-day)*int64(24*time.Hour) + int64(i)*int64(time.Second)
			hosts[i] = fmt.Sprintf("h%d", i%4)
			regions[i] = fmt.Sprintf("r%d", i%3)
		}
		cols := []col{{"time", tsNs, ts}, {"host", arrow.BinaryTypes.String, hosts}}
		if withRegion {
			cols = append(cols, col{"region", arrow.BinaryTypes.String, regions})
		}
		rec := batch(s.mem, cols...)
		ref.append("db", "late", rec)
		s.write("db", "late", rec)
	}
	for _, q := range []string{
		"SELECT host, arg_max(region, time) FROM db.late GROUP BY host",
		"SELECT host, max(time), max_by(region, time) FROM db.late GROUP BY host",
	} {
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	}

	// Shapes it must not prune: they need older rows.
	others := []string{
		"SELECT host, min(time) FROM db.cpu GROUP BY host",
		"SELECT host, count(*) FROM db.cpu GROUP BY host",
		"SELECT host, max(usage) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max(usage, usage) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max(usage, time, 2) FROM db.cpu GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE usage > 50 GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE host <> 'h1' GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE time > TIMESTAMP '2024-03-01 14:00:00' AND usage > 1 GROUP BY host",
		"SELECT host, max(time) FROM db.cpu WHERE time > TIMESTAMP '2024-03-01 14:00:00' OR host = 'h1' GROUP BY host",
		"SELECT host, max(time) FILTER (WHERE usage > 50) FROM db.cpu GROUP BY host",
		"SELECT host, max(time) FROM db.cpu GROUP BY host HAVING count(*) > 10",
		"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region HAVING count(*) > 1",
		"SELECT host, region, count(*) FROM db.cpu GROUP BY host, region",
		"SELECT region, count(host) FROM db.cpu GROUP BY region",
		"SELECT region, count(DISTINCT usage) FROM db.cpu GROUP BY region",
		"SELECT region, count(DISTINCT host) FILTER (WHERE usage > 1) FROM db.cpu GROUP BY region",
		"SELECT region, count(DISTINCT upper(host)) FROM db.cpu GROUP BY region",
		"SELECT region, count(DISTINCT host) + 1 FROM db.cpu GROUP BY region",
		"SELECT host, region, max(time) FROM db.cpu GROUP BY host, region, usage",
		"SELECT host, upper(region), max(time) FROM db.cpu GROUP BY host, upper(region)",
		"SELECT usage, max(time) FROM db.cpu GROUP BY usage",
		"SELECT upper(host), max(time) FROM db.cpu GROUP BY upper(host)",
		"SELECT host, max(time) + INTERVAL 1 SECOND FROM db.cpu GROUP BY host",
		"SELECT host, max(time), sum(usage) FROM db.cpu GROUP BY host",
		"SELECT host, max(time) FROM db.cpu GROUP BY ROLLUP (host)",
		"SELECT max(time) FROM db.cpu",
		"SELECT host, max(time) OVER (PARTITION BY host) FROM db.cpu",
		"SELECT a.host, max(a.time) FROM db.cpu a JOIN db.cpu b USING (time) GROUP BY a.host",
	}
	before = s.e.Stats()
	for _, q := range others {
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	}
	if st := s.e.Stats(); st.LatestChunks != before.LatestChunks || st.LatestFiles != before.LatestFiles {
		t.Errorf("a shape that needs older rows was pruned: %d chunks, %d files", st.LatestChunks-before.LatestChunks, st.LatestFiles-before.LatestFiles)
	}
}

// cpuStore is a store env (cfg its engine's) with a table db.cpu (time,
// host, usage, region), the same table in a reference DuckDB, random
// numbers from seed, and cpuRowsWriter's writer of both.
func cpuStore(t *testing.T, cfg Config, seed uint64) (*storeEnv, *refDB, *rand.Rand, cpuWriter) {
	s := newStoreEnv(t, objstore.NewMemory(), cfg)
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE, region VARCHAR)`)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	return s, ref, rng, cpuRowsWriter(s, ref, rng)
}

// cpuWriter writes n rows of db.cpu: times distinct (over every call)
// within [start, start+span), the hosts host gives (nil: NULL), the
// usages usage gives them, and, withRegion, a region (NULL in one row of
// seven).
type cpuWriter func(start, span int64, n int, host func(i int) any, usage func(i int, h any) any, withRegion bool)

// cpuRowsWriter returns a cpuWriter to s and to ref.
func cpuRowsWriter(s *storeEnv, ref *refDB, rng *rand.Rand) cpuWriter {
	seen := map[int64]bool{}
	return func(start, span int64, n int, host func(i int) any, usage func(i int, h any) any, withRegion bool) {
		ts, hosts, usages, regions := distinctTimes(rng, seen, start, span, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			hosts[i] = host(i)
			usages[i] = usage(i, hosts[i])
			if rng.IntN(7) > 0 {
				regions[i] = fmt.Sprintf("r%d", rng.IntN(3))
			}
		}
		cols := []col{{"time", tsNs, ts}, {"host", arrow.BinaryTypes.String, hosts}, {"usage", arrow.PrimitiveTypes.Float64, usages}}
		if withRegion {
			cols = append(cols, col{"region", arrow.BinaryTypes.String, regions})
		}
		rec := batch(s.mem, cols...)
		ref.append("db", "cpu", rec)
		s.write("db", "cpu", rec)
	}
}
