//go:build duckdb_arrow

package integration

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// sandboxStatements are statements a client must not run, against the
// data dir of a running server: one of each DuckDB statement type and the
// file, setting and catalog tricks found to matter. query/admit_test.go
// has the longer list; this one runs through the real binary.
func sandboxStatements(dir string) []string {
	objects := filepath.Join(dir, "objects")
	var parquet string
	_ = filepath.WalkDir(filepath.Join(objects, "dbs", "b"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") && parquet == "" {
			parquet = p
		}
		return nil
	})
	return []string{
		fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s' (FORMAT parquet)", parquet),
		fmt.Sprintf("COPY (SELECT 'junk') TO '%s' (FORMAT csv)", filepath.Join(objects, "segments", "00000000000000000099.json")),
		fmt.Sprintf("EXPORT DATABASE '%s'", filepath.Join(dir, "export")),
		fmt.Sprintf("IMPORT DATABASE '%s'", objects),
		"SET threads = 1000",
		"SET memory_limit = '100TB'",
		"SET max_expression_depth TO 10000000",
		"SET enable_external_access = true",
		"RESET ALL",
		"PRAGMA threads = 1000",
		"CALL checkpoint()",
		"USE b",
		"CREATE TABLE x (a INTEGER)",
		fmt.Sprintf("CREATE TABLE a.x AS SELECT * FROM read_parquet('%s')", parquet),
		"CREATE OR REPLACE TABLE a.t (time TIMESTAMP)",
		"CREATE TEMP TABLE x (time TIMESTAMP)",
		"DROP SCHEMA system CASCADE",
		"DROP TABLE system.tables",
		"CREATE TABLE a.x (time TIMESTAMP, v VARCHAR DEFAULT (read_text('/etc/passwd')))",
		"CREATE TABLE a.x (time TIMESTAMP, v VARCHAR CHECK (length(v) < getenv('HOME')))",
		"CREATE OR REPLACE VIEW apron.a.t AS SELECT * FROM range(5)",
		"DROP VIEW apron.a.t",
		"ALTER VIEW apron.a.t RENAME TO y",
		"CREATE MACRO apron.main.now() AS 1",
		"ATTACH '/tmp/apron-sandbox.db' AS x",
		"DETACH apron",
		"INSTALL httpfs",
		"LOAD httpfs",
		"CHECKPOINT",
		"VACUUM",
		"BEGIN TRANSACTION",
		"PREPARE p AS SELECT 1",
		"DELETE FROM a.t USING b.t WHERE true",
		"DELETE FROM a.t WHERE true RETURNING *",
		"DELETE FROM system.tables",
		fmt.Sprintf("DELETE FROM a.t WHERE value IN (SELECT 1 FROM read_parquet('%s'))", parquet),
		"UPDATE a.t SET value = 0",
		fmt.Sprintf("SELECT * FROM read_parquet('%s')", parquet),
		fmt.Sprintf("SELECT * FROM glob('%s/**')", objects),
		"SELECT * FROM read_text('/etc/passwd')",
		"SELECT * FROM query('SELECT * FROM b.t')",
		"SELECT * FROM query_table('b.t')",
		"SELECT * FROM apron_scan('b', 't', 4)",
		"SELECT * FROM duckdb_settings()",
		"SELECT * FROM information_schema.tables",
		fmt.Sprintf("INSERT INTO a.t SELECT * FROM read_parquet('%s')", parquet),
		"PIVOT a.t ON tag USING sum(value)",
		"SELECT " + strings.Repeat("abs(", 900) + "1" + strings.Repeat(")", 900),
	}
}

var sandboxWrappings = []func(string) string{
	func(s string) string { return s },
	func(s string) string { return "EXPLAIN ANALYZE " + s },
	func(s string) string { return "WITH x AS (SELECT 1) " + s },
	func(s string) string { return "/* SELECT */ " + strings.ToLower(s) },
	func(s string) string { return "SELECT 1; " + s },
	func(s string) string { return "SELECT * FROM query('" + strings.ReplaceAll(s, "'", "''") + "')" },
	func(s string) string { return "SELECT * FROM (" + s + ")" },
}

// dirState hashes every file under dir.
func dirState(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// settingsState reads, through SQL, what a client sees of DuckDB's
// settings.
const settingsSQL = `SELECT current_setting('threads') AS threads, current_setting('memory_limit') AS memory_limit,
	current_setting('max_expression_depth') AS depth, current_setting('enable_external_access') AS external,
	current_setting('lock_configuration') AS locked, current_setting('temp_directory') AS temp,
	current_setting('allowed_directories') AS dirs`

// TestSQLSandbox sends every sandbox statement, in several wrappings, as
// a query, as an update and as a prepared statement through ADBC to the
// real server: each is refused with INVALID_ARGUMENT or NOT_FOUND, and
// afterwards every file of the data dir is as it was, DuckDB's settings
// are, both databases' rows are, and the server is healthy.
func TestSQLSandbox(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	na := writeBatches(t, srv.Addr, "a", "t", 0, 2, 0)
	nb := writeBatches(t, srv.Addr, "b", "t", 2, 1, 0)
	waitPersisted(t, srv, "a", "t", na)
	waitPersisted(t, srv, "b", "t", nb)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, srv.Addr, mem)
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)

	totals := func() string {
		return fmt.Sprint(mustQuery(t, cn, "SELECT count(*) AS n, sum(value) AS s FROM a.t"), mustQuery(t, cn, "SELECT count(*) AS n, sum(value) AS s FROM b.t"))
	}
	settings := fmt.Sprint(mustQuery(t, cn, settingsSQL))
	if !strings.Contains(settings, "external:false") || !strings.Contains(settings, "locked:true") {
		t.Errorf("DuckDB's sandbox settings: %s", settings)
	}
	beforeRows, beforeFiles := totals(), dirState(t, dir)

	refusals := 0
	for _, stmt := range sandboxStatements(dir) {
		for _, wrap := range sandboxWrappings {
			sql := wrap(stmt)
			check := func(how string, err error) {
				t.Helper()
				var ae adbc.Error
				switch {
				case err == nil:
					t.Errorf("%s %q: not refused", how, sql)
				case !errors.As(err, &ae):
					t.Errorf("%s %q: %v, not an ADBC error", how, sql, err)
				case ae.Code != adbc.StatusInvalidArgument && ae.Code != adbc.StatusNotFound:
					t.Errorf("%s %q: ADBC status %v (%s), want INVALID_ARGUMENT or NOT_FOUND", how, sql, ae.Code, ae.Msg)
				default:
					refusals++
				}
			}
			rdr, err := adbcQuery(ctx, cn, sql)
			if err == nil {
				collect(t, rdr)
			}
			check("query", err)
			_, err = adbcUpdate(ctx, cn, sql)
			check("update", err)
			_, _, err = adbcPrepared(ctx, t, cn, sql, nil)
			check("prepared", err)
			// A query ticket: the statement in one DoGet, no GetFlightInfo;
			// a gRPC status, not an ADBC error.
			_, err = ticketRows(ctx, t, fc, mem, ticketJSON("a", sql))
			if code, msg := grpcCode(err); code != codes.InvalidArgument && code != codes.NotFound {
				t.Errorf("ticket %q: %v (%s), want INVALID_ARGUMENT or NOT_FOUND", sql, code, msg)
			} else {
				refusals++
			}
		}
	}
	if got := fmt.Sprint(mustQuery(t, cn, settingsSQL)); got != settings {
		t.Errorf("settings changed: %s, were %s", got, settings)
	}
	if got := totals(); got != beforeRows {
		t.Errorf("rows changed: %s, were %s", got, beforeRows)
	}
	after := dirState(t, dir)
	for p, h := range beforeFiles {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := beforeFiles[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
	checkHealth(t, srv.Addr)
	t.Logf("%d refusals", refusals)
}

// TestSQLAdmitted runs the query forms a client may send through ADBC.
func TestSQLAdmitted(t *testing.T) {
	srv := startServer(t, t.TempDir())
	writeBatches(t, srv.Addr, "a", "t", 0, 1, 0)
	cn := adbcConn(t, srv.Addr, nil)
	for _, sql := range []string{
		"SELECT count(*) FROM a.t",
		"FROM a.t LIMIT 1",
		"TABLE a.t",
		"VALUES (1, 'x')",
		"WITH c AS (SELECT * FROM a.t) SELECT count(*) FROM c",
		"DESCRIBE a.t",
		"SUMMARIZE a.t",
		"SHOW ALL TABLES",
		"EXPLAIN SELECT count(*) FROM a.t",
		"EXPLAIN ANALYZE SELECT count(*) FROM a.t",
		"SELECT * FROM (PIVOT a.t ON tag IN ('tag0', 'tag1') USING sum(value))",
		"SELECT * FROM range(3)",
		"SELECT count(*) FROM system.tables",
	} {
		rdr, err := adbcQuery(testCtx(t), cn, sql)
		if err != nil {
			t.Errorf("%s: %v", sql, err)
			continue
		}
		collect(t, rdr)
	}
}
