//go:build duckdb_arrow

package query

import (
	"fmt"
	"testing"
)

// TestConnectionKeepsItsDatabase: queries of two databases interleaved
// run on pooled connections already of their database (pickIdle), so
// that after the first query of each none changes its database; with
// more databases than the pool may hold connections, the pool stays
// within its bound, the most recent connection changes database, and
// every answer is its own database's.
func TestConnectionKeepsItsDatabase(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 4})
	v.cpu("db1", 10, 2, base)
	v.cpu("db2", 20, 2, base)
	switches := func() int64 { return v.e.Stats().DatabaseSwitches }
	var first int64
	for i := range 10 {
		equalRows(t, "db1", v.query("SELECT count(*) FROM cpu", "db1"), []string{"10"})
		equalRows(t, "db2", v.query("SELECT count(*) FROM cpu", "db2"), []string{"20"})
		if i == 0 {
			first = switches()
		}
	}
	if first > 2 {
		t.Errorf("%d database changes for the first query of each of two databases, want at most 2", first)
	}
	if got := switches(); got != first {
		t.Errorf("%d database changes in 18 queries of two databases interleaved, want none", got-first)
	}

	// One slot and the system ones: three connections at most.
	w := newEnv(t, Config{MaxConcurrent: 1})
	for d := range 4 {
		w.cpu(fmt.Sprintf("db%d", d), 10+d, 2, base)
	}
	for range 3 {
		for d := range 4 {
			equalRows(t, fmt.Sprintf("db%d", d), w.query("SELECT count(*) FROM cpu", fmt.Sprintf("db%d", d)), []string{fmt.Sprint(10 + d)})
		}
	}
	st := w.e.Stats()
	if limit := 1 + systemSlots; st.Open > limit {
		t.Errorf("%d connections open, want at most %d", st.Open, limit)
	}
	if st.DatabaseSwitches <= int64(st.Open) {
		t.Errorf("%d database changes on %d connections for 4 databases interleaved: the full pool should have changed some", st.DatabaseSwitches, st.Open)
	}
}
