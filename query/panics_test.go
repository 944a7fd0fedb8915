//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestPanicFailsQuery: a panic as a query starts (here as its direct
// reader is built, before and after the reader holds its View: where the
// latest rows are picked in Go) fails that query with ErrInternal and
// leaves nothing held. More queries panic than there are slots, and the
// queries after them run; no connection is left active, and the Views'
// chunks are all freed when the buffer closes (chunkAllocator's check).
// Before panics.go the third query waited for a slot and timed out.
func TestPanicFailsQuery(t *testing.T) {
	s, _, rng, write := cpuStore(t, Config{MaxConcurrent: 2, QueueTimeout: 500 * time.Millisecond, Timeout: DefaultTimeout}, 11)
	write(base, int64(time.Hour), 2000, func(int) any { return fmt.Sprintf("h%d", rng.IntN(20)) },
		func(int, any) any { return float64(rng.IntN(100)) }, true)
	const sql = "SELECT host, max(time), arg_max_null(usage, time) FROM db.cpu GROUP BY host"
	want := s.query(sql, "")
	direct := s.e.Stats().DirectScans
	if direct == 0 {
		t.Fatalf("%s was not a direct scan: the test would not reach its hooks", sql)
	}
	t.Cleanup(func() { panicTestHooks.Store(nil) })
	boom := func(*directScan) { panic("boom") }
	for _, h := range []panicHooks{{reader: boom}, {built: boom}} {
		panicTestHooks.Store(&h)
		for i := range 5 {
			_, _, err := collect(s.e.Query(context.Background(), sql, ""))
			if !errors.Is(err, ErrInternal) {
				t.Fatalf("query %d with a panic: got %v, want ErrInternal", i, err)
			}
		}
		panicTestHooks.Store(nil)
		for range 5 {
			equalRows(t, sql+" after the panics", s.query(sql, ""), want)
		}
	}
	st := s.e.Stats()
	if st.InternalErrors != 10 {
		t.Errorf("InternalErrors = %d, want 10", st.InternalErrors)
	}
	if st.Active != 0 {
		t.Errorf("%d connections active after the queries", st.Active)
	}
	// The buffer goes on: rows written after the panics are read, and
	// the segment the panicked queries read is persisted and freed (a
	// View left held would keep its chunks past the buffer's Close).
	s.roll()
	write(base+int64(2*time.Hour), int64(time.Minute), 10, func(int) any { return "late" }, func(int, any) any { return 1.0 }, true)
	s.waitReleased(t, 1)
	if got := s.query("SELECT count(*) FROM db.cpu WHERE host = 'late'", ""); len(got) != 1 || got[0] != "10" {
		t.Errorf("rows written after the panics: %v", got)
	}
}

// TestPanicInReadAhead: a panic reading a file's latest rows ahead is
// logged and counted, and the file is left to the next query, which
// reads it; the server goes on.
func TestPanicInReadAhead(t *testing.T) {
	s, ref, _, write := cpuStore(t, Config{}, 12)
	host := func(i int) any { return fmt.Sprintf("h%d", i%10) }
	usage := func(int, any) any { return 1.0 }
	const q = "SELECT host, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host"
	write(base, int64(time.Hour), 3000, host, usage, true)
	s.roll()
	s.waitReleased(t, 1)
	equalRows(t, "one file", sorted(s.query(q, "")), sorted(ref.query(q))) // wants the table's next files
	// Set before the next file exists: the engine's own read-ahead runs
	// every second, and the file is read ahead (panicking) once, by it or
	// by the call below.
	t.Cleanup(func() { panicTestHooks.Store(nil) })
	panicTestHooks.Store(&panicHooks{readAhead: func() { panic("boom") }})
	write(base+int64(2*time.Hour), int64(time.Hour), 3000, host, usage, true)
	s.roll()
	s.waitReleased(t, 2)
	s.e.warmLatest(context.Background())
	// The engine's read-ahead may hold the file between its mark and the
	// hook: the hook stays until the panic is counted.
	for deadline := time.Now().Add(10 * time.Second); s.e.Stats().InternalErrors == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	panicTestHooks.Store(nil)
	st := s.e.Stats()
	if st.InternalErrors != 1 || st.LatestFileReadAheads != 0 {
		t.Fatalf("after a panic reading ahead: %d internal errors, %d files read ahead; want 1, 0", st.InternalErrors, st.LatestFileReadAheads)
	}
	reads := st.LatestFileReads
	equalRows(t, "two files", sorted(s.query(q, "")), sorted(ref.query(q)))
	if got := s.e.Stats().LatestFileReads - reads; got != 1 {
		t.Errorf("the query after the failed read-ahead read %d files, want 1", got)
	}
}

// TestPanicInFill: a panic filling a last-value cache is logged and
// counted, and the fill is tried again: the cache gets ready, and
// answers as the table does.
func TestPanicInFill(t *testing.T) {
	s, ref, _, write := cpuStore(t, Config{}, 13)
	write(base, int64(time.Hour), 2000, func(i int) any { return fmt.Sprintf("h%d", i%10) }, func(int, any) any { return 1.0 }, true)
	var panicked atomic.Bool
	t.Cleanup(func() { panicTestHooks.Store(nil) })
	panicTestHooks.Store(&panicHooks{fill: func() {
		if panicked.CompareAndSwap(false, true) {
			panic("boom")
		}
	}})
	if err := s.exec("CREATE LAST VALUE CACHE ON db.cpu (host)"); err != nil {
		t.Fatal(err)
	}
	s.waitReady("db", "cpu")
	if !panicked.Load() || s.e.Stats().InternalErrors != 1 {
		t.Fatalf("panicked %v, %d internal errors; want a panic counted", panicked.Load(), s.e.Stats().InternalErrors)
	}
	const q = "SELECT host, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host"
	uses := s.e.Stats().LastValueUses
	equalRows(t, "from the cache", sorted(s.query(q, "")), sorted(ref.query(q)))
	if s.e.Stats().LastValueUses == uses {
		t.Error("the query did not read the cache")
	}
}
