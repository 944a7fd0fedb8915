//go:build duckdb_arrow

package query

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPersistedNative reads persisted files with read_parquet (through the
// table's file macro), each row once, and falls back to the scan when the
// query calls a table function.
func TestPersistedNative(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			s := newStoreEnv(t, sk.new(t), Config{})
			var w written
			for i := range 3 {
				s.writeRows(&w, base+int64(i)*int64(time.Minute), 1000)
				s.roll()
			}
			s.clock.advance(time.Hour)
			s.waitReleased(t, 3)
			s.writeRows(&w, base+int64(3)*int64(time.Minute), 500) // buffered
			want := []string{fmt.Sprintf("%d|%s", w.n, floatString(w.sum))}
			equalRows(t, "native", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
			if !macrosRead(s.e) {
				t.Error("no connection's file macro reads the files")
			}
			equalRows(t, "unqualified", s.query("SELECT count(*), sum(usage) FROM cpu", "db"), want)
			equalRows(t, "fallback", s.query("SELECT count(*), sum(usage) FROM db.cpu, range(1)", ""), want)
			equalRows(t, "self join", s.query("SELECT count(*) FROM db.cpu a JOIN db.cpu b USING (time)", ""), []string{fmt.Sprint(w.n)})
			equalRows(t, "rows", s.query("SELECT time, host, usage FROM db.cpu ORDER BY time", ""), w.rows)
			// After a query with files, one without them on the same
			// connection reads nothing twice.
			equalRows(t, "again", s.query("SELECT count(*), sum(usage) FROM apron.db.cpu", ""), want)
		})
	}
}

// macrosRead says whether an idle connection's file macro reads files.
func macrosRead(e *Engine) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.mu.idle {
		for _, body := range c.macros {
			if strings.Contains(body, "read_parquet") {
				return true
			}
		}
	}
	return false
}
