//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func cpuEnv(t *testing.T) *env {
	v := newEnv(t, DefaultConfig())
	v.write("db", "cpu", batch(v.mem,
		col{"time", tsNs, []any{int64(1), int64(2), int64(3)}},
		col{"host", arrow.BinaryTypes.String, []any{"a", "b", "a"}},
		col{"usage", arrow.PrimitiveTypes.Float64, []any{1.5, 2.5, nil}},
	))
	return v
}

func TestPrepareSchemas(t *testing.T) {
	v := cpuEnv(t)
	st, err := v.e.Prepare(context.Background(), "SELECT host, usage * 2 AS u2, time FROM db.cpu WHERE host = $1 AND usage > $2", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != KindQuery {
		t.Fatalf("kind %v", st.Kind)
	}
	if got := st.Schema.String(); st.Schema.NumFields() != 3 || st.Schema.Field(0).Name != "host" || st.Schema.Field(1).Name != "u2" ||
		!arrow.TypeEqual(st.Schema.Field(2).Type, &arrow.TimestampType{Unit: arrow.Nanosecond}) {
		t.Fatalf("result schema %s", got)
	}
	if st.Params.NumFields() != 2 || st.Params.Field(0).Type.ID() != arrow.STRING || st.Params.Field(1).Type.ID() != arrow.FLOAT64 {
		t.Fatalf("parameter schema %s", st.Params)
	}
	if v.e.Stats().Active != 0 {
		t.Fatal("Prepare kept a connection")
	}
}

// params builds a parameter batch of one string and one float column.
func params(v *env, hosts []string, mins []float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(v.mem, arrow.NewSchema([]arrow.Field{
		{Name: "1", Type: arrow.BinaryTypes.String}, {Name: "2", Type: arrow.PrimitiveTypes.Float64}}, nil))
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(hosts, nil)
	b.Field(1).(*array.Float64Builder).AppendValues(mins, nil)
	return b.NewRecordBatch()
}

func TestRunWithParameters(t *testing.T) {
	v := cpuEnv(t)
	ctx := context.Background()
	st, err := v.e.Prepare(ctx, "SELECT host, usage FROM db.cpu WHERE host = $1 AND usage > $2 ORDER BY time", "")
	if err != nil {
		t.Fatal(err)
	}
	p := params(v, []string{"a", "b"}, []float64{1, 2})
	defer p.Release()
	rows, _, err := collect(v.e.Run(ctx, st, p))
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, "two parameter rows", rows, []string{"a|1.5", "b|2.5"})

	if _, err := v.e.Run(ctx, st, nil); !errors.Is(err, ErrSyntax) {
		t.Fatalf("run without parameters: %v, want ErrSyntax", err)
	}
	// A statement without parameters runs with nil.
	st2, err := v.e.Prepare(ctx, "SELECT count(*) FROM cpu", "db")
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err = collect(v.e.Run(ctx, st2, nil))
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, "count", rows, []string{"3"})
}

func TestInsert(t *testing.T) {
	v := cpuEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		sql  string
		db   string
		rows int64
	}{
		{"INSERT INTO db.cpu VALUES ('1970-01-01 00:00:00.000000010', 'c', 7.25)", "", 1},
		{`INSERT INTO "db"."cpu" (host, usage, time) VALUES ('d', 1, '1970-01-01 00:00:00.000000011'), ('d', 2, '1970-01-01 00:00:00.000000012');`, "", 2},
		// (time + INTERVAL would be a µs TIMESTAMP in DuckDB: keep time as is.)
		{"INSERT INTO cpu (time, host) SELECT time, host || '-copy' FROM cpu WHERE host = 'a'", "db", 2},
	} {
		st, err := v.e.Prepare(ctx, tc.sql, tc.db)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if st.Kind != KindInsert || st.Schema.NumFields() != 0 {
			t.Fatalf("%s: kind %v schema %s", tc.sql, st.Kind, st.Schema)
		}
		n, err := v.e.Exec(ctx, st, nil)
		if err != nil || n != tc.rows {
			t.Fatalf("%s: %d rows, %v; want %d", tc.sql, n, err, tc.rows)
		}
	}
	equalRows(t, "after inserts", v.query("SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY time, host", ""), []string{
		"1|a|1.5", "1|a-copy|NULL", "2|b|2.5", "3|a|NULL", "3|a-copy|NULL", "10|c|7.25", "11|d|1", "12|d|2",
	})

	// With parameters.
	st, err := v.e.Prepare(ctx, "INSERT INTO db.cpu (time, host, usage) VALUES (TIMESTAMP_NS '1970-01-01 00:00:01', $1, $2)", "")
	if err != nil {
		t.Fatal(err)
	}
	p := params(v, []string{"p1", "p2"}, []float64{10, 20})
	defer p.Release()
	if n, err := v.e.Exec(ctx, st, p); err != nil || n != 2 {
		t.Fatalf("insert with 2 parameter rows: %d, %v", n, err)
	}
	equalRows(t, "parameter inserts", v.query("SELECT host, usage FROM db.cpu WHERE host LIKE 'p%' ORDER BY host", ""), []string{"p1|10", "p2|20"})
}

func TestStatementErrors(t *testing.T) {
	v := cpuEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		sql  string
		want error
	}{
		{"CREATE TABLE x (a INT)", ErrSyntax}, // DDL, but no database
		{"CREATE VIEW db.v AS SELECT 1", ErrSyntax},
		{"DELETE FROM db.cpu USING db.cpu", ErrSyntax},
		{"DELETE FROM db.cpu WHERE true) OR (true", ErrSyntax},
		{"UPDATE db.cpu SET usage = 1", ErrUnsupportedStatement},
		{"INSERT INTO db.nope VALUES (1)", ErrNotFound},
		{"INSERT INTO cpu VALUES (1)", ErrSyntax}, // no current database
		{"INSERT INTO db.cpu (host) VALUES (1, 2)", ErrSyntax},
		{"INSERT INTO db.cpu DEFAULT VALUES", ErrSyntax},
		{"SELEC 1", ErrSyntax},
	} {
		_, err := v.e.Prepare(ctx, tc.sql, "")
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.sql, err, tc.want)
		}
	}
	// A type the table cannot take is refused by the write path, and
	// changes nothing.
	st, err := v.e.Prepare(ctx, "INSERT INTO db.cpu (time, usage) VALUES (TIMESTAMP_NS '1970-01-01', 'not a number')", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Exec(ctx, st, nil); err == nil {
		t.Fatal("inserting a string into a float column succeeded")
	}
	equalRows(t, "unchanged", v.query("SELECT count(*) FROM db.cpu", ""), []string{"3"})
}

func TestSystemTables(t *testing.T) {
	v := cpuEnv(t)
	equalRows(t, "databases", v.query("SELECT database_name, tables FROM system.databases", ""), []string{"db|1"})
	equalRows(t, "tables", v.query("SELECT database_name, table_name, columns FROM system.tables", ""), []string{"db|cpu|3"})
	equalRows(t, "columns", v.query("SELECT column_name, ordinal_position, data_type FROM system.columns ORDER BY ordinal_position", ""),
		[]string{"time|1|TIMESTAMP_NS", "host|2|VARCHAR", "usage|3|DOUBLE"})
	equalRows(t, "segments", v.query("SELECT state, rows, wal_file LIKE '%.wal' FROM system.segments", ""), []string{"open|3|true"})
	equalRows(t, "queries", v.query("SELECT count(*), bool_and(query LIKE '%system.queries%') FROM system.queries", ""), []string{"1|true"})
	// With a current database, system tables stay reachable.
	equalRows(t, "qualified", v.query("SELECT count(*) FROM system.tables", "db"), []string{"1"})
}

func TestNowComparesWithTime(t *testing.T) {
	v := cpuEnv(t)
	now := time.Now().UnixNano()
	v.write("db", "recent", batch(v.mem,
		col{"time", tsNs, []any{now - int64(10*time.Minute), now - int64(time.Minute), now + int64(time.Hour)}},
		col{"v", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(2), int64(3)}},
	))
	equalRows(t, "last 5 minutes", v.query("SELECT v FROM db.recent WHERE time > now() - INTERVAL 5 MINUTE AND time <= now() ORDER BY v", ""), []string{"2"})
	equalRows(t, "with a current database", v.query("SELECT count(*) FROM recent WHERE time > now() - INTERVAL 1 HOUR", "db"), []string{"3"})
}

func TestCatalogQualifiedNames(t *testing.T) {
	v := cpuEnv(t)
	equalRows(t, "apron.db.cpu", v.query("SELECT count(*) FROM apron.db.cpu", ""), []string{"3"})
	equalRows(t, "apron.system.tables", v.query("SELECT count(*) FROM apron.system.tables", ""), []string{"1"})
	equalRows(t, "current database", v.query(`SELECT count(*) FROM "apron"."db"."cpu" JOIN cpu USING (time)`, "db"), []string{"3"})
}

func TestNowPrunes(t *testing.T) {
	v := cpuEnv(t)
	now := time.Now().UnixNano()
	// Three days, so three partitions: two far in the past, one recent.
	for _, ts := range []int64{now - int64(48*time.Hour), now - int64(24*time.Hour), now - int64(time.Minute)} {
		v.write("db", "p", batch(v.mem, col{"time", tsNs, []any{ts}}, col{"v", arrow.PrimitiveTypes.Int64, []any{int64(1)}}))
	}
	before := v.e.Stats().ChunksPruned
	for _, q := range []string{
		"SELECT count(*) FROM db.p WHERE time > now() - INTERVAL 5 MINUTE",
		"SELECT count(*) FROM db.p WHERE time > current_timestamp - INTERVAL 5 MINUTE",
	} {
		rows, _, err := collect(v.e.Query(context.Background(), q, ""))
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Fatalf("%s: %v", q, err)
		}
		if err == nil {
			equalRows(t, q, rows, []string{"1"})
		}
	}
	if v.e.Stats().ChunksPruned == before {
		t.Fatal("a now()-relative bound pruned nothing")
	}
}

// TestWhereFreeShapes: a query that differs from a prepared one only in
// its WHERE takes that one's result schema without DuckDB planning it
// (whereFreeShape), and gives the rows of its own WHERE; parameters, which
// the WHERE types, keep their own shape; a WHERE DuckDB refuses fails at
// execute with DuckDB's error.
func TestWhereFreeShapes(t *testing.T) {
	v := cpuEnv(t)
	ctx := context.Background()
	first, err := v.e.Prepare(ctx, "SELECT host, usage * 2 AS u2 FROM db.cpu WHERE host = 'a'", "")
	if err != nil {
		t.Fatal(err)
	}
	hits := v.e.Stats().ShapeHits
	st, err := v.e.Prepare(ctx, "SELECT host, usage * 2 AS u2 FROM db.cpu WHERE host = 'b' AND usage > 0", "")
	if err != nil {
		t.Fatal(err)
	}
	if v.e.Stats().ShapeHits != hits+1 {
		t.Fatalf("shape hits %d -> %d: the second WHERE was planned again", hits, v.e.Stats().ShapeHits)
	}
	if !st.Schema.Equal(first.Schema) {
		t.Fatalf("schema %s, want %s", st.Schema, first.Schema)
	}
	rows, _, err := collect(v.e.Run(ctx, st, nil))
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, "the second WHERE's rows", rows, []string{"b|5"})

	// Another select list is another shape.
	other, err := v.e.Prepare(ctx, "SELECT host FROM db.cpu WHERE host = 'b'", "")
	if err != nil {
		t.Fatal(err)
	}
	if other.Schema.NumFields() != 1 {
		t.Fatalf("schema %s, want host alone", other.Schema)
	}
	// A parameter in the WHERE: its own shape, with its parameter.
	pst, err := v.e.Prepare(ctx, "SELECT host, usage * 2 AS u2 FROM db.cpu WHERE host = $1", "")
	if err != nil {
		t.Fatal(err)
	}
	if pst.Params.NumFields() != 1 || pst.Params.Field(0).Type.ID() != arrow.STRING {
		t.Fatalf("parameter schema %s, want one string", pst.Params)
	}
	// A WHERE naming no column passes prepare on the shape and fails
	// when run, naming the column.
	bad, err := v.e.Prepare(ctx, "SELECT host, usage * 2 AS u2 FROM db.cpu WHERE nosuchcolumn = 1", "")
	if err == nil {
		_, err = v.e.Run(ctx, bad, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "nosuchcolumn") {
		t.Fatalf("a WHERE on a missing column: %v, want DuckDB's error naming it", err)
	}
}
