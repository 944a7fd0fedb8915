//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
)

// TestPlanReuse: a statement run again on a connection runs on the plan
// kept from its last run (plancache.go), and its answer is the new
// query's: rows written since, its own time bounds and equalities, its
// own caller's view of the system tables. A change of the catalog, a
// failed run, EXPLAIN, and another database are not served a kept plan.
func TestPlanReuse(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1}) // one connection: every run meets the plans of the last
	v.cpu("db1", 10, 2, base)
	reused := func() int64 { return v.e.Stats().PlansReused }
	// run queries sql twice, and checks both answers and that the second
	// ran on a kept plan exactly when reuse says so.
	run := func(name, sql, db string, want []string, reuse bool) {
		t.Helper()
		equalRows(t, name+" (first)", v.query(sql, db), want)
		before := reused()
		equalRows(t, name+" (again)", v.query(sql, db), want)
		if got := reused() - before; got != map[bool]int64{false: 0, true: 1}[reuse] {
			t.Errorf("%s: %d plans reused on the second run, want reuse %v", name, got, reuse)
		}
	}
	run("count", "SELECT count(*), sum(usage) FROM cpu", "db1", []string{"10|45"}, true)
	run("bounds", fmt.Sprintf("SELECT count(*) FROM cpu WHERE time >= make_timestamp(%d)", (base+5e9)/1000), "db1", []string{"5"}, true)
	run("equals", "SELECT usage FROM cpu WHERE host = 'h1' ORDER BY usage", "db1", []string{"1", "3", "5", "7", "9"}, true)
	run("direct", "SELECT usage FROM cpu", "db1", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, true)
	for range 2 {
		before := reused()
		if rows := v.query("EXPLAIN SELECT count(*) FROM cpu", "db1"); len(rows) == 0 {
			t.Error("EXPLAIN: no rows")
		}
		if reused() != before {
			t.Error("EXPLAIN ran on a kept plan")
		}
	}

	// Rows written since the plan was kept are read (the scan takes the
	// new query's View), through every path the first run took.
	v.cpu("db1", 20, 2, base+10e9)
	for _, c := range []struct{ sql, want string }{
		{"SELECT count(*), sum(usage) FROM cpu", "30|235"},
		{fmt.Sprintf("SELECT count(*) FROM cpu WHERE time >= make_timestamp(%d)", (base+5e9)/1000), "25"},
		{"SELECT count(*) FROM (SELECT usage FROM cpu WHERE host = 'h1')", "15"},
	} {
		before := reused()
		equalRows(t, c.sql+" after a write", v.query(c.sql, "db1"), []string{c.want})
		if c.sql == "SELECT count(*), sum(usage) FROM cpu" && reused() != before+1 {
			t.Errorf("%s after a write of rows only: not run on its kept plan", c.sql)
		}
	}
	if got := v.query("SELECT count(*) FROM (SELECT usage FROM cpu)", "db1"); len(got) != 1 || got[0] != "30" {
		t.Errorf("count of the direct scan's rows: %v", got)
	}

	// Same text, another database: another plan.
	v.cpu("db2", 3, 1, base)
	before := reused()
	equalRows(t, "other database", v.query("SELECT count(*), sum(usage) FROM cpu", "db2"), []string{"3|3"})
	if reused() != before {
		t.Error("a plan kept for db1 ran for db2")
	}

	// A new column changes the catalog: the plan is made again, and has it.
	v.write("db1", "cpu", batch(v.mem, col{"time", tsNs, []any{base + 100e9}}, col{"host", arrow.BinaryTypes.String, []any{"h9"}},
		col{"extra", arrow.PrimitiveTypes.Int64, []any{int64(7)}}))
	before = reused()
	equalRows(t, "new column", v.query("SELECT * FROM cpu WHERE host = 'h9'", "db1"), []string{fmt.Sprintf("%d|h9|NULL|7", base+100e9)})
	if reused() != before {
		t.Error("a plan kept before a catalog change was run after it")
	}

	// A run that fails is not kept: the next one prepares again.
	bad := "SELECT CAST(host AS INTEGER) FROM cpu"
	for range 2 {
		before = reused()
		if _, _, err := collect(v.e.Query(context.Background(), bad, "db1")); err == nil {
			t.Fatalf("%s: no error", bad)
		}
		if reused() != before {
			t.Errorf("%s: the plan of a failed run was kept", bad)
		}
	}

	// Time bounds that depend on now() are the new query's: DuckDB binds
	// such a statement again on every run.
	now := time.Now().UnixNano()
	v.write("db1", "recent", batch(v.mem, col{"time", tsNs, []any{now - int64(2*time.Second)}}, col{"a", arrow.PrimitiveTypes.Int64, []any{int64(1)}}))
	q := "SELECT count(*) FROM recent WHERE time > now() - INTERVAL 3 SECOND"
	equalRows(t, "now() first", v.query(q, "db1"), []string{"1"})
	time.Sleep(1100 * time.Millisecond)
	equalRows(t, "now() later", v.query(q, "db1"), []string{"0"})
}

// TestPlanReuseCaller: a plan kept from one caller's statement, run again
// for another caller, answers what the second may see: the system tables
// are built at each run for the query's caller, not the one it was
// planned for.
func TestPlanReuseCaller(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1})
	v.cpu("alpha", 1, 1, base)
	v.cpu("beta", 1, 1, base)
	now := time.Now()
	admin, adminRec, _ := auth.Generate("admin", now)
	adminRec.Admin = true
	reader, readerRec, _ := auth.Generate("reader", now)
	readerRec.Grants = []catalog.Grant{{Database: "alpha", Read: true}}
	if err := v.wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{adminRec, readerRec}}); err != nil {
		t.Fatal(err)
	}
	verifier := auth.NewVerifier(v.wb.Catalog(), time.Now)
	as := func(tok string) context.Context {
		p, err := verifier.Verify(tok)
		if err != nil {
			t.Fatal(err)
		}
		return auth.NewContext(context.Background(), p)
	}
	const sql = "SELECT database_name FROM system.tables ORDER BY 1"
	get := func(ctx context.Context) string {
		rows, _, err := collect(v.e.Query(ctx, sql, ""))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(rows, ",")
	}
	if got := get(as(admin)); got != "alpha,beta" {
		t.Fatalf("admin sees %q", got)
	}
	before := v.e.Stats().PlansReused
	if got := get(as(reader)); got != "alpha" {
		t.Errorf("the reader of alpha, on the admin's plan, sees %q", got)
	}
	if v.e.Stats().PlansReused != before+1 {
		t.Error("the reader's statement did not run on the kept plan: the test shows nothing")
	}
	// The reader's text naming beta is refused, kept plan or not: read
	// by DuckDB, from metadata (metadirect.go), streamed from a
	// last-value cache (direct.go) or filtered by the scan without a
	// Prepare (direct_shape.go), each after the admin ran it.
	if err := v.exec("CREATE LAST VALUE CACHE ON beta.cpu (host)"); err != nil {
		t.Fatal(err)
	}
	v.waitReady("beta", "cpu")
	st := v.e.Stats()
	for _, q := range []string{
		"SELECT count(*), sum(usage) FROM beta.cpu",
		"SELECT count(*) FROM beta.cpu",
		"SELECT * FROM last_value('beta.cpu')",
		"SELECT host, arg_max(usage, time) FROM beta.cpu GROUP BY host",
		// A filtered direct scan, then one of the same shape (another
		// host): streamed without a Prepare for the admin.
		"SELECT * FROM beta.cpu WHERE host = 'h0'",
		"SELECT * FROM beta.cpu WHERE host = 'h1'",
	} {
		for range 2 {
			if _, _, err := collect(v.e.Query(as(admin), q, "")); err != nil {
				t.Errorf("admin: %s: %v", q, err)
			}
			if _, _, err := collect(v.e.Query(as(reader), q, "")); !errors.Is(err, auth.ErrPermissionDenied) {
				t.Errorf("the reader of alpha: %s: %v, want a permission error", q, err)
			}
		}
	}
	if now := v.e.Stats(); now.MetaAnswers == st.MetaAnswers || now.DirectScans < st.DirectScans+8 || now.PlansReused < st.PlansReused+4 ||
		now.DirectUnprepared < st.DirectUnprepared+1 {
		t.Errorf("the admin's runs took not every path (metadata answers %d, direct scans %d, plans reused %d, unprepared %d): the test shows less than it says",
			now.MetaAnswers-st.MetaAnswers, now.DirectScans-st.DirectScans, now.PlansReused-st.PlansReused, now.DirectUnprepared-st.DirectUnprepared)
	}
}

// TestPlanReuseParams: a kept plan of a statement with parameters runs
// with the values bound for the new run, of another type too (DuckDB
// binds the statement again when the parameters' types changed).
func TestPlanReuseParams(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1})
	v.cpu("db", 10, 2, base) // usage 0..9
	ctx := context.Background()
	st, err := v.e.Prepare(ctx, "SELECT count(*) FROM cpu WHERE usage > $1", "db")
	if err != nil {
		t.Fatal(err)
	}
	one := func(typ arrow.DataType, val any) arrow.RecordBatch {
		var a arrow.Array
		switch x := val.(type) {
		case int64:
			b := array.NewInt64Builder(v.mem)
			b.Append(x)
			a = b.NewArray()
			b.Release()
		case float64:
			b := array.NewFloat64Builder(v.mem)
			b.Append(x)
			a = b.NewArray()
			b.Release()
		}
		defer a.Release()
		return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "1", Type: typ}}, nil), []arrow.Array{a}, 1)
	}
	before := v.e.Stats().PlansReused
	for _, c := range []struct {
		typ  arrow.DataType
		val  any
		want string
	}{
		{arrow.PrimitiveTypes.Int64, int64(5), "4"},
		{arrow.PrimitiveTypes.Int64, int64(7), "2"},
		{arrow.PrimitiveTypes.Float64, 2.5, "7"},
		{arrow.PrimitiveTypes.Int64, int64(0), "9"},
	} {
		params := one(c.typ, c.val)
		rows, _, err := collect(v.e.Run(ctx, st, params))
		params.Release()
		if err != nil {
			t.Fatal(err)
		}
		equalRows(t, fmt.Sprintf("usage > %v", c.val), rows, []string{c.want})
	}
	if got := v.e.Stats().PlansReused - before; got != 4 {
		t.Errorf("%d of 4 runs on the plan Prepare kept, want 4", got)
	}
}
