//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// cpu writes n rows of db.cpu: host h<i%hosts>, usage i, 1s apart.
func (v *env) cpu(db string, n, hosts int, start int64) {
	times, host, usage := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = start + int64(i)*1e9
		host[i] = fmt.Sprintf("h%d", i%hosts)
		usage[i] = float64(i)
	}
	v.write(db, "cpu", batch(v.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage}))
}

func TestBasicSelect(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db1", 10, 2, base)
	equalRows(t, "count", v.query("SELECT count(*), sum(usage) FROM db1.cpu", ""), []string{"10|45"})
	equalRows(t, "unqualified", v.query("SELECT host, count(*) FROM cpu GROUP BY host ORDER BY host", "db1"), []string{"h0|5", "h1|5"})
	equalRows(t, "projection", v.query("SELECT usage FROM db1.cpu WHERE host = 'h1' ORDER BY usage LIMIT 2", ""), []string{"1", "3"})
	equalRows(t, "star", v.query("SELECT * FROM db1.cpu ORDER BY time LIMIT 1", ""), []string{fmt.Sprintf("%d|h0|0", base)})
}

func TestReadTwice(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db1", 5000, 3, base) // more than one vector, more than one chunk
	cases := []struct{ name, sql, want string }{
		{"self_join", "SELECT count(*) FROM cpu a JOIN cpu b ON a.time = b.time AND a.host = b.host", "5000"},
		{"self_join_hosts", "SELECT count(*) FROM cpu a JOIN cpu b ON a.host = b.host WHERE a.usage < 30 AND b.usage < 30", "300"},
		{"cte_twice", "WITH c AS (SELECT host, usage FROM cpu) SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM c WHERE host = 'h0')", "6667"},
		{"union_all", "SELECT count(*), sum(usage) FROM (SELECT usage FROM cpu UNION ALL SELECT usage FROM cpu)", "10000|24995000"},
		{"correlated", "SELECT count(*) FROM cpu a WHERE usage = (SELECT max(usage) FROM cpu b WHERE b.host = a.host)", "3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			equalRows(t, c.name, v.query(c.sql, "db1"), []string{c.want})
		})
	}
}

func TestSchemaGrowth(t *testing.T) {
	v := newEnv(t, Config{})
	v.write("db", "m", batch(v.mem, col{"time", tsNs, []any{base, base + 1}}, col{"a", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(2)}}))
	equalRows(t, "before", v.query("SELECT * FROM db.m ORDER BY time", ""), []string{fmt.Sprintf("%d|1", base), fmt.Sprintf("%d|2", base+1)})
	v.write("db", "m", batch(v.mem, col{"time", tsNs, []any{base + 2}}, col{"b", arrow.BinaryTypes.String, []any{"x"}}))
	equalRows(t, "after", v.query("SELECT * FROM db.m ORDER BY time", ""),
		[]string{fmt.Sprintf("%d|1|NULL", base), fmt.Sprintf("%d|2|NULL", base+1), fmt.Sprintf("%d|NULL|x", base+2)})
	equalRows(t, "new column only", v.query("SELECT b FROM db.m ORDER BY time", ""), []string{"NULL", "NULL", "x"})
	equalRows(t, "count null", v.query("SELECT count(b), count(a), count(*) FROM db.m", ""), []string{"1|2|3"})
	// A new table appears too.
	v.write("db", "n", batch(v.mem, col{"time", tsNs, []any{base}}))
	equalRows(t, "new table", v.query("SELECT count(*) FROM n", "db"), []string{"1"})
}

func TestNanosecondTimes(t *testing.T) {
	v := newEnv(t, Config{})
	const n = 10000
	times, vals := make([]any, n), make([]any, n)
	for i := range n {
		times[i] = base + int64(i)
		vals[i] = int64(i)
	}
	v.write("db", "ns", batch(v.mem, col{"time", tsNs, times}, col{"v", arrow.PrimitiveTypes.Int64, vals}))
	equalRows(t, "distinct", v.query("SELECT count(DISTINCT time) FROM db.ns", ""), []string{"10000"})
	equalRows(t, "join", v.query("SELECT count(*) FROM db.ns a JOIN db.ns b ON a.time = b.time", ""), []string{"10000"})
	equalRows(t, "group", v.query("SELECT count(*) FROM (SELECT time, count(*) c FROM db.ns GROUP BY time) WHERE c = 1", ""), []string{"10000"})
	equalRows(t, "literal", v.query(fmt.Sprintf("SELECT v FROM db.ns WHERE time = make_timestamp_ns(%d)", base+7), ""), []string{"7"})
	_, schema, err := collect(v.e.Query(context.Background(), "SELECT time FROM db.ns LIMIT 1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := schema.Field(0).Type; !arrow.TypeEqual(got, tsNs) {
		t.Errorf("time is %s, want %s", got, tsNs)
	}
}

func TestErrors(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db1", 10, 2, base)
	cases := []struct {
		name, sql, db string
		want          error
	}{
		{"syntax", "SELEC 1", "", ErrSyntax},
		{"binder", "SELECT nosuchcolumn FROM db1.cpu", "", ErrSyntax},
		{"unknown_table", "SELECT * FROM db1.nosuch", "", ErrNotFound},
		{"unknown_schema", "SELECT * FROM nosuchdb.cpu", "", ErrNotFound},
		{"unqualified_without_db", "SELECT * FROM cpu", "", ErrNotFound},
		{"unknown_current_db", "SELECT 1", "nosuchdb", ErrNotFound},
		{"two_statements", "SELECT 1; SELECT 2", "", ErrUnsupportedStatement},
		{"not_select", "CREATE TABLE x (a INT)", "", ErrUnsupportedStatement},
		{"external_access", "SELECT * FROM read_csv('/etc/passwd')", "", ErrUnsupportedStatement},
		{"runtime", "SELECT CAST('x' AS INTEGER) FROM db1.cpu", "", ErrExecution},
		{"empty", "  ", "", ErrSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := collect(v.e.Query(context.Background(), c.sql, c.db))
			if err == nil {
				t.Fatalf("%s: no error", c.sql)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("%s: %v, want %v", c.sql, err, c.want)
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
	var e *queryError
	_, err := v.e.Query(context.Background(), "SELECT * FROM db1.nosuch", "")
	if !errors.As(err, &e) || !contains(err.Error(), "nosuch") {
		t.Errorf("not found error %q does not name the table", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
