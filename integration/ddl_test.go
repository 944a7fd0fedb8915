package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDDL: CREATE and DROP of tables and databases through ADBC
// ExecuteUpdate against the real binary. Every refusal has its code and
// changes nothing; a dropped table's rows (buffered and persisted) never
// come back, not in a table of the same name made at once, not after
// kill -9, not after a clean restart.
func TestDDL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, srv.Addr, mem)

	update := func(sql string) {
		t.Helper()
		if _, err := adbcUpdate(ctx, cn, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	refused := func(sql string, code adbc.Status, parts ...string) {
		t.Helper()
		before := mustQuery(t, cn, "SELECT database_name, table_name FROM system.tables ORDER BY ALL")
		_, err := adbcUpdate(ctx, cn, sql)
		wantADBC(t, err, code, parts...)
		after := mustQuery(t, cn, "SELECT database_name, table_name FROM system.tables ORDER BY ALL")
		if len(before) != len(after) {
			t.Fatalf("%s: refused, but the tables changed: %v → %v", sql, before, after)
		}
	}
	count := func(table string) int64 {
		t.Helper()
		return mustQuery(t, cn, "SELECT count(*) AS n FROM "+table)[0]["n"].(int64)
	}

	update("CREATE SCHEMA ddl")
	refused("CREATE SCHEMA ddl", adbc.StatusAlreadyExists, "already exists")
	update("CREATE SCHEMA IF NOT EXISTS ddl")
	update(`CREATE TABLE ddl.cpu (host VARCHAR(64), time TIMESTAMP NOT NULL, usage DOUBLE PRECISION, n INTEGER NULL, "Quoted Name" BIGINT)`)
	cols := mustQuery(t, cn, "SELECT column_name, data_type FROM system.columns WHERE database_name = 'ddl' AND table_name = 'cpu' ORDER BY ordinal_position")
	var names []any
	for _, c := range cols {
		names = append(names, c["column_name"])
	}
	wantValues(t, "columns of ddl.cpu", names, "time", "host", "usage", "n", "Quoted Name")
	if n := count("ddl.cpu"); n != 0 {
		t.Fatalf("new table has %d rows", n)
	}
	refused("CREATE TABLE ddl.cpu (time TIMESTAMP)", adbc.StatusAlreadyExists, "already exists")
	update("CREATE TABLE IF NOT EXISTS ddl.cpu (time TIMESTAMP)")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, d DECIMAL(10,2))", adbc.StatusInvalidArgument, "DECIMAL", "not one Apron stores")
	refused("CREATE TABLE ddl.bad (host VARCHAR)", adbc.StatusInvalidArgument, "time")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, x INTEGER DEFAULT 1)", adbc.StatusInvalidArgument, "DEFAULT")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, x INTEGER NOT NULL)", adbc.StatusInvalidArgument, "NOT NULL")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, PRIMARY KEY (time))", adbc.StatusInvalidArgument, "PRIMARY")
	refused("CREATE TABLE ddl.bad AS SELECT 1", adbc.StatusInvalidArgument, "INSERT INTO")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, x VARCHAR COLLATE nocase)", adbc.StatusInvalidArgument, "COLLATE")
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, x 'VARCHAR')", adbc.StatusInvalidArgument)
	refused("CREATE TABLE ddl.bad (time TIMESTAMP, x VARCHAR); DROP TABLE ddl.cpu", adbc.StatusInvalidArgument, "unexpected")
	refused("CREATE TABLE system.bad (time TIMESTAMP)", adbc.StatusInvalidArgument, "system")
	refused("CREATE TABLE other.cat.bad (time TIMESTAMP)", adbc.StatusInvalidArgument, "catalog")
	refused("CREATE VIEW ddl.v AS SELECT 1", adbc.StatusInvalidArgument, "CREATE VIEW")
	refused("CREATE TABLE ddl.CPU (time TIMESTAMP)", adbc.StatusInvalidArgument, "only in case")
	refused("DROP TABLE ddl.nope", adbc.StatusNotFound, "nope")
	update("DROP TABLE IF EXISTS ddl.nope")
	refused("DROP VIEW ddl.cpu", adbc.StatusInvalidArgument, "DROP VIEW")
	refused("DROP TABLE system.tables", adbc.StatusInvalidArgument, "system")

	// INSERT into the created table, ingest into it, let part persist.
	update("INSERT INTO ddl.cpu (time, host, usage) VALUES (TIMESTAMP '2026-01-05 12:00:00', 'a', 1.5)")
	written := writeBatches(t, srv.Addr, "ddl", "ids", 0, 4, 300*time.Millisecond)
	waitPersisted(t, srv, "ddl", "ids", written)
	writeBatches(t, srv.Addr, "ddl", "ids", 4, 1, 0) // and some buffered
	if n := count("ddl.ids"); n != written+persistBatchRows {
		t.Fatalf("ddl.ids has %d rows, want %d", n, written+persistBatchRows)
	}

	refused("DROP SCHEMA ddl", adbc.StatusUnknown, "FailedPrecondition", "CASCADE")
	refused("DROP SCHEMA ddl RESTRICT", adbc.StatusUnknown, "FailedPrecondition", "CASCADE")
	update("DROP TABLE ddl.ids")
	_, err := adbcQuery(ctx, cn, "SELECT count(*) FROM ddl.ids")
	wantADBC(t, err, adbc.StatusNotFound, "ids")
	if got := mustQuery(t, cn, "SELECT count(*) AS n FROM system.parquet_files WHERE database_name = 'ddl' AND table_name = 'ids'")[0]["n"].(int64); got != 0 {
		t.Fatalf("system.parquet_files lists %d files of the dropped table", got)
	}
	// The name is free at once, and the new table shows no old row.
	writeBatches(t, srv.Addr, "ddl", "ids", 100, 1, 0)
	if n := count("ddl.ids"); n != persistBatchRows {
		t.Fatalf("re-created ddl.ids has %d rows, want %d", n, persistBatchRows)
	}
	if lo := mustQuery(t, cn, "SELECT min(id) AS lo FROM ddl.ids")[0]["lo"].(int64); lo != 100*persistBatchRows {
		t.Fatalf("re-created ddl.ids shows id %d of the dropped table", lo)
	}
	cn.Close()

	check := func(srv *server, when string) {
		t.Helper()
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		cn := adbcConn(t, srv.Addr, mem)
		defer cn.Close()
		if n := mustQuery(t, cn, "SELECT count(*) AS n FROM ddl.ids")[0]["n"].(int64); n != persistBatchRows {
			t.Fatalf("%s: ddl.ids has %d rows, want %d", when, n, persistBatchRows)
		}
		if n := mustQuery(t, cn, "SELECT count(*) AS n FROM ddl.cpu")[0]["n"].(int64); n != 1 {
			t.Fatalf("%s: ddl.cpu has %d rows, want 1", when, n)
		}
	}
	srv.Kill(t)
	srv = startServer(t, dir, "--segment-duration", "1s")
	check(srv, "after kill -9")
	srv = srv.Restart(t) // SIGTERM, then start again
	check(srv, "after a clean restart")

	cn = adbcConn(t, srv.Addr, mem)
	defer cn.Close()
	update("DROP SCHEMA ddl CASCADE")
	if got := mustQuery(t, cn, "SELECT count(*) AS n FROM system.tables WHERE database_name = 'ddl'")[0]["n"].(int64); got != 0 {
		t.Fatalf("system.tables lists %d tables of the dropped database", got)
	}
	_, err = adbcQuery(ctx, cn, "SELECT count(*) FROM ddl.cpu")
	wantADBC(t, err, adbc.StatusNotFound)
	update("DROP SCHEMA IF EXISTS ddl")
	update("CREATE TABLE ddl.cpu (time TIMESTAMP_NS, host VARCHAR)")
	if n := count("ddl.cpu"); n != 0 {
		t.Fatalf("ddl.cpu made again after DROP SCHEMA has %d rows", n)
	}
}

// TestCLIDDLAndRetention: apron query runs DDL (answering OK), apron
// database update sets a retention, apron show databases shows it.
func TestCLIDDLAndRetention(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	host := []string{"--host", s.Addr}
	r := mustApron(t, "", append([]string{"query", "CREATE TABLE clidb.cpu (time TIMESTAMP, host VARCHAR)"}, host...)...)
	if !strings.HasPrefix(r.stdout, "OK in ") {
		t.Fatalf("CREATE TABLE answered %q", r.stdout)
	}
	r = mustApron(t, "", append([]string{"database", "update", "clidb", "--retention", "30d"}, host...)...)
	if r.stdout != "database clidb: retention 30d (in force: 30d)\n" {
		t.Fatalf("database update answered %q", r.stdout)
	}
	r = mustApron(t, "", append([]string{"show", "databases", "--format", "csv"}, host...)...)
	if !strings.Contains(r.stdout, "clidb,") || !strings.Contains(r.stdout, ",30d,30d") {
		t.Fatalf("show databases:\n%s", r.stdout)
	}
	if r := runApron(t, "", append([]string{"database", "update", "clidb", "--retention", "3s"}, host...)...); r.code != 1 || !strings.Contains(r.stderr, "INVALID_ARGUMENT") {
		t.Fatalf("a bad retention: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runApron(t, "", append([]string{"database", "update", "clidb"}, host...)...); r.code != 2 {
		t.Fatalf("no setting: exit %d, want 2 (usage)", r.code)
	}
	mustApron(t, "", append([]string{"query", "INSERT INTO clidb.cpu VALUES (now(), 'a'), (now(), 'b')"}, host...)...)
	r = mustApron(t, "", append([]string{"query", "DELETE FROM clidb.cpu WHERE host = 'a'"}, host...)...)
	if !strings.HasPrefix(r.stdout, "1 rows deleted in ") {
		t.Fatalf("DELETE answered %q", r.stdout)
	}
	r = mustApron(t, "", append([]string{"query", "DROP SCHEMA clidb CASCADE"}, host...)...)
	if !strings.HasPrefix(r.stdout, "OK in ") {
		t.Fatalf("DROP SCHEMA answered %q", r.stdout)
	}
}

// TestDelete: DELETE FROM … WHERE through ADBC ExecuteUpdate against the
// real binary: the answer is the rows deleted, they are gone from every
// read at once (buffered and persisted rows alike) and after kill -9;
// bad statements have their code and delete nothing.
func TestDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, srv.Addr, mem)
	defer cn.Close()
	written := writeBatches(t, srv.Addr, "del", "t", 0, 4, 300*time.Millisecond)
	waitPersisted(t, srv, "del", "t", written)
	writeBatches(t, srv.Addr, "del", "t", 4, 1, 0) // and some buffered
	total := written + persistBatchRows
	count := func(where string) int64 {
		t.Helper()
		return mustQuery(t, cn, "SELECT count(*) AS n FROM del.t"+where)[0]["n"].(int64)
	}
	if n := count(""); n != total {
		t.Fatalf("%d rows, want %d", n, total)
	}
	refused := func(sql string, code adbc.Status, parts ...string) {
		t.Helper()
		_, err := adbcUpdate(ctx, cn, sql)
		wantADBC(t, err, code, parts...)
		if n := count(""); n != total {
			t.Fatalf("%s: refused, but %d rows left of %d", sql, n, total)
		}
	}
	refused("DELETE FROM del.t WHERE id < 10) OR (true", adbc.StatusInvalidArgument)
	refused("DELETE FROM del.t WHERE true) OR (id < 10", adbc.StatusInvalidArgument)
	refused("DELETE FROM del.t WHERE", adbc.StatusInvalidArgument)
	refused("DELETE FROM del.t id < 10", adbc.StatusInvalidArgument, "WHERE")
	refused("DELETE FROM del.nope WHERE true", adbc.StatusNotFound, "nope")
	refused("DELETE FROM system.tables", adbc.StatusInvalidArgument, "system")
	refused("DELETE FROM del.t WHERE id IN (SELECT * FROM read_csv('/etc/passwd'))", adbc.StatusInvalidArgument, "read_csv")
	refused("DELETE FROM del.t WHERE nosuchcolumn = 1", adbc.StatusInvalidArgument, "nosuchcolumn")

	// A time range and a tag over persisted and buffered rows.
	want := count(" WHERE id < 100 OR id >= 2000")
	n, err := adbcUpdate(ctx, cn, "DELETE FROM del.t WHERE id >= 100 AND id < 2000 -- a comment")
	if err != nil {
		t.Fatal(err)
	}
	if n != total-want {
		t.Fatalf("DELETE answered %d, want %d", n, total-want)
	}
	if got := count(""); got != want {
		t.Fatalf("%d rows after the delete, want %d", got, want)
	}
	if got := count(" WHERE id >= 100 AND id < 2000"); got != 0 {
		t.Fatalf("%d deleted rows still read", got)
	}
	if got := readTable(t, srv.Addr, "del", "t").NumRows(); int64(got) != want {
		t.Fatalf("plain Flight reads %d rows, want %d", got, want)
	}
	// Writes go on after it; kill -9 keeps the delete.
	writeBatches(t, srv.Addr, "del", "t", 5, 1, 0)
	want += persistBatchRows
	srv.Kill(t)
	srv = startServer(t, dir, "--segment-duration", "1s")
	cn2 := adbcConn(t, srv.Addr, mem)
	defer cn2.Close()
	if got := mustQuery(t, cn2, "SELECT count(*) AS n FROM del.t")[0]["n"].(int64); got != want {
		t.Fatalf("after kill -9: %d rows, want %d", got, want)
	}
	// Every row.
	if n, err := adbcUpdate(ctx, cn2, "DELETE FROM del.t"); err != nil || n != want {
		t.Fatalf("DELETE of every row: %d, %v; want %d", n, err, want)
	}
	if got := mustQuery(t, cn2, "SELECT count(*) AS n FROM del.t")[0]["n"].(int64); got != 0 {
		t.Fatalf("after deleting every row: %d", got)
	}
}
