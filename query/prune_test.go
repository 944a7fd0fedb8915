//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

func TestTimePruning(t *testing.T) {
	v := newEnv(t, Config{})
	ref := newRefDB(t)
	ref.exec("CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE)")
	// 100k rows 1 ms apart, in chunks of 8192 rows (about 8 s each).
	const n = 100_000
	for off := 0; off < n; off += 25_000 {
		times, host, usage := make([]any, 25_000), make([]any, 25_000), make([]any, 25_000)
		for i := range 25_000 {
			times[i] = base + int64(off+i)*1e6
			host[i] = fmt.Sprintf("h%d", (off+i)%7)
			usage[i] = float64(off + i)
		}
		rec := batch(v.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage})
		ref.append("db", "cpu", rec)
		v.write("db", "cpu", rec)
	}
	ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") }
	mid, last := base+50_000*1e6, base+(n-1)*1e6
	cases := []struct {
		name, sql string
		prunes    bool
	}{
		{"ge_ns_literal", fmt.Sprintf("SELECT count(*), sum(usage) FROM cpu WHERE time >= TIMESTAMP_NS '%s'", ts(mid+1)), true},
		{"gt_string", fmt.Sprintf("SELECT count(*), min(time) FROM cpu WHERE time > '%s'", ts(mid+1)), true},
		{"between", fmt.Sprintf("SELECT count(*) FROM db.cpu c WHERE c.time BETWEEN '%s' AND '%s' AND host = 'h3'", ts(mid), ts(mid+5e9)), true},
		{"flipped_lt", fmt.Sprintf("SELECT count(*) FROM cpu WHERE '%s' > time", ts(base+3e9+1)), true},
		{"eq", fmt.Sprintf("SELECT usage FROM cpu WHERE time = '%s'", ts(mid+1e6)), true},
		{"timestamp_us", fmt.Sprintf("SELECT count(*) FROM cpu WHERE time <= TIMESTAMP '%s'", ts(base+2e9+5e5)), true},
		{"date", "SELECT count(*) FROM cpu WHERE time < DATE '2024-03-02'", false},
		{"arith", fmt.Sprintf("SELECT count(*) FROM cpu WHERE time >= TIMESTAMP_NS '%s' - INTERVAL 10 SECOND", ts(last)), true},
		{"or_no_pruning", fmt.Sprintf("SELECT count(*) FROM cpu WHERE time > '%s' OR host = 'h1'", ts(mid)), false},
		{"self_join_one_side", fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM cpu WHERE time > '%s') a JOIN cpu b ON a.time = b.time", ts(mid)), false},
		{"both_sides", fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM cpu WHERE time > '%s') a JOIN (SELECT * FROM cpu WHERE time > '%s') b ON a.time = b.time", ts(mid), ts(last-1e9)), true},
		{"cte_shadow", fmt.Sprintf("WITH cpu AS (SELECT * FROM db.cpu WHERE time < '%s') SELECT count(*) FROM cpu WHERE time > '%s'", ts(mid), ts(base+1e9)), false},
		{"subquery_bound", "SELECT count(*) FROM cpu WHERE time > (SELECT max(time) - INTERVAL 1 SECOND FROM cpu)", false},
		{"null_bound", "SELECT count(*) FROM cpu WHERE time > NULL", false},
		{"now", "SELECT count(*) FROM cpu WHERE time > now()::TIMESTAMP - INTERVAL 5 MINUTE", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := v.e.Stats().ChunksPruned
			got := v.query(c.sql, "db")
			pruned := v.e.Stats().ChunksPruned - before
			ref.exec("SET search_path = 'db'")
			equalRows(t, c.sql, sorted(got), sorted(ref.query(c.sql)))
			if c.prunes && pruned == 0 {
				t.Errorf("%s: no chunk pruned", c.sql)
			}
			if !c.prunes && pruned != 0 {
				t.Errorf("%s: %d chunks pruned", c.sql, pruned)
			}
		})
	}
}

// TestBoundValuesKept: a constant time bound is evaluated once and its
// value kept for the next statements bounded by it (wherever it stands
// in them); a bound using now() is evaluated every time.
func TestBoundValuesKept(t *testing.T) {
	v := newEnv(t, Config{})
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, []any{base, base + 1e9}}, col{"host", arrow.BinaryTypes.String, []any{"a", "b"}}))
	lit := "TIMESTAMP_NS '2024-03-01 12:00:00.5'"
	for _, q := range []string{
		"SELECT host FROM db.cpu WHERE time >= " + lit,
		"SELECT host, time FROM db.cpu WHERE time >= " + lit,
		"SELECT count(host) FROM db.cpu WHERE host <> 'x' AND time >= " + lit,
	} {
		v.query(q, "")
	}
	hits, misses, entries, _ := v.e.boundValues.stats()
	if entries != 1 || misses != 1 || hits != 2 {
		t.Errorf("constant bound: %d entries, %d misses, %d hits; want 1, 1, 2", entries, misses, hits)
	}
	for range 2 {
		equalRows(t, "now", v.query("SELECT host FROM db.cpu WHERE time >= now() - INTERVAL 100000 DAY", ""), []string{"a", "b"})
	}
	if _, _, n, _ := v.e.boundValues.stats(); n != 1 {
		t.Errorf("a bound using now() was kept: %d entries", n)
	}
}

// TestNowBoundPreparedOnce: a bound using now() is evaluated by a
// statement prepared once per connection and run again for each query,
// and each run gives now() of its own transaction, not the first one's.
func TestNowBoundPreparedOnce(t *testing.T) {
	v := newEnv(t, Config{})
	c, err := v.e.acquire(context.Background(), false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer v.e.release(c)
	// (A cast of a string is left to DuckDB: nowbounds.go evaluates
	// now() - INTERVAL 1 MINUTE itself.)
	expr := selectExpr(t, c, "now() - to_minutes(CAST('1' AS BIGINT))")
	var got []evaluated
	var prepared []duck.PreparedStatement // the connection's after each run
	for range 3 {
		if err := c.begin(); err != nil {
			t.Fatal(err)
		}
		vals, err := v.e.evalTimes(c, []any{expr})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.end(); err != nil {
			t.Fatal(err)
		}
		got = append(got, vals[0])
		for _, stmt := range c.evals {
			prepared = append(prepared, stmt)
		}
		time.Sleep(2 * time.Millisecond)
	}
	want := time.Now().Add(-time.Minute).UnixNano()
	for i, g := range got {
		if !g.ok || g.lo > want || g.hi < want-int64(time.Second)-clockSlack {
			t.Fatalf("evaluation %d: [%d, %d] does not hold now() - 1 minute (%d)", i, g.lo, g.hi, want)
		}
		if i > 0 && g.lo <= got[i-1].lo {
			t.Errorf("evaluation %d gave %d, not later than the one before (%d): now() of an earlier transaction", i, g.lo, got[i-1].lo)
		}
	}
	if len(prepared) != 3 || prepared[1].Ptr != prepared[0].Ptr || prepared[2].Ptr != prepared[0].Ptr {
		t.Errorf("statements kept after each run: %v; want one, prepared at the first run and run again after", prepared)
	}
}

// TestFailingBoundError: a time bound that fails to evaluate fails the
// transaction it is evaluated in; the statement still gets DuckDB's own
// error for it (what was wrong), not "Current transaction is aborted",
// and the connection serves the next statement.
func TestFailingBoundError(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1}) // one connection: the next statements reuse it
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, []any{base, base + 1e9}}, col{"host", arrow.BinaryTypes.String, []any{"a", "b"}}))
	for _, c := range []struct{ sql, want string }{
		{"SELECT host FROM db.cpu WHERE time >= 'garbage'::TIMESTAMP", `"garbage"`},
		{"SELECT host FROM db.cpu WHERE time >= now() - to_minutes(CAST('x' AS BIGINT))", "'x'"},
	} {
		_, _, err := collect(v.e.Query(context.Background(), c.sql, ""))
		if err == nil || !strings.Contains(err.Error(), "Conversion Error") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "aborted") {
			t.Errorf("%s: error %v, want DuckDB's conversion error naming %s", c.sql, err, c.want)
		}
		equalRows(t, "after the failed bound", v.query("SELECT host FROM db.cpu WHERE time >= now() - INTERVAL 100000 DAY", ""), []string{"a", "b"})
	}
}
