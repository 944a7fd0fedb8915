//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/wal"
)

func (v *env) exec(sql string) error {
	v.t.Helper()
	st, err := v.e.Prepare(context.Background(), sql, "")
	if err != nil {
		return err
	}
	_, err = v.e.Exec(context.Background(), st, nil)
	return err
}

// waitReady waits until db.table's cache is filled (by the engine's
// filler goroutine).
func (v *env) waitReady(db, table string) {
	v.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, ok := v.wb.LastValueCache(db, table); ok && c.Ready() {
			return
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("the last-value cache of %s.%s is not ready after 30s", db, table)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lvWriter writes random rows of db.cpu (host always set, region
// sometimes null, usage sometimes null; extra from schema step 1 on),
// every time distinct so that "latest" has one answer.
type lvWriter struct {
	v     *env
	rng   *rand.Rand
	seen  map[int64]bool
	extra bool
}

func (w *lvWriter) batch(n int) {
	times, host, region, usage, extra := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		for {
			ts := base + w.rng.Int64N(3600e9)
			if !w.seen[ts] {
				w.seen[ts] = true
				times[i] = ts
				break
			}
		}
		host[i] = fmt.Sprintf("h%d", w.rng.IntN(25))
		if r := w.rng.IntN(4); r > 0 {
			region[i] = fmt.Sprintf("r%d", r)
		}
		if w.rng.IntN(10) > 0 {
			usage[i] = w.rng.Float64()
		}
		extra[i] = w.rng.Int64N(1000)
	}
	cols := []col{{"time", tsNs, times}, {"host", arrow.BinaryTypes.String, host}, {"region", arrow.BinaryTypes.String, region}, {"usage", arrow.PrimitiveTypes.Float64, usage}}
	if w.extra {
		cols = append(cols, col{"extra", arrow.PrimitiveTypes.Int64, extra})
	}
	w.v.write("db", "cpu", batch(w.v.mem, cols...))
}

// lvAccepted are the queries the cache (keys host, region; COUNT 3)
// answers; %d is a time bound. lvRefused must take the normal path.
var (
	lvAccepted = []string{
		"SELECT host, region, arg_max_null(usage, time), max(time) FROM db.cpu GROUP BY host, region",
		"SELECT host, arg_max_null(usage, time) AS u FROM db.cpu GROUP BY host ORDER BY host",
		"SELECT max(time) FROM db.cpu",
		"SELECT region, max_by(host, time), arg_max(time, time) FROM db.cpu WHERE host IN ('h1', 'h2', 'h3') GROUP BY region",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE time >= make_timestamp(%d) AND region = 'r1' GROUP BY host",
		"SELECT c.host, arg_max(c.host, c.time) FROM db.cpu c WHERE c.host LIKE 'h1%%' AND c.time > make_timestamp(%d) GROUP BY c.host",
		"SELECT host, region FROM db.cpu GROUP BY host, region",
		"SELECT * FROM db.cpu ORDER BY time DESC LIMIT 3",
		"SELECT time, host, usage FROM db.cpu c WHERE c.host = 'h7' ORDER BY c.time DESC LIMIT 2",
		"SELECT * FROM db.cpu WHERE region IS NULL AND time >= make_timestamp(%d) ORDER BY time DESC LIMIT 1",
	}
	lvRefused = []string{
		"SELECT usage, max(time) FROM db.cpu GROUP BY usage",
		"SELECT host, min(time) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE time < make_timestamp(%d) GROUP BY host",
		"SELECT * FROM db.cpu ORDER BY time DESC LIMIT 4",
		"SELECT * FROM db.cpu ORDER BY time ASC LIMIT 1",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu WHERE usage > 0.5 GROUP BY host",
		"SELECT host, count(*) FROM db.cpu GROUP BY host",
		"SELECT host, arg_max_null(usage, time) FROM db.cpu GROUP BY host HAVING count(*) > 0",
		"SELECT host, arg_min(usage, time) FROM db.cpu GROUP BY host",
		"SELECT DISTINCT host FROM db.cpu",
		"SELECT * FROM db.cpu WHERE host = 'h1'",
		// A window in a REPLACE reads every row (a bypass, found and fixed).
		"SELECT * REPLACE (count(*) OVER () AS usage) FROM db.cpu ORDER BY time DESC LIMIT 1",
	}
)

// lvOracle is q run so that no cache can answer it (the same query as a
// subquery): DuckDB over every row.
func lvOracle(q string) string { return "SELECT * FROM (" + q + ")" }

func (v *env) checkLastValue(t *testing.T, what string, mid int64, wantUse bool) {
	t.Helper()
	for i, q := range append(append([]string(nil), lvAccepted...), lvRefused...) {
		if strings.Contains(q, "%d") {
			q = fmt.Sprintf(q, mid/1000)
		}
		accepted := i < len(lvAccepted)
		before := v.e.Stats().LastValueUses
		want := sorted(v.query(lvOracle(q), ""))
		if v.e.Stats().LastValueUses != before {
			t.Fatalf("%s: the oracle of %s was answered from the cache: the comparison would prove nothing", what, q)
		}
		metaBefore := v.e.Stats().MetaAnswers
		got := sorted(v.query(q, ""))
		used := v.e.Stats().LastValueUses - before
		if v.e.Stats().MetaAnswers != metaBefore {
			used++ // answered from metadata (metadirect.go), better still
		}
		equalRows(t, what+": "+q, got, want)
		if !accepted && used != 0 {
			t.Errorf("%s: %s was answered from the cache", what, q)
		}
		// arg_max skips NULLs: the cache answers it only while no cached
		// row has a NULL there, which the data does not promise.
		if accepted && wantUse && used == 0 && !strings.Contains(q, "arg_max(c.host") && !strings.Contains(q, "max_by") {
			t.Errorf("%s: %s took the normal path", what, q)
		}
	}
	want := sorted(v.query("SELECT * FROM db.cpu QUALIFY row_number() OVER (PARTITION BY host, region ORDER BY time DESC) <= 3", ""))
	if wantUse {
		before := v.e.Stats().DirectScans
		equalRows(t, what+": last_value()", sorted(v.query("SELECT * FROM last_value('db.cpu')", "")), want)
		// Streamed from the cache (direct.go), as DuckDB would answer it.
		q := "SELECT usage, l.host, time AS t FROM last_value('db.cpu') l"
		got, gotSchema, err := collect(v.e.Query(context.Background(), q, ""))
		if err != nil {
			t.Fatal(err)
		}
		if v.e.Stats().DirectScans != before+2 {
			t.Errorf("%s: last_value() read not as a direct scan", what)
		}
		ref, refSchema, err := collect(v.e.Query(context.Background(), q+" WHERE true", ""))
		if err != nil {
			t.Fatal(err)
		}
		equalRows(t, what+": "+q, sorted(got), sorted(ref))
		if !gotSchema.Equal(refSchema) {
			t.Errorf("%s: %s: schema %s, DuckDB's %s", what, q, gotSchema, refSchema)
		}
	}
}

// TestLastValueOracle: random writes in batches with out-of-order times,
// a column added, a DELETE, a DROP and a restart (WAL replay); after each
// the queries the cache answers give exactly what DuckDB gives over every
// row, and the shapes it must not answer take the normal path.
func TestLastValueOracle(t *testing.T) {
	dir := t.TempDir()
	open := func() *env {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		bcfg := buffer.DefaultConfig()
		bcfg.DataDir = dir
		bcfg.Allocator = mem
		bcfg.ChunkAllocator = chunkAllocator(t)
		bcfg.MemLimit = 8 << 30
		bcfg.WALSync = wal.SyncNone
		bcfg.ChunkRows = 500
		wb, err := buffer.Open(bcfg)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(wb, Config{})
		if err != nil {
			wb.Close()
			t.Fatal(err)
		}
		v := &env{t: t, mem: mem, wb: wb, e: e}
		t.Cleanup(v.close)
		return v
	}
	v := open()
	w := &lvWriter{v: v, rng: rand.New(rand.NewPCG(7, 8)), seen: map[int64]bool{}}
	mid := base + 1800e9
	for range 4 {
		w.batch(700)
	}
	if err := v.exec("CREATE LAST VALUE CACHE ON db.cpu COUNT 3"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.batch(300) // while it fills
	}
	v.waitReady("db", "cpu")
	v.checkLastValue(t, "filled", mid, true)
	w.extra = true
	for range 3 {
		w.batch(400)
	}
	v.checkLastValue(t, "new column", mid, true)

	if err := v.exec("DELETE FROM db.cpu WHERE host IN ('h1', 'h7') AND time > " + fmt.Sprintf("make_timestamp(%d)", mid/1000)); err != nil {
		t.Fatal(err)
	}
	v.checkLastValue(t, "right after the delete", mid, false)
	v.waitReady("db", "cpu")
	v.checkLastValue(t, "after the delete", mid, true)
	w.batch(500)

	// Restart: the definition is in the catalog, the rows come back from
	// the WAL, the cache is filled again.
	v.close()
	v = open()
	w.v = v
	v.waitReady("db", "cpu")
	v.checkLastValue(t, "after restart", mid, true)
	w.batch(300)
	v.checkLastValue(t, "after restart and a write", mid, true)

	if err := v.exec("DROP TABLE db.cpu"); err != nil {
		t.Fatal(err)
	}
	w.extra = false
	w.batch(100)
	if _, ok := v.wb.LastValueCache("db", "cpu"); ok {
		t.Fatal("the table made again has the dropped table's cache")
	}
	if _, err := v.e.Query(context.Background(), "SELECT * FROM last_value('db.cpu')", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("last_value of a table without a cache: %v", err)
	}
}

// TestLastValueDDL: the forms, and their refusals with nothing changed.
func TestLastValueDDL(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 10, 2, base)
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, []any{base}}, col{"dc", arrow.BinaryTypes.String, []any{"x"}}))
	for _, tc := range []struct {
		sql  string
		kind error
	}{
		{"CREATE LAST VALUE CACHE ON db.nope", catalog.ErrTableNotFound},
		{"CREATE LAST VALUE CACHE ON nodb.cpu", catalog.ErrTableNotFound},
		{"CREATE LAST VALUE CACHE ON db.cpu (usage)", catalog.ErrInvalidSchema},
		{"CREATE LAST VALUE CACHE ON db.cpu (missing)", catalog.ErrInvalidSchema},
		{"CREATE LAST VALUE CACHE ON db.cpu (host, host)", catalog.ErrInvalidSchema},
		{"CREATE LAST VALUE CACHE ON db.cpu COUNT 0", ErrSyntax},
		{"CREATE LAST VALUE CACHE ON db.cpu COUNT 1001", ErrSyntax},
		{"CREATE LAST VALUE CACHE ON db.cpu COUNT", ErrSyntax},
		{"CREATE LAST VALUE CACHE ON db.cpu (host", ErrSyntax},
		{"CREATE LAST VALUE CACHE ON db.cpu extra", ErrSyntax},
		{"CREATE LAST VALUE CACHE ON system.tables", ErrSyntax},
		{"CREATE LAST VALUE ON db.cpu", ErrSyntax},
		{"CREATE LAST VALUE CACHE db.cpu", ErrSyntax},
		{"DROP LAST VALUE CACHE ON db.cpu", catalog.ErrCacheNotFound},
		{"DROP LAST VALUE CACHE ON db.nope", catalog.ErrTableNotFound},
	} {
		ver := v.wb.Catalog().Version()
		err := v.exec(tc.sql)
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.sql, err, tc.kind)
		}
		if v.wb.Catalog().Version() != ver || len(v.wb.LastValueCaches()) != 0 {
			t.Errorf("%s: refused, but the catalog changed", tc.sql)
		}
	}
	if err := v.exec("CREATE LAST VALUE CACHE IF NOT EXISTS latest ON db.cpu (host) COUNT 2"); err != nil {
		t.Fatal(err)
	}
	if err := v.exec("CREATE LAST VALUE CACHE ON db.cpu"); !errors.Is(err, catalog.ErrCacheExists) {
		t.Errorf("a second cache: %v", err)
	}
	if err := v.exec("CREATE LAST VALUE CACHE IF NOT EXISTS ON db.cpu"); err != nil {
		t.Errorf("IF NOT EXISTS: %v", err)
	}
	if err := v.exec("DROP LAST VALUE CACHE other ON db.cpu"); !errors.Is(err, ErrNotFound) {
		t.Errorf("drop by another name: %v", err)
	}
	v.waitReady("db", "cpu")
	equalRows(t, "system table", v.query("SELECT database_name, table_name, cache_name, key_columns, count, state, rows FROM system.last_value_caches", ""),
		[]string{"db|cpu|latest|host|2|ready|5"})
	equalRows(t, "explicit read", sorted(v.query("SELECT host, usage FROM last_value('db.cpu')", "")),
		[]string{"NULL|NULL", "h0|6", "h0|8", "h1|7", "h1|9"})
	for _, q := range []string{
		"SELECT * FROM last_value('cpu')",
		"SELECT * FROM last_value('db.nope')",
		"SELECT * FROM last_value('db' || '.cpu')",
		"SELECT * FROM last_value(NULL)",
		"SELECT * FROM main.last_value('db.cpu')",
		"SELECT * FROM last_value('db.cpu', 'db.cpu')",
		"SELECT * FROM last_value((SELECT 'db.cpu'))",
		"SELECT * FROM last_value('system.tables')",
		"EXPLAIN SELECT * FROM last_value('db.nope')",
		"WITH x AS (SELECT 'db.cpu' AS n) SELECT * FROM x, last_value(x.n)",
	} {
		if _, err := v.e.Query(context.Background(), q, ""); err == nil {
			t.Errorf("%s: admitted", q)
		}
	}
	if err := v.exec("DROP LAST VALUE CACHE IF EXISTS latest ON db.cpu"); err != nil {
		t.Fatal(err)
	}
	if err := v.exec("DROP LAST VALUE CACHE IF EXISTS ON db.cpu"); err != nil {
		t.Fatal(err)
	}
	equalRows(t, "system table after drop", v.query("SELECT count(*) FROM system.last_value_caches", ""), []string{"0"})
}

// TestLastValueProjection: a query grouped by exactly the keys of a cache
// of one row per key, selecting keys, max(time) and arg_max(col, time),
// is answered with the cache's rows streamed as they are (direct.go),
// with DuckDB's schema and rows; other shapes, and arg_max over a NULL
// latest value, are not.
func TestLastValueProjection(t *testing.T) {
	v := newEnv(t, Config{})
	write := func(n, hosts int, start int64) {
		times, host, region, usage := make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			times[i] = start + int64(i)*1e9
			host[i] = fmt.Sprintf("h%d", i%hosts)
			region[i] = fmt.Sprintf("r%d", i%3)
			usage[i] = float64(i)
		}
		v.write("db", "cpu", batch(v.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host},
			col{"region", arrow.BinaryTypes.String, region}, col{"usage", arrow.PrimitiveTypes.Float64, usage}))
	}
	write(500, 7, base)
	if err := v.exec("CREATE LAST VALUE CACHE ON db.cpu (host)"); err != nil {
		t.Fatal(err)
	}
	v.waitReady("db", "cpu")
	check := func(what, q string, direct bool) {
		t.Helper()
		want, wantSchema, err := collect(v.e.Query(context.Background(), lvOracle(q), ""))
		if err != nil {
			t.Fatal(err)
		}
		before := v.e.Stats()
		got, gotSchema, err := collect(v.e.Query(context.Background(), q, ""))
		if err != nil {
			t.Fatal(err)
		}
		after := v.e.Stats()
		equalRows(t, what+": "+q, sorted(got), sorted(want))
		if g, w := fieldList(gotSchema), fieldList(wantSchema); g != w {
			t.Errorf("%s: %s: columns %s, DuckDB's %s", what, q, g, w)
		}
		if isDirect := after.DirectScans > before.DirectScans; isDirect != direct {
			t.Errorf("%s: %s: streamed from the cache %v, want %v", what, q, isDirect, direct)
		}
		if direct && after.LastValueUses == before.LastValueUses {
			t.Errorf("%s: %s: no use of the cache counted", what, q)
		}
	}
	for _, what := range []string{"filled", "after a write"} {
		check(what, "SELECT host, max(time) AS time, arg_max(region, time) AS region, arg_max(usage, time) AS usage FROM db.cpu GROUP BY host", true)
		check(what, "SELECT arg_max_null(usage, time), c.host, arg_max(time, time) FROM db.cpu c GROUP BY c.host", true)
		check(what, "SELECT HOST, max_by(usage, time) FROM db.cpu GROUP BY host, Host", true)
		for _, q := range []string{
			"SELECT host, max(time) FROM db.cpu GROUP BY host ORDER BY host",
			"SELECT host, max(time) FROM db.cpu WHERE host = 'h1' GROUP BY host",
			"SELECT host, 1, max(time) FROM db.cpu GROUP BY host",
			"SELECT host, max(time) + INTERVAL 1 SECOND FROM db.cpu GROUP BY host",
			"SELECT max(time), arg_max(usage, time) FROM db.cpu",
		} {
			check(what, q, false)
		}
		before := v.e.Stats().DirectScans
		if rows := v.query("EXPLAIN SELECT host, max(time) FROM db.cpu GROUP BY host", ""); len(rows) == 0 || v.e.Stats().DirectScans != before {
			t.Errorf("EXPLAIN: %d rows, streamed from the cache %v", len(rows), v.e.Stats().DirectScans != before)
		}
		write(30, 9, base+1000e9) // two new hosts
	}
	// The latest usage of h3 becomes NULL: arg_max skips it, so only
	// arg_max_null is the cache's row.
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, []any{base + 2000e9}}, col{"host", arrow.BinaryTypes.String, []any{"h3"}},
		col{"usage", arrow.PrimitiveTypes.Float64, []any{nil}}))
	check("NULL latest", "SELECT host, arg_max(usage, time) FROM db.cpu GROUP BY host", false)
	check("NULL latest", "SELECT host, arg_max_null(usage, time) FROM db.cpu GROUP BY host", true)
	// The cache made again as create says, and filled.
	remake := func(create string) {
		t.Helper()
		for _, ddl := range []string{"DROP LAST VALUE CACHE ON db.cpu", create} {
			if err := v.exec(ddl); err != nil {
				t.Fatalf("%s: %v", ddl, err)
			}
		}
		v.waitReady("db", "cpu")
	}
	// A cache of two rows per key: its rows are not the answer.
	remake("CREATE LAST VALUE CACHE ON db.cpu (host) COUNT 2")
	check("COUNT 2", "SELECT host, max(time) FROM db.cpu GROUP BY host", false)
	// A cache of the whole table as one series: an aggregate without
	// GROUP BY is one row even over an empty table, not the cache's rows.
	remake("CREATE LAST VALUE CACHE ON db.cpu ()")
	check("no keys", "SELECT max(time), arg_max_null(usage, time) FROM db.cpu", false)
}

// fieldList is a schema's column names and types, without metadata.
func fieldList(s *arrow.Schema) string {
	var b strings.Builder
	for _, f := range s.Fields() {
		fmt.Fprintf(&b, "%s:%s,", f.Name, f.Type)
	}
	return b.String()
}
