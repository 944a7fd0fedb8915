package integration

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowStrings renders rows canonically (columns by name, rows sorted).
func rowStrings(rows []map[string]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%v;", k, r[k])
		}
		out = append(out, b.String())
	}
	sort.Strings(out)
	return out
}

// TestLastValueCache: a last-value cache through ADBC on the real binary:
// the DDL and its refusals (codes, nothing changed), the fill from
// persisted and buffered rows, queries answered from the cache equal to
// the same queries over every row, writes merged as they come, and after
// kill -9 the cache filled again (persisted files plus the WAL) and
// answering correctly.
func TestLastValueCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, srv.Addr, mem)

	written := writeBatches(t, srv.Addr, "lv", "m", 0, 3, 300*time.Millisecond)
	waitPersisted(t, srv, "lv", "m", written)
	writeBatches(t, srv.Addr, "lv", "m", 3, 1, 0) // and some buffered

	listed := func() []string {
		return rowStrings(mustQuery(t, cn, "SELECT database_name, table_name, cache_name, key_columns, count FROM system.last_value_caches"))
	}
	refused := func(sql string, code adbc.Status, parts ...string) {
		t.Helper()
		before := listed()
		_, err := adbcUpdate(ctx, cn, sql)
		wantADBC(t, err, code, parts...)
		if after := listed(); !slices.Equal(before, after) {
			t.Fatalf("%s: refused, but the caches changed: %v → %v", sql, before, after)
		}
	}
	refused("CREATE LAST VALUE CACHE ON lv.nope", adbc.StatusNotFound, "nope")
	refused("CREATE LAST VALUE CACHE ON lv.m (value)", adbc.StatusInvalidArgument, "string")
	refused("CREATE LAST VALUE CACHE ON lv.m (nope)", adbc.StatusInvalidArgument, "not a column")
	refused("CREATE LAST VALUE CACHE ON lv.m COUNT 5000", adbc.StatusInvalidArgument, "COUNT")
	refused("CREATE LAST VALUE CACHE lv.m", adbc.StatusInvalidArgument, "ON")
	refused("DROP LAST VALUE CACHE ON lv.m", adbc.StatusNotFound, "no last-value cache")
	if _, err := adbcUpdate(ctx, cn, "CREATE LAST VALUE CACHE ON lv.m COUNT 2"); err != nil {
		t.Fatal(err)
	}
	refused("CREATE LAST VALUE CACHE ON lv.m", adbc.StatusAlreadyExists, "already")

	waitReady := func(cn adbc.Connection, when string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := mustQuery(t, cn, "SELECT state FROM system.last_value_caches WHERE database_name = 'lv' AND table_name = 'm'")
			if len(r) == 1 && r[0]["state"] == "ready" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cache is not ready after 30s: %v", when, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	queries := []string{
		"SELECT tag, arg_max(id, time) AS id, arg_max(value, time) AS v, max(time) AS t FROM lv.m GROUP BY tag",
		// (max(time) of the whole table is answered from metadata, before
		// any cache: query/metadirect.go.)
		"SELECT max(time) AS t FROM lv.m WHERE tag = 'tag3'",
		"SELECT * FROM lv.m WHERE tag IN ('tag1', 'tag2') ORDER BY time DESC LIMIT 2",
	}
	uses := func(cn adbc.Connection) int64 {
		return mustQuery(t, cn, "SELECT uses FROM system.last_value_caches")[0]["uses"].(int64)
	}
	check := func(cn adbc.Connection, when string) {
		t.Helper()
		before := uses(cn)
		for _, q := range queries {
			got := rowStrings(mustQuery(t, cn, q))
			want := rowStrings(mustQuery(t, cn, "SELECT * FROM ("+q+")"))
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %s:\n got %v\nwant %v", when, q, got, want)
			}
		}
		if n := uses(cn) - before; n != int64(len(queries)) {
			t.Fatalf("%s: the cache answered %d of %d queries", when, n, len(queries))
		}
		got := rowStrings(mustQuery(t, cn, "SELECT * FROM last_value('lv.m')"))
		want := rowStrings(mustQuery(t, cn, "SELECT * FROM lv.m QUALIFY row_number() OVER (PARTITION BY tag ORDER BY time DESC) <= 2"))
		if !slices.Equal(got, want) || len(got) != 14 {
			t.Fatalf("%s: last_value():\n got %v\nwant %v", when, got, want)
		}
	}
	waitReady(cn, "created")
	check(cn, "filled")
	writeBatches(t, srv.Addr, "lv", "m", 4, 1, 0)
	check(cn, "after a write")
	cn.Close()

	srv.Kill(t)
	srv = startServer(t, dir, "--segment-duration", "1s")
	cn = adbcConn(t, srv.Addr, mem)
	defer cn.Close()
	waitReady(cn, "after kill -9")
	check(cn, "after kill -9")
	if got := mustQuery(t, cn, "SELECT max(id) AS hi FROM last_value('lv.m')")[0]["hi"].(int64); got != 5*persistBatchRows-1 {
		t.Fatalf("after kill -9: the latest id is %d, want %d", got, 5*persistBatchRows-1)
	}
	if _, err := adbcUpdate(ctx, cn, "DROP TABLE lv.m"); err != nil {
		t.Fatal(err)
	}
	if l := listed(); len(l) != 0 {
		t.Fatalf("caches after DROP TABLE: %v", l)
	}
}
