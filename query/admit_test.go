//go:build duckdb_arrow

package query

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
)

// sandboxEnv is a storeEnv laid out as the server's data dir (the local
// store in <dir>/objects, the cache in <dir>/cache), with two databases,
// a and b, each with a table cpu of persisted and buffered rows.
type sandboxEnv struct {
	*storeEnv
	parquet map[string]string // a persisted file of each database, by database
}

func newSandboxEnv(t *testing.T) *sandboxEnv {
	t.Helper()
	dir := t.TempDir()
	store, err := objstore.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	s := &storeEnv{store: store, clock: &clock{}, dataDir: dir, qcfg: Config{CacheDir: filepath.Join(dir, "cache")}}
	s.clock.ns.Store(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s.open(t)
	write := func(db string, start int64, n int) {
		times, host, usage := make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			times[i] = start + int64(i)*1e6
			host[i] = fmt.Sprintf("h%d", i%3)
			usage[i] = float64(i)
		}
		s.write(db, "cpu", batch(s.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage}))
	}
	for i := range 2 {
		write("a", base+int64(i)*int64(time.Minute), 100)
		write("b", base+int64(i)*int64(time.Minute), 50)
		s.roll()
	}
	write("a", base+int64(2)*int64(time.Minute), 10) // rolls the second segment; stays buffered
	write("b", base+int64(2)*int64(time.Minute), 5)
	s.waitReleased(t, 2)
	se := &sandboxEnv{storeEnv: s, parquet: map[string]string{}}
	v := s.wb.View()
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			se.parquet[f.Database] = filepath.Join(dir, "objects", filepath.FromSlash(f.Path))
		}
	}
	v.Release()
	if len(se.parquet) != 2 {
		t.Fatalf("persisted files of %d databases, want 2", len(se.parquet))
	}
	return se
}

// state is what no statement may change: every file under the data dir,
// DuckDB's settings, views and macros, the temp catalog of every pooled
// connection, and the rows of every table.
func (s *sandboxEnv) state(t *testing.T) string {
	t.Helper()
	s.query("SELECT 1", "") // the views are synced before a query
	var b strings.Builder
	err := filepath.WalkDir(s.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dataDir, p)
		if d.IsDir() {
			fmt.Fprintf(&b, "dir %s\n", rel)
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "file %s %x\n", rel, sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT name, value FROM duckdb_settings() WHERE name NOT IN ('search_path', 'schema') ORDER BY name",
		"SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY ALL",
		"SELECT database_name, schema_name, function_name, function_type, macro_definition FROM duckdb_functions() WHERE NOT internal ORDER BY ALL",
		"SELECT database_name, schema_name FROM duckdb_schemas() ORDER BY ALL",
		"SELECT database_name, path, readonly FROM duckdb_databases() ORDER BY ALL",
	} {
		rows, err := queryStrings(s.e.conv, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		fmt.Fprintf(&b, "%s\n%s\n", q, strings.Join(flatten(rows), "\n"))
	}
	// Every pooled connection: no temp object, variable or prepared
	// statement.
	s.e.mu.Lock()
	objects := 0
	for _, c := range s.e.mu.idle {
		for _, q := range []string{
			"SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp'",
			"SELECT count(*) FROM duckdb_tables() WHERE database_name = 'temp'",
			"SELECT count(*) FROM duckdb_functions() WHERE database_name = 'temp'",
			"SELECT count(*) FROM duckdb_variables()",
			"SELECT count(*) FROM duckdb_prepared_statements()",
		} {
			rows, err := queryStrings(c.c, q)
			if err != nil {
				s.e.mu.Unlock()
				t.Fatalf("%s: %v", q, err)
			}
			if len(rows) != 1 || rows[0][0] != "0" {
				objects++
				fmt.Fprintf(&b, "conn %s: %v\n", q, rows)
			}
		}
	}
	s.e.mu.Unlock()
	fmt.Fprintf(&b, "connection objects: %d\n", objects)
	for _, db := range []string{"a", "b"} {
		q := "SELECT count(*), sum(usage), min(time), max(time) FROM " + db + ".cpu"
		fmt.Fprintf(&b, "%s: %v\n", q, s.query(q, ""))
	}
	return b.String()
}

func flatten(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, "|")
	}
	return out
}

// hostileStatements are statements of every kind DuckDB parses that a
// client must not run, and the ways found to reach them. Every one is
// refused, and changes nothing. Keep adding: every bypass found becomes a
// case.
func hostileStatements(s *sandboxEnv) []string {
	pa, pb := s.parquet["a"], s.parquet["b"]
	objects := filepath.Join(s.dataDir, "objects")
	segFile := filepath.Join(objects, "segments", "00000000000000000001.json")
	return []string{
		// COPY and EXPORT / IMPORT: files.
		fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s' (FORMAT parquet)", pb),
		fmt.Sprintf("COPY (SELECT 'junk') TO '%s' (FORMAT csv, USE_TMP_FILE false)", segFile),
		"COPY a.cpu TO '/tmp/apron-hostile.csv'",
		"COPY a.cpu FROM '/etc/passwd'",
		fmt.Sprintf("EXPORT DATABASE '%s'", filepath.Join(s.dataDir, "export")),
		fmt.Sprintf("IMPORT DATABASE '%s'", objects),
		// Settings.
		"SET threads = 1000",
		"SET GLOBAL threads = 1000",
		"SET memory_limit = '100TB'",
		"SET max_expression_depth TO 10000000",
		"SET enable_external_access = true",
		"SET lock_configuration = false",
		"SET allowed_directories = ['/']",
		"SET temp_directory = '/tmp'",
		"RESET threads",
		"RESET ALL",
		"SET VARIABLE x = 1",
		"RESET VARIABLE x",
		"PRAGMA threads = 1000",
		"PRAGMA enable_profiling",
		"PRAGMA disable_optimizer",
		"CALL checkpoint()",
		"CALL pragma_version()",
		"USE b",
		// Catalog.
		"CREATE TABLE x (a INTEGER)",
		"CREATE TEMP TABLE x AS SELECT 1",
		"CREATE VIEW apron.a.x AS SELECT 1",
		"CREATE OR REPLACE VIEW apron.a.cpu AS SELECT * FROM range(5)",
		"CREATE OR REPLACE TEMP VIEW cpu AS SELECT * FROM range(5)",
		"CREATE MACRO apron.main.now() AS 1",
		"CREATE OR REPLACE MACRO apron.main.now() AS TIMESTAMP '2000-01-01'",
		"CREATE TEMP MACRO m() AS TABLE SELECT 1",
		"CREATE SCHEMA apron.x",
		"CREATE SEQUENCE s",
		"CREATE TYPE e AS ENUM ('a')",
		"CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
		"CREATE INDEX i ON a.cpu (host)",
		"DROP VIEW apron.a.cpu",
		"DROP VIEW IF EXISTS apron.b.cpu",
		"DROP SCHEMA apron.a CASCADE",
		"DROP MACRO apron.main.now",
		"DROP FUNCTION apron_scan",
		"DROP TABLE a.cpu",
		"ALTER VIEW apron.a.cpu RENAME TO y",
		"ALTER TABLE a.cpu ADD COLUMN z INTEGER",
		"COMMENT ON VIEW apron.a.cpu IS 'x'",
		"ATTACH '/tmp/apron-hostile.db' AS x",
		"ATTACH ':memory:' AS x",
		"DETACH apron",
		"INSTALL httpfs",
		"LOAD httpfs",
		"FORCE INSTALL parquet",
		"UPDATE EXTENSIONS",
		"CHECKPOINT",
		"FORCE CHECKPOINT",
		"VACUUM",
		"ANALYZE",
		"BEGIN TRANSACTION",
		"COMMIT",
		"ROLLBACK",
		"PREPARE p AS SELECT 1",
		"EXECUTE p",
		"DEALLOCATE p",
		"UPDATE a.cpu SET usage = 0",
		"DELETE FROM a.cpu",
		"TRUNCATE a.cpu",
		"MERGE INTO a.cpu USING (SELECT 1 AS x) s ON false WHEN NOT MATCHED THEN INSERT VALUES (now(), 'x', 1)",
		"SUMMARIZE SELECT * FROM read_text('/etc/passwd')",
		// Files and other databases by path, or through functions that
		// run SQL of their own.
		fmt.Sprintf("SELECT * FROM read_parquet('%s')", pb),
		fmt.Sprintf("SELECT count(*) FROM '%s'", pb),
		fmt.Sprintf("SELECT * FROM parquet_metadata('%s')", pa),
		fmt.Sprintf("SELECT * FROM glob('%s/**')", objects),
		"SELECT * FROM read_text('/etc/passwd')",
		"SELECT * FROM read_blob('/etc/passwd')",
		"SELECT * FROM read_csv('/etc/passwd', sep = ':')",
		"SELECT * FROM sniff_csv('/etc/passwd')",
		"SELECT * FROM query('SELECT * FROM b.cpu')",
		"SELECT * FROM query_table('b.cpu')",
		"SELECT * FROM apron_scan('b', 'cpu', 3)",
		"SELECT * FROM system.main.apron_scan('b', 'cpu', 3)",
		"SELECT * FROM duckdb_settings()",
		"SELECT * FROM duckdb_tables()",
		"SELECT * FROM duckdb_views()",
		"SELECT * FROM histogram(a.cpu, usage)",
		"SELECT * FROM test_all_types()",
		"SELECT * FROM information_schema.tables",
		"SELECT * FROM pg_catalog.pg_class",
		"SELECT * FROM memory.main.x",
		"SELECT * FROM system.main.duckdb_tables",
		"SELECT * FROM temp.main.x",
		"SHOW DATABASES",
		"SHOW SCHEMAS",
		"SHOW threads",
		fmt.Sprintf("INSERT INTO a.cpu SELECT * FROM read_parquet('%s')", pb),
		"INSERT INTO a.cpu SELECT * FROM query_table('b.cpu')",
		// A PIVOT without IN creates an ENUM type first: two statements.
		"PIVOT a.cpu ON host USING sum(usage)",
		// Expression depth.
		"SELECT " + strings.Repeat("abs(", 900) + "1" + strings.Repeat(")", 900),
	}
}

// wrappings are the ways each hostile statement is sent once more.
var wrappings = []struct {
	name string
	wrap func(string) string
}{
	{"plain", func(s string) string { return s }},
	{"explain", func(s string) string { return "EXPLAIN " + s }},
	{"explain analyze", func(s string) string { return "EXPLAIN ANALYZE " + s }},
	{"explain format", func(s string) string { return "EXPLAIN (FORMAT json) " + s }},
	{"explain commented", func(s string) string { return "EXPLAIN /* x */ ANALYZE -- y\n " + s }},
	{"cte", func(s string) string { return "WITH x AS (SELECT 1) " + s }},
	{"parens", func(s string) string { return "(" + s + ")" }},
	{"comment", func(s string) string { return "/* SELECT */ " + s }},
	{"line comment", func(s string) string { return "-- SELECT\n" + s }},
	{"nested comment", func(s string) string { return "/* a /* b */ SELECT */ " + s }},
	{"mixed case", mixedCase},
	{"then select", func(s string) string { return s + "; SELECT 1" }},
	{"after select", func(s string) string { return "SELECT 1; " + s }},
	{"trailing semicolon", func(s string) string { return s + ";" }},
	{"query()", func(s string) string { return "SELECT * FROM query('" + strings.ReplaceAll(s, "'", "''") + "')" }},
	{"subquery", func(s string) string { return "SELECT * FROM (" + s + ")" }},
	{"scalar subquery", func(s string) string { return "SELECT (" + s + ")" }},
	{"in list", func(s string) string { return "SELECT 1 WHERE 1 IN (" + s + ")" }},
	{"describe", func(s string) string { return "DESCRIBE " + s }},
}

// mixedCase alternates the case of the letters outside quotes.
func mixedCase(s string) string {
	var b strings.Builder
	inQuote := false
	up := false
	for _, r := range s {
		if r == '\'' {
			inQuote = !inQuote
		}
		if !inQuote && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			if up {
				r = []rune(strings.ToUpper(string(r)))[0]
			} else {
				r = []rune(strings.ToLower(string(r)))[0]
			}
			up = !up
		}
		b.WriteRune(r)
	}
	return b.String()
}

// clientError says whether err is a refusal a client sees as its own
// mistake (INVALID_ARGUMENT, NOT_FOUND), not a failure of the server.
func clientError(err error) bool {
	return errors.Is(err, ErrUnsupportedStatement) || errors.Is(err, ErrSyntax) || errors.Is(err, ErrNotFound)
}

// TestHostileSQL sends every hostile statement, in every wrapping, as a
// query, as a prepared statement, and as an INSERT's source, in no
// current database and in database a: each is refused with a client
// error and nothing changes.
func TestHostileSQL(t *testing.T) {
	s := newSandboxEnv(t)
	before := s.state(t)
	ctx := context.Background()
	refused := 0
	for _, stmt := range hostileStatements(s) {
		for _, w := range wrappings {
			sql := w.wrap(stmt)
			for _, db := range []string{"", "a"} {
				check := func(how string, err error) {
					t.Helper()
					if err == nil {
						t.Errorf("%s %q (db %q): not refused", how, sql, db)
						return
					}
					if !clientError(err) {
						t.Errorf("%s %q (db %q): %v: not a client error", how, sql, db, err)
					}
					refused++
				}
				_, _, err := collect(s.e.Query(ctx, sql, db))
				check("query", err)
				st, err := s.e.Prepare(ctx, sql, db)
				if err == nil {
					if st.Kind == KindInsert {
						_, err = s.e.Exec(ctx, st, nil)
					} else {
						_, _, err = collect(s.e.Run(ctx, st, nil))
					}
				}
				check("prepared", err)
			}
		}
		// Unwrapped, the refusal names what is refused.
		_, err := s.e.Query(ctx, stmt, "a")
		var qe *queryError
		if errors.As(err, &qe) && errors.Is(err, ErrUnsupportedStatement) && !strings.Contains(err.Error(), "not supported") && !strings.Contains(err.Error(), "not available") && !strings.Contains(err.Error(), "statements in one request") {
			t.Errorf("%q: refusal %q does not say what is not supported", stmt, err)
		}
	}
	if after := s.state(t); after != before {
		t.Errorf("state changed:\n%s", diffLines(before, after))
	}
	t.Logf("%d refusals", refused)
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAdmittedQueries runs the query forms Apron admits, and checks the
// databases each statement is said to read.
func TestAdmittedQueries(t *testing.T) {
	s := newSandboxEnv(t)
	ctx := context.Background()
	cases := []struct {
		sql, db string
		dbs     []string
	}{
		{"SELECT count(*) FROM a.cpu", "", []string{"a"}},
		{"SELECT count(*) FROM apron.a.cpu JOIN b.cpu USING (time)", "", []string{"a", "b"}},
		{"FROM cpu", "a", []string{"a"}},
		{"TABLE cpu", "b", []string{"b"}},
		{"VALUES (1), (2)", "", nil},
		{"SELECT 1", "a", nil},
		{"WITH c AS (SELECT * FROM b.cpu) SELECT count(*) FROM c", "a", []string{"b"}},
		{"WITH cpu AS (SELECT 1 AS x) SELECT * FROM cpu", "a", []string{"a"}}, // the CTE shadows a.cpu: counted anyway
		{"SELECT * FROM a.cpu UNION ALL SELECT * FROM b.cpu", "", []string{"a", "b"}},
		{"SELECT (SELECT count(*) FROM b.cpu) FROM a.cpu LIMIT 1", "", []string{"a", "b"}},
		{"DESCRIBE a.cpu", "", []string{"a"}},
		{"DESCRIBE SELECT host FROM cpu", "b", []string{"b"}},
		{"SUMMARIZE a.cpu", "", []string{"a"}},
		{"SHOW TABLES", "a", []string{"a"}},
		{"SHOW ALL TABLES", "", []string{"a", "b"}},
		{"EXPLAIN SELECT * FROM a.cpu", "", []string{"a"}},
		{"EXPLAIN ANALYZE SELECT count(*) FROM b.cpu", "", []string{"b"}},
		{"explain (format json) SELECT 1", "", nil},
		{"/* why */ EXPLAIN -- now\n ANALYZE SELECT 1", "", nil},
		{"SELECT * FROM (PIVOT a.cpu ON host IN ('h0', 'h1') USING sum(usage))", "", []string{"a"}},
		{"FROM (UNPIVOT (SELECT 1 AS x, 2 AS y) ON x, y INTO NAME k VALUE v)", "", nil},
		{"SELECT * FROM range(3) t(i), unnest([1, 2]) u(j)", "", nil},
		{"SELECT * FROM json_each('{\"a\": 1}')", "", nil},
		{"SELECT count(*) FROM system.tables", "", []string{"system"}},
		{"SELECT time FROM a.cpu WHERE time > now() - INTERVAL 1 DAY", "", []string{"a"}},
		{"SELECT current_setting('threads')", "", nil},
		{"SELECT 1;", "", nil},
		{"SELECT " + strings.Repeat("abs(", 200) + "1" + strings.Repeat(")", 200), "", nil},
	}
	for _, c := range cases {
		st, err := s.e.Prepare(ctx, c.sql, c.db)
		if err != nil {
			t.Errorf("%q: %v", c.sql, err)
			continue
		}
		if !slices.Equal(st.Databases, c.dbs) {
			t.Errorf("%q: databases %v, want %v", c.sql, st.Databases, c.dbs)
		}
		if _, _, err := collect(s.e.Query(ctx, c.sql, c.db)); err != nil {
			t.Errorf("%q: %v", c.sql, err)
		}
	}
	st, err := s.e.Prepare(ctx, "INSERT INTO b.cpu SELECT * FROM a.cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Databases, []string{"a", "b"}) {
		t.Errorf("INSERT: databases %v, want [a b]", st.Databases)
	}
}

// TestSandboxWithoutAdmission runs hostile statements on a query's
// connection as if they had got past admission: DuckDB itself refuses
// them (the second line of defense, sandbox.go).
func TestSandboxWithoutAdmission(t *testing.T) {
	s := newSandboxEnv(t)
	before := s.state(t)
	ctx := context.Background()
	pb := s.parquet["b"]
	for _, stmt := range []string{
		fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s' (FORMAT parquet)", pb),
		fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s' (FORMAT csv)", filepath.Join(s.dataDir, "x.csv")),
		fmt.Sprintf("SELECT * FROM read_parquet('%s')", pb),
		fmt.Sprintf("SELECT * FROM glob('%s/**')", s.dataDir),
		fmt.Sprintf("SELECT * FROM glob('%s/*')", filepath.Join(s.dataDir, "cache")),
		"SELECT * FROM read_text('/etc/passwd')",
		"SET threads = 1000",
		"SET GLOBAL memory_limit = '100TB'",
		"SET max_expression_depth TO 10000000",
		"SET enable_external_access = true",
		"SET lock_configuration = false",
		"SET temp_directory = '/tmp'",
		"RESET ALL",
		"DROP VIEW apron.a.cpu",
		"CREATE OR REPLACE VIEW apron.a.cpu AS SELECT * FROM range(5)",
		"CREATE OR REPLACE MACRO apron.main.now() AS 1",
		"DROP MACRO apron.main.now",
		"CREATE TABLE apron.main.x (a INTEGER)",
		"DROP SCHEMA apron.b CASCADE",
		"ALTER VIEW apron.a.cpu RENAME TO y",
		"DROP FUNCTION apron_scan",
		"ATTACH '/tmp/apron-hostile.db' AS x",
		"DETACH apron",
		"INSTALL httpfs",
		"LOAD httpfs",
		fmt.Sprintf("EXPORT DATABASE '%s'", filepath.Join(s.dataDir, "export")),
		// Admitted to read a, not b.
		"SELECT * FROM apron_scan('b', 'cpu', 3)",
		"SELECT * FROM b.cpu",
	} {
		c, err := s.e.acquire(ctx, false, "")
		if err != nil {
			t.Fatal(err)
		}
		a := &admitted{sql: stmt, databases: []string{"a"}}
		if err := c.begin(); err != nil {
			t.Fatal(err)
		}
		s.e.prepareState(c, a)
		err = exec(c.c, stmt)
		s.e.release(c)
		if err == nil {
			t.Errorf("%q: DuckDB ran it", stmt)
		} else {
			t.Logf("%s: %v", stmt, err)
		}
	}
	if after := s.state(t); after != before {
		t.Errorf("state changed:\n%s", diffLines(before, after))
	}
}

func TestSplitExplain(t *testing.T) {
	for sql, want := range map[string][2]string{
		"EXPLAIN SELECT 1":                       {"EXPLAIN ", " SELECT 1"},
		"explain analyze SELECT 1":               {"EXPLAIN ANALYZE ", " SELECT 1"},
		"EXPLAIN ANALYSE SELECT 1":               {"EXPLAIN ANALYZE ", " SELECT 1"},
		"EXPLAIN (FORMAT json) SELECT 1":         {"EXPLAIN (FORMAT JSON) ", " SELECT 1"},
		"EXPLAIN ANALYZE (format html) SELECT 1": {"EXPLAIN ANALYZE (FORMAT HTML) ", " SELECT 1"},
		"/* a /* b */ c */ EXPLAIN SELECT 1":     {"EXPLAIN ", " SELECT 1"},
		"-- x\nEXPLAIN SELECT 1":                 {"EXPLAIN ", " SELECT 1"},
		"EXPLAIN (FORMAT evil) SELECT 1":         {"EXPLAIN ", " (FORMAT evil) SELECT 1"},
	} {
		inner, prefix, ok := splitExplain(sql)
		if !ok || prefix != want[0] || inner != want[1] {
			t.Errorf("splitExplain(%q) = %q, %q, %v; want %q, %q", sql, inner, prefix, ok, want[1], want[0])
		}
	}
	for _, sql := range []string{"SELECT 1", "EXPLAINX SELECT 1", "/* unterminated EXPLAIN SELECT 1", ""} {
		if _, _, ok := splitExplain(sql); ok {
			t.Errorf("splitExplain(%q): taken as EXPLAIN", sql)
		}
	}
}

func TestStatementName(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 1":                           "SELECT",
		"  \n\tdelete from x":                "DELETE",
		"-- comment\nCREATE TABLE x (a int)": "CREATE",
		"/* c */ COPY x TO 'y'":              "COPY",
		"/* unterminated":                    "such",
		"":                                   "such",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestQueryParamsCounted: a query run with parameters and none bound says
// how many it has (the count was read after the statement was freed).
func TestQueryParamsCounted(t *testing.T) {
	s := newSandboxEnv(t)
	_, err := s.e.Query(context.Background(), "SELECT $1::INTEGER + $2::INTEGER, $3::VARCHAR", "")
	if err == nil || !strings.Contains(err.Error(), "has 3 parameters") {
		t.Fatalf("error %v, want one saying the query has 3 parameters", err)
	}
}

// TestInsertParamsTyped: the parameters of INSERT … VALUES (?, …), which
// DuckDB cannot type before they are bound, are announced with the types
// of the columns they go to (the JDBC driver cannot bind a null-typed
// parameter), timestamps in milliseconds (announcedParams).
func TestInsertParamsTyped(t *testing.T) {
	s := newSandboxEnv(t)
	st, err := s.e.Prepare(context.Background(), "INSERT INTO a.cpu (time, host, usage) VALUES (?, ?, ?), (?, 'x', ?)", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range st.Params.Fields() {
		got = append(got, f.Type.String())
	}
	want := "timestamp[ms, tz=UTC] utf8 float64 timestamp[ms, tz=UTC] float64"
	if strings.Join(got, " ") != want {
		t.Fatalf("parameter types %q, want %q", strings.Join(got, " "), want)
	}
}

// TestUntypedParams: a parameter DuckDB cannot type (SELECT ? AS v) is
// announced as a string, and so is a result column whose type comes from
// it (preparing failed with "Unsupported Arrow type UNKNOWN"); a value of
// any type binds.
func TestUntypedParams(t *testing.T) {
	s := newSandboxEnv(t)
	ctx := context.Background()
	for _, q := range []string{"SELECT ? AS v", "SELECT ? IS NULL AS n", "SELECT $1 AS a, $1 AS b"} {
		st, err := s.e.Prepare(ctx, q, "")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if st.Params.NumFields() == 0 || st.Params.Field(0).Type.ID() != arrow.STRING {
			t.Errorf("%s: parameters %s, want a string", q, st.Params)
		}
		params := batch(s.mem, col{"p", arrow.BinaryTypes.String, []any{"x"}})
		rdr, err := s.e.Run(ctx, st, params)
		if err != nil {
			params.Release()
			t.Fatalf("%s: %v", q, err)
		}
		for rdr.Next() {
		}
		if err := rdr.Err(); err != nil {
			t.Errorf("%s: %v", q, err)
		}
		rdr.Release()
		params.Release()
	}
	st, _ := s.e.Prepare(ctx, "SELECT ? AS v", "")
	if st.Schema.Field(0).Type.ID() != arrow.STRING {
		t.Errorf("SELECT ? AS v: result %s, want a string column", st.Schema)
	}
}

// TestMalformedViewParamRefused: a string_view parameter whose view
// points past its data is refused before any value is read.
func TestMalformedViewParamRefused(t *testing.T) {
	s := newSandboxEnv(t)
	ctx := context.Background()
	st, err := s.e.Prepare(ctx, "SELECT count(*) FROM a.cpu WHERE host = $1", "")
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewStringViewBuilder(s.mem)
	b.Append(strings.Repeat("h", 40))
	good := b.NewArray()
	b.Release()
	defer good.Release()
	d := good.Data()
	badData := array.NewData(arrow.BinaryTypes.StringView, 1, []*memory.Buffer{nil, d.Buffers()[1], memory.NewBufferBytes(d.Buffers()[2].Bytes()[:8])}, nil, 0, 0)
	defer badData.Release()
	bad := array.MakeFromData(badData)
	defer bad.Release()
	params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.BinaryTypes.StringView}}, nil), []arrow.Array{bad}, 1)
	defer params.Release()
	if _, err := s.e.Run(ctx, st, params); err == nil || !strings.Contains(err.Error(), "parameter 1") {
		t.Fatalf("malformed string_view parameter: %v, want it refused", err)
	}
}
