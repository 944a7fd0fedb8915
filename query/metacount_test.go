//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestMetaCounts checks counts and time extremes served from metadata
// (metacount.go) against a plain DuckDB holding the same rows, with rows
// in persisted files and in the buffer, bounds falling on chunk edges,
// inside chunks and between them, strict and not, in every literal type,
// and shapes that must not be served from metadata.
func TestMetaCounts(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE)`)
	rng := rand.New(rand.NewPCG(3, 4))
	var times []int64
	const segs = 6
	for seg := range segs {
		for range 3 {
			n := 500 + rng.IntN(3000)
			ts, host, usage := make([]any, n), make([]any, n), make([]any, n)
			start := base + int64(seg)*int64(time.Hour) + rng.Int64N(int64(time.Hour)/2)
			for i := range n {
				ts[i] = start + rng.Int64N(int64(20*time.Minute)) // out of order within a batch
				host[i] = fmt.Sprintf("h%d", rng.IntN(7))
				if rng.IntN(9) > 0 {
					usage[i] = float64(rng.IntN(1000)) / 10
				}
				times = append(times, ts[i].(int64))
			}
			cols := []col{{"time", tsNs, ts}, {"host", arrow.BinaryTypes.String, host}, {"usage", arrow.PrimitiveTypes.Float64, usage}}
			rec := batch(s.mem, cols...)
			ref.append("db", "cpu", rec)
			s.write("db", "cpu", rec)
		}
		if seg < segs-2 {
			s.roll()
		}
	}
	s.waitReleased(t, segs-2)

	// Bounds: at times that occur (chunk and file edges among them), a
	// nanosecond either side, and between the segments.
	lit := nsLiteral
	points := timeEdges(s, "db", "cpu")
	if len(points) < 8 {
		t.Fatalf("%d chunk and file edges: the test needs more", len(points))
	}
	for range 12 {
		p := times[rng.IntN(len(times))]
		points = append(points, p, p-1, p+1)
	}
	points = append(points, base-1, base+int64(2*time.Hour)+int64(40*time.Minute), base+int64(segs)*int64(time.Hour))
	items := []string{"count(*)", "min(time)", "max(time)", "count(*) AS n, min(time) AS lo, max(cpu.time)", "max(time), count()"}
	var queries []string
	for _, it := range items {
		queries = append(queries, "SELECT "+it+" FROM db.cpu")
	}
	for i, p := range points {
		q := points[(i*7+3)%len(points)]
		lo, hi := min(p, q), max(p, q)
		it := items[i%len(items)]
		queries = append(queries,
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE time >= %s", it, lit(p)),
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE time > %s AND time <= %s", it, lit(lo), lit(hi)),
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE time BETWEEN %s AND %s", it, lit(lo), lit(hi)),
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE %s > time", it, lit(p)),
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE time = %s", it, lit(p)),
			fmt.Sprintf("SELECT %s FROM db.cpu WHERE time >= TIMESTAMP '%s' AND time < CAST('%s' AS TIMESTAMP_MS)", it,
				time.Unix(0, lo).UTC().Format("2006-01-02 15:04:05.999999"), time.Unix(0, hi).UTC().Format("2006-01-02 15:04:05.999")),
		)
	}
	queries = append(queries,
		"SELECT count(*) FROM db.cpu WHERE time >= DATE '2024-03-01' AND time < DATE '2024-03-02'",
		"SELECT count(*), min(time) FROM db.cpu WHERE time >= NULL",
		"SELECT count(*), max(time) FROM db.cpu WHERE time > "+lit(base+int64(10*time.Hour)),
		"SELECT count(*) FROM db.cpu WHERE time < CAST(now() AS TIMESTAMP) AND time > CAST(now() AS TIMESTAMP) - INTERVAL 100000 DAY",
		"SELECT count(*) FROM db.cpu c WHERE c.time >= "+lit(points[4]),
	)
	before := s.e.Stats()
	for _, q := range queries {
		equalRows(t, q, s.query(q, ""), ref.query(q))
	}
	st := s.e.Stats()
	if st.MetaChunks == before.MetaChunks || st.MetaFiles == before.MetaFiles {
		t.Errorf("no chunk or no file counted from metadata: %d chunks, %d files", st.MetaChunks-before.MetaChunks, st.MetaFiles-before.MetaFiles)
	}
	// Some were answered without DuckDB (metadirect.go), some not: bounds
	// inside chunks leave DuckDB rows to count.
	if n := st.MetaAnswers - before.MetaAnswers; n == 0 || n == int64(len(queries)) {
		t.Errorf("%d of %d queries answered from metadata alone: the test shows nothing of one path", n, len(queries))
	}
	// A whole-table count reads no row, and does not run DuckDB.
	before = s.e.Stats()
	equalRows(t, "count", s.query("SELECT count(*) FROM db.cpu", ""), []string{fmt.Sprint(len(times))})
	if st := s.e.Stats(); st.ChunksScanned-before.ChunksScanned != st.MetaChunks-before.MetaChunks || st.RowGroupsScanned != before.RowGroupsScanned {
		t.Errorf("a whole-table count read rows: %+v then %+v", before, st)
	} else if st.MetaAnswers != before.MetaAnswers+1 {
		t.Error("a whole-table count ran on DuckDB")
	}
	// Nothing within the bounds: a count of 0 and NULL extremes, as DuckDB
	// answers over no row, with DuckDB's names.
	q := "SELECT count(*), min(time) AS lo, max(time) FROM db.cpu WHERE time > " + lit(base+int64(10*time.Hour))
	rows, schema, err := collect(s.e.Query(context.Background(), q, ""))
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, q, rows, ref.query(q))
	if got := fmt.Sprint(schema.Field(0).Name, schema.Field(1).Name, schema.Field(2).Name); got != "count_star()lomax(\"time\")" {
		t.Errorf("%s: columns %s", q, got)
	}

	// Shapes metadata cannot answer run as before, with the same answers.
	others := []string{
		"SELECT count(usage) FROM db.cpu",
		"SELECT count(*) FROM db.cpu WHERE host = 'h1'",
		"SELECT count(*) FROM db.cpu WHERE time >= " + lit(points[0]) + " AND host <> 'h2'",
		"SELECT count(*) FROM db.cpu WHERE time >= " + lit(points[0]) + " OR host = 'h2'",
		"SELECT host, count(*), min(time) FROM db.cpu GROUP BY host",
		"SELECT count(*) FROM db.cpu HAVING count(*) > 5",
		"SELECT count(DISTINCT time) FROM db.cpu",
		"SELECT count(*) FILTER (WHERE usage > 50) FROM db.cpu",
		"SELECT min(time) + INTERVAL 1 SECOND FROM db.cpu",
		"SELECT min(usage), max(time) FROM db.cpu",
		"SELECT count(*) FROM db.cpu a JOIN db.cpu b USING (time, host)",
		"SELECT count(*) FROM db.cpu LIMIT 0",
		"SELECT count(*) FROM (SELECT * FROM db.cpu WHERE usage > 10)",
		"SELECT (SELECT count(*) FROM db.cpu), count(*) FROM db.cpu WHERE time > " + lit(points[1]),
		// Equalities prune row groups by their statistics (persisted.go).
		"SELECT count(*), sum(usage) FROM db.cpu WHERE host = 'h3'",
		"SELECT count(*) FROM db.cpu WHERE 'h3' = host AND time > " + lit(points[2]),
		"SELECT count(*) FROM db.cpu c WHERE c.host = 'h3' AND host = 'h4'",
		"SELECT count(*) FROM db.cpu WHERE host = 'h3' OR host = 'h4'",
		"SELECT count(*) FROM db.cpu WHERE host = 'H3'",
		"SELECT count(*) FROM db.cpu WHERE host = 'h'",
		"SELECT count(*) FROM db.cpu WHERE host = 'h30'",
		"SELECT count(*) FROM db.cpu WHERE host = 'zz'",
		"SELECT count(*) FROM db.cpu WHERE host = 'h3' AND usage > 50",
	}
	before = s.e.Stats()
	for _, q := range others {
		got, want := sorted(s.query(q, "")), sorted(ref.query(q))
		equalRows(t, q, got, want)
	}
	st = s.e.Stats()
	if st.MetaChunks != before.MetaChunks || st.MetaFiles != before.MetaFiles {
		t.Errorf("a shape metadata cannot serve was served from it: %d chunks, %d files", st.MetaChunks-before.MetaChunks, st.MetaFiles-before.MetaFiles)
	}
	if st.RowGroupsPruned == before.RowGroupsPruned {
		t.Errorf("no row group pruned by an equality on host")
	}
}
