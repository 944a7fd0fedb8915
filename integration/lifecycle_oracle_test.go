//go:build duckdb_arrow

package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestLifecycleOracle: a random mix of writes, DELETEs, DROP TABLEs,
// compactions (the server compacts every 200ms) and restarts (kill -9 or
// SIGTERM), applied to the real binary and to a DuckDB of reference; after
// each step that changes rows, the same queries give the same answers.
func TestLifecycleOracle(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	args := []string{"--segment-duration", "1s", "--compaction-interval", "200ms", "--compaction-min-files", "2"}
	srv := startServer(t, dir, args...)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ref := newRefDuck(t)
	ref.exec("CREATE SCHEMA lc")
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	exists := map[string]bool{}
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	next := int64(0)
	write := func(table string) {
		n := 50 + rng.IntN(200)
		b := array.NewRecordBuilder(mem, schema)
		for range n {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(day.Add(time.Duration(rng.IntN(3*24*3600))*time.Second).UnixNano() + next))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", rng.IntN(5)))
			b.Field(2).(*array.Int64Builder).Append(next)
			next++
		}
		rec := b.NewRecordBatch()
		b.Release()
		defer rec.Release()
		cn := adbcConn(t, srv.Addr, mem)
		defer cn.Close()
		if got, err := adbcIngest(testCtx(t), cn, "lc", table, adbc.OptionValueIngestModeCreateAppend, rec); err != nil || got != int64(n) {
			t.Fatalf("ingest into lc.%s: %d rows, %v", table, got, err)
		}
		if !exists[table] {
			ref.exec("CREATE TABLE lc." + table + " (time TIMESTAMP_NS, host VARCHAR, v BIGINT)")
			exists[table] = true
		}
		ref.append("lc", table, rec)
	}
	update := func(sql string) int64 {
		t.Helper()
		cn := adbcConn(t, srv.Addr, mem)
		defer cn.Close()
		n, err := adbcUpdate(testCtx(t), cn, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	refCount := func(sql string) int64 {
		rr, err := ref.query(sql)
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := canonResult(rr)
		if err != nil || len(rows) != 1 {
			t.Fatalf("%s on the reference: %v %v", sql, rows, err)
		}
		var n int64
		fmt.Sscan(rows[0].String(), &n)
		return n
	}
	compare := func(step string) {
		t.Helper()
		cn := adbcConn(t, srv.Addr, mem)
		defer cn.Close()
		for table := range exists {
			for _, q := range []string{
				"SELECT count(*), count(DISTINCT v), sum(v), min(time), max(time) FROM lc." + table,
				"SELECT host, count(*), sum(v), min(v), max(v) FROM lc." + table + " GROUP BY host",
				"SELECT date_trunc('day', time) AS d, count(*), sum(v) FROM lc." + table + " GROUP BY d",
			} {
				rdr, err := adbcQuery(testCtx(t), cn, q)
				if err != nil {
					t.Fatalf("%s: %s: %v", step, q, err)
				}
				_, got, err := canonResult(rdr)
				if err != nil {
					t.Fatal(err)
				}
				rr, err := ref.query(q)
				if err != nil {
					t.Fatal(err)
				}
				_, want, err := canonResult(rr)
				if err != nil {
					t.Fatal(err)
				}
				sortRows(got)
				sortRows(want)
				if len(got) != len(want) {
					t.Fatalf("%s: %s: %d rows, reference %d\n got %v\nwant %v", step, q, len(got), len(want), got, want)
				}
				for i := range got {
					if !sameRow(got[i], want[i]) {
						t.Fatalf("%s: %s: row %d = %s, reference %s", step, q, i, got[i].String(), want[i].String())
					}
				}
			}
		}
	}
	tables := []string{"a", "b"}
	var log []string
	for step := range 30 {
		table := tables[rng.IntN(len(tables))]
		var what string
		switch r := rng.IntN(10); {
		case r < 5 || !exists[table]:
			write(table)
			what = "write " + table
		case r < 7:
			k, m := 2+rng.IntN(5), rng.IntN(2)
			cond := fmt.Sprintf("v %% %d = %d AND host <> 'h%d'", k, m, rng.IntN(5))
			want := refCount("SELECT count(*) FROM lc." + table + " WHERE " + cond)
			if got := update("DELETE FROM lc." + table + " WHERE " + cond); got != want {
				t.Fatalf("step %d: DELETE … WHERE %s answered %d, reference %d (steps %s)", step, cond, got, want, strings.Join(log, ", "))
			}
			ref.exec("DELETE FROM lc." + table + " WHERE " + cond)
			what = "delete " + table
		case r < 8:
			update("DROP TABLE lc." + table)
			ref.exec("DROP TABLE lc." + table)
			delete(exists, table)
			what = "drop " + table
		case r < 9:
			srv.Kill(t)
			srv = startServer(t, dir, args...)
			what = "kill -9"
		default:
			// Let the segments roll, persist and compact.
			time.Sleep(1500 * time.Millisecond)
			what = "wait for compaction"
		}
		log = append(log, what)
		compare(fmt.Sprintf("step %d (%s; after %s)", step, what, strings.Join(log, ", ")))
	}
	merged := queryOne(t, srv.Addr, "SELECT count(*) FILTER (WHERE compacted) AS n FROM system.parquet_files")["n"].(int64)
	t.Logf("steps: %s; %d merged files at the end", strings.Join(log, ", "), merged)
	srv = srv.Restart(t)
	compare("after a clean restart")
}
