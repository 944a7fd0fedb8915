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

// TestNewestRows checks ORDER BY time DESC LIMIT n (newest.go) against a
// plain DuckDB holding the same rows (every time distinct, so the answer
// is one), with rows in persisted files and in the buffer, segments whose
// times overlap, n from 1 to more than the table holds, bounds on time
// at chunk and file edges; and that shapes it must not prune read every
// row as before.
func TestNewestRows(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE)`)
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[int64]bool{}
	total := 0
	const segs = 6
	for seg := range segs {
		for range 3 {
			n := 300 + rng.IntN(2000)
			host, usage := make([]any, n), make([]any, n)
			// Segments overlap in time: the newest rows are not all in the
			// newest segment.
			start := base + int64(seg)*int64(30*time.Minute) + rng.Int64N(int64(time.Hour))
			switch seg {
			case segs - 2: // buffered, a day before (a partition of its own): its chunks go
				start = base - int64(24*time.Hour)
			case segs - 1:
				start = base + int64(10*time.Hour)
			}
			ts := distinctTimes(rng, seen, start, int64(40*time.Minute), n)
			for i := range n {
				host[i] = fmt.Sprintf("h%d", rng.IntN(5))
				if rng.IntN(9) > 0 {
					usage[i] = float64(rng.IntN(1000)) / 10
				}
			}
			rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage})
			ref.append("db", "cpu", rec)
			s.write("db", "cpu", rec)
			total += n
		}
		if seg < segs-2 {
			s.roll()
		}
	}
	s.waitReleased(t, segs-2)
	edges := timeEdges(s, "db", "cpu")
	lit := nsLiteral
	var queries []string
	for _, n := range []int{1, 7, 100, 1000, 4000, total - 1, total, total + 5} {
		queries = append(queries,
			fmt.Sprintf("SELECT * FROM db.cpu ORDER BY time DESC LIMIT %d", n),
			fmt.Sprintf("SELECT c.time, usage FROM db.cpu c ORDER BY c.time DESC LIMIT %d", n))
	}
	for i, e := range edges {
		other := edges[(i*5+1)%len(edges)]
		lo, hi := min(e, other), max(e, other)
		n := []int{1, 10, 500, 3000}[i%4]
		queries = append(queries,
			fmt.Sprintf("SELECT time, host FROM db.cpu WHERE time <= %s ORDER BY time DESC LIMIT %d", lit(e), n),
			fmt.Sprintf("SELECT * FROM db.cpu WHERE time < %s ORDER BY time DESC LIMIT %d", lit(e+1), n),
			fmt.Sprintf("SELECT * FROM db.cpu WHERE time > %s AND time <= %s ORDER BY time DESC LIMIT %d", lit(lo), lit(hi), n),
		)
	}
	before := s.e.Stats()
	for _, q := range queries {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	st := s.e.Stats()
	if st.NewestChunks == before.NewestChunks || st.NewestFiles == before.NewestFiles {
		t.Errorf("no chunk or no file left out: %d chunks, %d files", st.NewestChunks-before.NewestChunks, st.NewestFiles-before.NewestFiles)
	}

	// The latest points of a series: string equalities besides the bounds.
	var series []string
	for i, n := range []int{1, 7, 100, 1000, total / 5, total} {
		h := fmt.Sprintf("h%d", i%5)
		series = append(series,
			fmt.Sprintf("SELECT * FROM db.cpu WHERE host = '%s' ORDER BY time DESC LIMIT %d", h, n),
			fmt.Sprintf("SELECT time, usage FROM db.cpu c WHERE '%s' = c.host ORDER BY c.time DESC LIMIT %d", h, n),
			fmt.Sprintf("SELECT * FROM db.cpu WHERE HOST = '%s' AND host = '%s' ORDER BY time DESC LIMIT %d", h, h, n),
			fmt.Sprintf("SELECT * FROM db.cpu WHERE host IN ('%s', 'h9', 'h3') ORDER BY time DESC LIMIT %d", h, n),
		)
	}
	for i, e := range edges {
		h := fmt.Sprintf("h%d", i%5)
		n := []int{1, 10, 500, 3000}[i%4]
		series = append(series,
			fmt.Sprintf("SELECT * FROM db.cpu WHERE host = '%s' AND time <= %s ORDER BY time DESC LIMIT %d", h, lit(e), n),
			fmt.Sprintf("SELECT time, host FROM db.cpu WHERE time < %s AND host = '%s' ORDER BY time DESC LIMIT %d", lit(e+1), h, n),
			fmt.Sprintf("SELECT time, host FROM db.cpu WHERE time < %s AND host IN ('h0', '%s') ORDER BY time DESC LIMIT %d", lit(e+1), h, n))
	}
	series = append(series,
		"SELECT * FROM db.cpu WHERE host = 'h9' ORDER BY time DESC LIMIT 10",                 // no such series
		"SELECT * FROM db.cpu WHERE host = 'h1' AND host = 'h2' ORDER BY time DESC LIMIT 10", // none can match
		"SELECT * FROM db.cpu WHERE host IN ('h1', 'h2') AND host IN ('h3') ORDER BY time DESC LIMIT 10",
	)
	before = s.e.Stats()
	for _, q := range series {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	st = s.e.Stats()
	if st.NewestChunks == before.NewestChunks || st.NewestFiles == before.NewestFiles {
		t.Errorf("no chunk or no file left out of a series' latest points: %d chunks, %d files", st.NewestChunks-before.NewestChunks, st.NewestFiles-before.NewestFiles)
	}

	// When a series last reported: max(time), and arg_max_null of the
	// newest row, pruned as LIMIT 1.
	var last []string
	for i, e := range edges {
		h := fmt.Sprintf("h%d", i%5)
		last = append(last,
			fmt.Sprintf("SELECT max(time) FROM db.cpu WHERE host = '%s'", h),
			fmt.Sprintf("SELECT max(c.time) AS seen, arg_max_null(usage, time), arg_max(time, time) FROM db.cpu c WHERE host = '%s' AND time <= %s", h, lit(e)),
			fmt.Sprintf("SELECT max(time) FROM db.cpu WHERE host IN ('h0', '%s') AND time < %s", h, lit(e+1)),
			fmt.Sprintf("SELECT max(time) FROM db.cpu WHERE time <= %s", lit(e)),
			// usage is NULL in a row of nine: arg_max passes over those.
			fmt.Sprintf("SELECT arg_max(usage, time), max(time) FROM db.cpu WHERE host = '%s' AND time <= %s", h, lit(e)),
			fmt.Sprintf("SELECT max_by(c.usage, c.time), arg_max(host, time) FROM db.cpu c WHERE time < %s", lit(e+1)))
	}
	last = append(last,
		"SELECT max(time) FROM db.cpu WHERE host = 'h9'", // no such series: NULL
		"SELECT max(time), arg_max_null(host, time) FROM db.cpu WHERE host = 'h1' AND host = 'h2'",
		"SELECT arg_max(usage, time) FROM db.cpu WHERE host = 'h2'",
		"SELECT arg_max(usage, time) FROM db.cpu WHERE host = 'h9'")
	before = s.e.Stats()
	for _, q := range last {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	st = s.e.Stats()
	if st.NewestChunks == before.NewestChunks || st.NewestFiles == before.NewestFiles {
		t.Errorf("no chunk or no file left out of max(time): %d chunks, %d files", st.NewestChunks-before.NewestChunks, st.NewestFiles-before.NewestFiles)
	}

	// Shapes it must not prune: they need older rows, or a function reads
	// them all.
	others := []string{
		"SELECT * FROM db.cpu ORDER BY time LIMIT 10",
		"SELECT * FROM db.cpu ORDER BY time DESC LIMIT 10 OFFSET 5",
		"SELECT * FROM db.cpu WHERE usage > 50 ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host = 'h1' AND usage > 50 ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host = 'h1' OR host = 'h2' ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host NOT IN ('h1', 'h2') ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host IN ('h1', NULL) ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host <> 'h1' ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host = CAST(usage AS VARCHAR) ORDER BY time DESC LIMIT 10",
		"SELECT * FROM db.cpu WHERE host = 'h1' ORDER BY time DESC LIMIT 10 OFFSET 3",
		"SELECT * FROM db.cpu WHERE host = 'h1' ORDER BY time LIMIT 10",
		"SELECT time, count(*) OVER () FROM db.cpu ORDER BY time DESC LIMIT 10",
		"SELECT * REPLACE (count(*) OVER () AS usage) FROM db.cpu ORDER BY time DESC LIMIT 10",
		"SELECT time, row_number() OVER (ORDER BY time) FROM db.cpu ORDER BY time DESC LIMIT 10",
		"SELECT max(time) FROM db.cpu ORDER BY 1 DESC LIMIT 1",
		"SELECT max(time) FROM db.cpu WHERE host = 'h1' LIMIT 1",
		"SELECT arg_max(usage, time) FROM db.cpu WHERE host = 'h1' AND usage > 50",
		"SELECT arg_max(usage, time + INTERVAL 1 SECOND) FROM db.cpu WHERE host = 'h1'",
		"SELECT max(time), count(*) FROM db.cpu WHERE host = 'h1'",
		"SELECT max(time), max(usage) FROM db.cpu WHERE host = 'h1'",
		"SELECT min(time) FROM db.cpu WHERE host = 'h1'",
		"SELECT max(time) FROM db.cpu WHERE host = 'h1' GROUP BY host",
		"SELECT max(usage) FROM db.cpu WHERE host = 'h1'",
		"SELECT DISTINCT host FROM db.cpu ORDER BY host DESC LIMIT 2",
		"SELECT * FROM db.cpu ORDER BY time DESC, host LIMIT 10",
		"SELECT * FROM db.cpu ORDER BY usage DESC, time DESC LIMIT 10",
		"SELECT time FROM db.cpu WHERE time > (SELECT min(time) FROM db.cpu) ORDER BY time DESC LIMIT 10",
		"SELECT time FROM db.cpu a JOIN db.cpu b USING (time) ORDER BY time DESC LIMIT 10",
	}
	before = s.e.Stats()
	for _, q := range others {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	st = s.e.Stats()
	if st.NewestChunks != before.NewestChunks || st.NewestFiles != before.NewestFiles {
		t.Errorf("a shape that needs older rows was pruned: %d chunks, %d files", st.NewestChunks-before.NewestChunks, st.NewestFiles-before.NewestFiles)
	}
}

// timeEdges are the least and greatest times of every chunk and persisted
// file of db.table.
func timeEdges(s *storeEnv, db, table string) []int64 {
	var out []int64
	v := s.wb.View()
	defer v.Release()
	for _, seg := range v.Buffered {
		for _, c := range v.Chunks(seg, db, table) {
			out = append(out, c.MinTime, c.MaxTime)
			c.Rec.Release()
		}
	}
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database == db && f.Table == table {
				out = append(out, f.MinTime, f.MaxTime)
			}
		}
	}
	return out
}

// nsLiteral is a TIMESTAMP_NS literal of ns.
func nsLiteral(ns int64) string {
	return "TIMESTAMP_NS '" + time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000") + "'"
}

// TestNewestArgMaxNulls: arg_max(col, time) of a series whose newest rows
// hold no col answers an older row's, from a persisted file the newest
// chunk alone would have left out: rows whose col is NULL count for
// nothing in the pruning, and files, whose NULLs are not known, neither.
func TestNewestArgMaxNulls(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.ev (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE)`)
	put := func(start int64, n int, usage func(i int) any) {
		ts, host, u := make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			ts[i], host[i], u[i] = start+int64(i)*int64(time.Second), []string{"a", "b"}[i%2], usage(i)
		}
		rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, u})
		ref.append("db", "ev", rec)
		s.write("db", "ev", rec)
	}
	put(base, 100, func(i int) any { return float64(i) })
	s.roll()
	s.waitReleased(t, 1)
	put(base+int64(time.Hour), 100, func(i int) any {
		if i%2 == 0 {
			return nil // a's newest rows: no usage
		}
		return float64(1000 + i)
	})
	for _, q := range []string{
		"SELECT arg_max(usage, time) FROM db.ev WHERE host = 'a'",
		"SELECT arg_max(usage, time), max(time) FROM db.ev WHERE host = 'a'",
		"SELECT arg_max(usage, time) FROM db.ev WHERE host = 'b'",
		"SELECT max_by(usage, time) FROM db.ev",
	} {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	// All persisted, the newest file's usage all NULL: it counts for
	// nothing, and the older files are read.
	s.roll()
	put(base+2*int64(time.Hour), 100, func(int) any { return nil })
	s.roll()
	s.waitReleased(t, 3)
	for _, q := range []string{
		"SELECT arg_max(usage, time) FROM db.ev",
		"SELECT arg_max(usage, time), arg_max(host, time) FROM db.ev",
	} {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
}
