//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestDirectScan runs each query that is a direct scan next to the same
// query made not one (WHERE true: DuckDB runs it over apron_scan), over a
// table in persisted files and the buffer whose schema grew, with nulls,
// strings, booleans and nanosecond times: same schema, same rows.
func TestDirectScan(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base, base + 1}}, col{"a", arrow.PrimitiveTypes.Int64, []any{int64(1), nil}},
		col{"s", arrow.BinaryTypes.String, []any{"x", nil}}))
	s.roll()
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base + 2, base + 3}}, col{"b", arrow.FixedWidthTypes.Boolean, []any{true, nil}},
		col{"s", arrow.BinaryTypes.String, []any{"y", "x"}}))
	s.roll()
	s.waitReleased(t, 2)
	// And rows in the buffer, more than one chunk of them.
	n := 20000
	times, a, str := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = base + 10 + int64(i)
		if i%7 != 0 {
			a[i] = int64(i)
		}
		if i%5 != 0 {
			str[i] = fmt.Sprintf("v%d", i%13)
		}
	}
	s.write("db", "m", batch(s.mem, col{"time", tsNs, times}, col{"a", arrow.PrimitiveTypes.Int64, a}, col{"s", arrow.BinaryTypes.String, str}))

	for _, c := range []struct{ sql, db string }{
		{"SELECT * FROM db.m", ""},
		{"SELECT * FROM m", "db"},
		{"select S, TIME from DB.M", ""},
		{"SELECT b AS flag, m.a, s FROM apron.db.m", ""},
		{"SELECT x.* FROM db.m x", ""},
		{"SELECT a, a FROM db.m", ""},
	} {
		t.Run(c.sql, func(t *testing.T) {
			before := s.e.Stats().DirectScans
			got, gotSchema, err := collect(s.e.Query(context.Background(), c.sql, c.db))
			if err != nil {
				t.Fatal(err)
			}
			if s.e.Stats().DirectScans != before+1 {
				t.Fatalf("not run as a direct scan")
			}
			want, wantSchema, err := collect(s.e.Query(context.Background(), c.sql+" WHERE true", c.db))
			if err != nil {
				t.Fatal(err)
			}
			if s.e.Stats().DirectScans != before+1 {
				t.Fatalf("the WHERE true reference ran as a direct scan")
			}
			if !gotSchema.Equal(wantSchema) {
				t.Fatalf("schema %s, DuckDB's %s", gotSchema, wantSchema)
			}
			if len(got) != n+4 {
				t.Fatalf("%d rows, want %d", len(got), n+4)
			}
			equalRows(t, "rows", sorted(got), sorted(want))
		})
	}
	// Not direct scans: anything DuckDB must compute.
	for _, sql := range []string{
		"SELECT * FROM db.m LIMIT 3", "SELECT a + 1 FROM db.m", "SELECT DISTINCT a FROM db.m", "SELECT DISTINCT s, a FROM db.m",
		"SELECT * FROM db.m ORDER BY time", "SELECT count(*) FROM db.m", "SELECT * FROM system.tables",
		"WITH c AS (SELECT * FROM db.m) SELECT * FROM c", "SELECT * FROM db.m JOIN db.m AS n USING (time)", "SELECT * EXCLUDE (a) FROM db.m",
	} {
		before := s.e.Stats().DirectScans
		if _, _, err := collect(s.e.Query(context.Background(), sql, "")); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if s.e.Stats().DirectScans != before {
			t.Errorf("%s ran as a direct scan", sql)
		}
	}
}
