//go:build duckdb_arrow

package query

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestFilteredDirectScan runs each query whose WHERE clause a direct scan
// filters itself next to the same query that DuckDB must run (AND
// random() >= 0 is always true but not a bound or an equality): same
// schema, same rows. The buffered rows have nanosecond times, strings
// with NULLs, several chunks, and a column that only the later rows have;
// bounds fall on rows' exact times, to the nanosecond.
func TestFilteredDirectScan(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	n := 30000
	at := func(i int) int64 { return base + int64(i)*1000 + int64(i%7) } // ns that are not whole µs
	times, a, str := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = at(i)
		if i%7 != 0 {
			a[i] = int64(i)
		}
		if i%5 != 0 {
			str[i] = fmt.Sprintf("v%d", i%13)
		}
	}
	s.write("db", "m", batch(s.mem, col{"time", tsNs, times}, col{"a", arrow.PrimitiveTypes.Int64, a}, col{"s", arrow.BinaryTypes.String, str}))
	// Later rows with a new column, and rows around now, with a gap of a
	// minute on each side of now - 10 minutes (DuckDB's now() and the
	// scan's are read at different moments): every bound relative to now
	// falls in that gap.
	now := time.Now()
	var late, u []any
	for i := range 600 {
		d := time.Duration(i) * time.Second
		if d > 9*time.Minute && d < 11*time.Minute {
			continue
		}
		late = append(late, now.Add(-d).UnixNano())
		u = append(u, []any{"z", "y", nil}[i%3])
	}
	strs := make([]any, len(late))
	for i := range strs {
		strs[i] = fmt.Sprintf("v%d", i%13)
	}
	s.write("db", "m", batch(s.mem, col{"time", tsNs, late}, col{"s", arrow.BinaryTypes.String, strs}, col{"u", arrow.BinaryTypes.String, u}))

	ts := func(i int) string { return time.Unix(0, at(i)).UTC().Format("2006-01-02 15:04:05.999999999") }
	tsMicro := func(i int) string { return time.Unix(0, at(i)).UTC().Format("2006-01-02 15:04:05.000000") }
	for _, sql := range []string{
		"SELECT * FROM db.m WHERE s = 'v3'",
		"SELECT * FROM db.m WHERE 'v3' = s",
		"SELECT time, s FROM db.m WHERE s = 'v3' AND time >= '" + ts(1234) + "'",
		"SELECT * FROM db.m WHERE time > '" + ts(1234) + "' AND time < '" + ts(1300) + "'",
		"SELECT * FROM db.m WHERE time >= '" + ts(1234) + "' AND time <= '" + ts(1300) + "'",
		"SELECT a FROM db.m WHERE time BETWEEN '" + ts(20000) + "' AND '" + ts(29999) + "' AND s = 'v12'",
		"SELECT * FROM db.m WHERE time = '" + ts(777) + "'",
		"SELECT * FROM db.m WHERE time >= TIMESTAMP '" + tsMicro(5000) + "' AND time < TIMESTAMP '" + tsMicro(5010) + "'",
		"SELECT * FROM db.m WHERE time > CAST('" + ts(5000) + "' AS TIMESTAMP_NS) AND time <= CAST('" + ts(5010) + "' AS TIMESTAMP_NS)",
		"SELECT * FROM db.m m WHERE m.s = 'v3' AND m.time < '" + ts(100) + "'",
		"SELECT * FROM db.m WHERE s = 'v3' AND s = 'v4'",
		"SELECT * FROM db.m WHERE s IN ('v3', 'v4')",
		"SELECT * FROM db.m WHERE s IN ('v3', 'v4', 'v3') AND s IN ('v4', 'v5')",
		"SELECT * FROM db.m WHERE s IN ('v3', 'nope') AND u = 'z' AND time >= '" + ts(1234) + "'",
		"SELECT * FROM db.m WHERE s IN ('v1') AND s = 'v2'",
		"SELECT * FROM db.m WHERE s = 'nope'",
		"SELECT * FROM db.m WHERE time > '2100-01-01'",
		"SELECT * FROM db.m WHERE u = 'z'",
		"SELECT s, u FROM db.m WHERE u = 'y' AND s = 'v1'",
		"SELECT * FROM db.m WHERE time >= now() - INTERVAL 10 MINUTE",
		"SELECT * FROM db.m WHERE s = 'v5' AND time >= now() - INTERVAL 10 MINUTE AND time < now() + INTERVAL 1 HOUR",
		"SELECT * FROM db.m WHERE time > now() - INTERVAL 600 SECOND",
		"SELECT * FROM db.m WHERE time >= now() - INTERVAL 1 DAY AND time <= now() - INTERVAL 10 MINUTE",
	} {
		t.Run(sql, func(t *testing.T) {
			before := s.e.Stats().DirectScans
			got, gotSchema, err := collect(s.e.Query(context.Background(), sql, ""))
			if err != nil {
				t.Fatal(err)
			}
			if s.e.Stats().DirectScans != before+1 {
				t.Fatalf("not run as a direct scan")
			}
			want, wantSchema, err := collect(s.e.Query(context.Background(), sql+" AND random() >= 0", ""))
			if err != nil {
				t.Fatal(err)
			}
			if s.e.Stats().DirectScans != before+1 {
				t.Fatalf("the reference ran as a direct scan")
			}
			if !gotSchema.Equal(wantSchema) {
				t.Fatalf("schema %s, DuckDB's %s", gotSchema, wantSchema)
			}
			equalRows(t, "rows", sorted(got), sorted(want))
		})
	}

	// Left to DuckDB: what the scan cannot evaluate exactly, or filter.
	for _, sql := range []string{
		"SELECT * FROM db.m WHERE s = 'v3' OR s = 'v4'",
		"SELECT * FROM db.m WHERE s IN ('v3', NULL)",
		"SELECT * FROM db.m WHERE s IN ('v3', u)",
		"SELECT * FROM db.m WHERE s NOT IN ('v3', 'v4')",
		"SELECT * FROM db.m WHERE time IN ('" + ts(777) + "')",
		"SELECT * FROM db.m WHERE a IN ('5')",
		"SELECT * FROM db.m WHERE a = 5",
		"SELECT * FROM db.m WHERE a = '5'",
		"SELECT * FROM db.m WHERE time >= DATE '2024-03-01'",
		"SELECT * FROM db.m WHERE time >= now() - to_seconds(600.5)",
		"SELECT * FROM db.m WHERE time >= now() - INTERVAL (600.5) SECOND",
		"SELECT * FROM db.m WHERE time >= now() - INTERVAL (10.7) MINUTE",
		"SELECT * FROM db.m WHERE time <= now() - INTERVAL '10' MINUTE",
		"SELECT * FROM db.m WHERE time >= now() - INTERVAL 1 MONTH",
		"SELECT * FROM db.m WHERE time >= date_trunc('hour', now()) - INTERVAL 1 DAY",
		"SELECT * FROM db.m WHERE time >= CAST(current_timestamp AS TIMESTAMP)",
		"SELECT * FROM db.m WHERE NOT s = 'v3'",
		"SELECT * FROM db.m WHERE s <> 'v3'",
		"SELECT * FROM db.m WHERE lower(s) = 'v3'",
		"SELECT * FROM db.m WHERE s = NULL",
		"SELECT * FROM db.m WHERE time >= NULL",
		"SELECT * FROM db.m WHERE s = 'v3' ORDER BY time LIMIT 3",
		"SELECT * FROM db.m WHERE s = 'v3' ORDER BY time",
		"SELECT * FROM db.m WHERE time >= (SELECT max(time) FROM db.m)",
		"SELECT * FROM db.m WHERE TIME >= '" + ts(10) + "'",
	} {
		t.Run("duckdb/"+sql, func(t *testing.T) {
			before := s.e.Stats().DirectScans
			got, _, err := collect(s.e.Query(context.Background(), sql, ""))
			if err != nil {
				t.Fatal(err)
			}
			if s.e.Stats().DirectScans != before {
				t.Fatalf("ran as a direct scan")
			}
			want, _, err := collect(s.e.Query(context.Background(), "SELECT * FROM ("+sql+") AS q WHERE random() >= 0", ""))
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, "rows", sorted(got), sorted(want))
		})
	}
}

// TestFilteredDirectScanPersisted: once the rows a filtered scan wants are
// in a persisted file, the direct scan reads it too (direct_files.go),
// filtering its rows as DuckDB would, when its WHERE pins the files' first
// sort column (else, a time range or the second sort column alone, DuckDB
// runs it); with the file outside its bounds, it
// reads the buffer only. Columns the WHERE compares that the query does
// not select are read for the filter and left out of the result.
func TestFilteredDirectScanPersisted(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base, base + 1, base + 2}}, col{"s", arrow.BinaryTypes.String, []any{"x", "y", "x"}}))
	// Two string columns: files are sorted by s, then u.
	s.write("db", "m2", batch(s.mem, col{"time", tsNs, []any{base, base + 1, base + 2, base + 3}},
		col{"s", arrow.BinaryTypes.String, []any{"x", "y", "x", "y"}}, col{"u", arrow.BinaryTypes.String, []any{"a", "a", "b", "b"}}))
	s.roll()
	s.waitReleased(t, 1)
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base + 10, base + 11}}, col{"s", arrow.BinaryTypes.String, []any{"x", "y"}}))
	run := func(sql string) []string {
		t.Helper()
		got, _, err := collect(s.e.Query(context.Background(), sql, ""))
		if err != nil {
			t.Fatal(err)
		}
		return sorted(got)
	}
	ts := func(ns int64) string {
		return "'" + time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") + "'"
	}
	for _, c := range []struct {
		sql           string
		direct, files bool // a direct scan; reading the persisted file
	}{
		{"SELECT time, s FROM db.m WHERE s = 'x'", true, true},
		{"SELECT time FROM db.m WHERE s = 'x'", true, true},
		{"SELECT s FROM db.m WHERE s = 'y' AND time <= " + ts(base+10), true, true},
		{"SELECT time, s FROM db.m WHERE s = 'x' AND time >= " + ts(base+5), true, false},
		{"SELECT time, s FROM db.m WHERE s = 'z'", true, true},
		// No series to narrow the file's row groups to: DuckDB reads it.
		{"SELECT * FROM db.m WHERE time > " + ts(base) + " AND time < " + ts(base+11), false, false},
		// Nor with only the second sort column pinned.
		{"SELECT * FROM db.m2 WHERE u = 'a'", false, false},
		{"SELECT * FROM db.m2 WHERE u = 'a' AND s = 'x'", true, true},
	} {
		st := s.e.Stats()
		got := run(c.sql)
		now := s.e.Stats()
		if (now.DirectScans != st.DirectScans) != c.direct || (now.DirectFileScans != st.DirectFileScans) != c.files {
			t.Errorf("%s: %d direct scans, %d of persisted files; want %v, %v", c.sql, now.DirectScans-st.DirectScans, now.DirectFileScans-st.DirectFileScans, c.direct, c.files)
		}
		want := run("SELECT * FROM (" + c.sql + ") AS q WHERE random() >= 0")
		equalRows(t, c.sql, got, want)
	}
	if got := run("SELECT time, s FROM db.m WHERE s = 'x'"); len(got) != 3 {
		t.Errorf("rows %v, want 3", got)
	}
}

// TestFilteredDirectScanBinary: a filtered direct scan of buffered rows
// with a binary column of values from empty to 4 KiB gives DuckDB's
// answer, every byte of each value (takeBinary: arrow-go's Take through
// the scan's Recycler cut such values short, then panicked).
func TestFilteredDirectScanBinary(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 6000
	times, hosts, blobs := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = base + int64(i)
		hosts[i] = fmt.Sprintf("h%d", i%3)
		l := rng.IntN(40)
		if rng.IntN(50) == 0 {
			l = 2000 + rng.IntN(2000)
		}
		if i%11 != 0 {
			blobs[i] = bytes.Repeat([]byte{byte('a' + i%26)}, l)
		}
	}
	s.write("db", "b", batch(s.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, hosts}, col{"blob", arrow.BinaryTypes.Binary, blobs}))
	before := s.e.Stats().DirectScans
	got, _, err := collect(s.e.Query(context.Background(), "SELECT * FROM db.b WHERE host = 'h1'", ""))
	if err != nil {
		t.Fatal(err)
	}
	if s.e.Stats().DirectScans != before+1 {
		t.Fatal("not a direct scan")
	}
	want, _, err := collect(s.e.Query(context.Background(), "SELECT * FROM db.b WHERE host = 'h1' AND random() >= 0", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != n/3 {
		t.Fatalf("%d rows from DuckDB, want %d", len(want), n/3)
	}
	equalRows(t, "rows", sorted(got), sorted(want))
}

// fiftyHostsRows is the rows fiftyHosts writes.
const fiftyHostsRows = 5000

// fiftyHosts is a buffer of fiftyHostsRows rows of table db.m (time,
// host), a millisecond apart, hosts h0 to h49 in turn.
func fiftyHosts(t *testing.T) *storeEnv {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	times, str := make([]any, fiftyHostsRows), make([]any, fiftyHostsRows)
	for i := range times {
		times[i] = base + int64(i)*1e6
		str[i] = fmt.Sprintf("h%d", i%50)
	}
	s.write("db", "m", batch(s.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, str}))
	return s
}

// TestFilteredDirectScanUnprepared: a filtered direct scan of a shape
// prepared before (same columns and table, another WHERE) is streamed
// without a Prepare, with the same answer as DuckDB's; a new shape, a
// new catalog version or another current database is prepared again; a
// WHERE that DuckDB refuses still gets DuckDB's error.
func TestFilteredDirectScanUnprepared(t *testing.T) {
	s, n := fiftyHosts(t), fiftyHostsRows
	ts := func(i int) string {
		return time.Unix(0, base+int64(i)*1e6).UTC().Format("2006-01-02 15:04:05.999999999")
	}
	q := func(host string, from int) string {
		return fmt.Sprintf("SELECT time, host FROM db.m WHERE host = '%s' AND time >= '%s'", host, ts(from))
	}
	check := func(sql, db string, unprepared bool) {
		t.Helper()
		st := s.e.Stats()
		got, gotSchema, err := collect(s.e.Query(context.Background(), sql, db))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		st2 := s.e.Stats()
		if st2.DirectScans != st.DirectScans+1 {
			t.Fatalf("%s: not a direct scan", sql)
		}
		if u := st2.DirectUnprepared == st.DirectUnprepared+1; u != unprepared {
			t.Fatalf("%s: streamed without a Prepare %v, want %v", sql, u, unprepared)
		}
		want, wantSchema, err := collect(s.e.Query(context.Background(), sql+" AND random() >= 0", db))
		if err != nil {
			t.Fatal(err)
		}
		if !gotSchema.Equal(wantSchema) {
			t.Fatalf("%s: schema %s, DuckDB's %s", sql, gotSchema, wantSchema)
		}
		equalRows(t, sql, sorted(got), sorted(want))
	}
	check(q("h1", 100), "", false) // the shape's first: prepared
	check(q("h2", 200), "", true)
	check(q("h3", 4000), "", true)
	check(q("none", 0), "", true)
	check(fmt.Sprintf("SELECT time, host FROM db.m WHERE time < '%s'", ts(10)), "", true)
	check("SELECT host, time FROM db.m WHERE host = 'h4'", "", false) // another select list
	check("SELECT host, time FROM db.m WHERE host = 'h5'", "", true)
	check("SELECT host, time FROM m WHERE host = 'h5'", "db", false) // another FROM and database
	check("SELECT host, time FROM m WHERE host = 'h6'", "db", true)
	check("SELECT HOST, time FROM db.m WHERE host = 'h5'", "", false) // names as written

	// A bound DuckDB refuses: its error, not an empty answer.
	for _, sql := range []string{
		"SELECT time, host FROM db.m WHERE host = 'h1' AND time >= 'yesterday-ish'",
		"SELECT time, host FROM db.m WHERE host = 'h1' AND time >= 5",
		"SELECT time, host FROM db.m WHERE nohost = 'h1'",
	} {
		if _, _, err := collect(s.e.Query(context.Background(), sql, "")); err == nil {
			t.Errorf("%s: no error", sql)
		}
	}

	// A new column: the catalog's version changed, and * with it.
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base + int64(n)*1e6}}, col{"host", arrow.BinaryTypes.String, []any{"h1"}},
		col{"v", arrow.PrimitiveTypes.Float64, []any{1.5}}))
	check(q("h1", 100), "", false)
	check(q("h1", 4999), "", true)
	check("SELECT * FROM db.m WHERE host = 'h1'", "", false)
	check("SELECT * FROM db.m WHERE host = 'h2'", "", true)
}

// TestPreparedRunsDirect: a prepared query without parameters runs as its
// text does: a one-series query of a shape typed before is streamed by a
// direct scan without a DuckDB Prepare (ADBC Python and JDBC prepare
// every statement they run), with the schema Prepare answered and
// DuckDB's rows. It fails when Run prepares every statement in DuckDB.
func TestPreparedRunsDirect(t *testing.T) {
	s, n := fiftyHosts(t), fiftyHostsRows
	ctx := context.Background()
	for i, host := range []string{"h1", "h2", "h3"} {
		sql := fmt.Sprintf("SELECT time, host FROM db.m WHERE host = '%s'", host)
		st, err := s.e.Prepare(ctx, sql, "")
		if err != nil {
			t.Fatal(err)
		}
		before := s.e.Stats()
		got, gotSchema, err := collect(s.e.Run(ctx, st, nil))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		after := s.e.Stats()
		if after.DirectScans != before.DirectScans+1 {
			t.Fatalf("%s: the prepared statement did not run as a direct scan", sql)
		}
		// The shape's first is prepared in DuckDB as it runs, as a text's
		// is (TestFilteredDirectScanUnprepared); the others are not.
		if unprepared := after.DirectUnprepared == before.DirectUnprepared+1; unprepared != (i > 0) {
			t.Fatalf("%s (statement %d of the shape): streamed without a DuckDB Prepare %v", sql, i, unprepared)
		}
		if !gotSchema.Equal(st.Schema) {
			t.Fatalf("%s: streamed schema %s, prepared %s", sql, gotSchema, st.Schema)
		}
		want, _, err := collect(s.e.Query(ctx, sql+" AND random() >= 0", ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != n/50 {
			t.Fatalf("%s: DuckDB answered %d rows, want %d", sql, len(want), n/50)
		}
		equalRows(t, sql, sorted(got), sorted(want))
	}
}
