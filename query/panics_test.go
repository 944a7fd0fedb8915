//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
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
	t.Cleanup(func() { directTestHooks.Store(nil) })
	boom := func(*directScan) { panic("boom") }
	for _, h := range []directHooks{{reader: boom}, {built: boom}} {
		directTestHooks.Store(&h)
		for i := range 5 {
			_, _, err := collect(s.e.Query(context.Background(), sql, ""))
			if !errors.Is(err, ErrInternal) {
				t.Fatalf("query %d with a panic: got %v, want ErrInternal", i, err)
			}
		}
		directTestHooks.Store(nil)
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
