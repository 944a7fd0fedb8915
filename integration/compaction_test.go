package integration

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCompaction: with the real binary, a table's files of one day merge
// into one (system.parquet_files says so); every query answers the same
// before and after, and after kill -9 and a restart; the inputs leave the
// object store.
func TestCompaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--segment-duration", "1s", "--compaction-interval", "500ms", "--compaction-min-files", "3"}
	srv := startServer(t, dir, args...)
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(time.Hour)
	const batches, rows = 4, 250
	for k := range batches {
		times := make([]time.Time, rows)
		for i := range times {
			times[i] = day.Add(time.Duration(k*rows+i) * time.Second)
		}
		rec := timedRecord(mem, int64(k*rows), times...)
		_, err := sqlIngest(ctx, c, "cdb", "t", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // one segment each
	}
	const oracle = "SELECT count(*) AS n, count(DISTINCT id) AS ids, CAST(sum(id) AS BIGINT) AS s, min(time) AS lo, max(time) AS hi FROM cdb.t"
	want := queryOne(t, srv.Addr, oracle)
	if want["n"].(int64) != batches*rows || want["ids"].(int64) != batches*rows {
		t.Fatalf("before compaction: %v", want)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := queryOne(t, srv.Addr, "SELECT count(*) AS files, count(*) FILTER (WHERE compacted) AS merged, CAST(sum(rows) AS BIGINT) AS n FROM system.parquet_files WHERE database_name = 'cdb'")
		// The first three segments' files merge; the last may come after.
		if st["files"].(int64) <= 2 && st["merged"].(int64) == 1 && st["n"].(int64) == batches*rows {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 30s: %v; stderr:\n%s", st, srv.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	same := func(when string) {
		t.Helper()
		got := queryOne(t, srv.Addr, oracle)
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: %s = %v, want %v", when, k, got[k], v)
			}
		}
		if n := readTable(t, srv.Addr, "cdb", "t").NumRows(); n != batches*rows {
			t.Fatalf("%s: plain Flight reads %d rows", when, n)
		}
	}
	same("after compaction")
	srv.Kill(t)
	srv = startServer(t, dir, args...)
	same("after kill -9")
	deadline = time.Now().Add(30 * time.Second)
	listed := func() int {
		return int(queryOne(t, srv.Addr, "SELECT count(*) AS n FROM system.parquet_files WHERE database_name = 'cdb'")["n"].(int64))
	}
	for countObjects(t, dir, "cdb") != listed() {
		if time.Now().After(deadline) {
			t.Fatalf("%d Parquet objects of cdb after compaction, %d listed", countObjects(t, dir, "cdb"), listed())
		}
		time.Sleep(100 * time.Millisecond)
	}
	same("inputs deleted")
}

// countObjects counts the Parquet objects of database db in the local
// object store of data dir dir.
func countObjects(t *testing.T, dir, db string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "objects", "dbs", db, "*", "*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}
