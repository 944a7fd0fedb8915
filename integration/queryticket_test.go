//go:build duckdb_arrow

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// ticketJSON is a query ticket of sql in database db (InfluxDB 3's form).
func ticketJSON(db, sql string) []byte {
	b, _ := json.Marshal(map[string]string{"database": db, "sql_query": sql})
	return b
}

// ticketRows runs a query ticket (one DoGet, no GetFlightInfo) and
// returns its rows.
func ticketRows(ctx context.Context, t testing.TB, c flight.Client, mem memory.Allocator, ticket []byte) ([]map[string]any, error) {
	t.Helper()
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return nil, err
	}
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(mem))
	if err != nil {
		return nil, err
	}
	return readRows(rdr)
}

// TestQueryTicket: a DoGet ticket that a client writes itself, InfluxDB
// 3's JSON form, answers a query in one call: the same rows as the Flight
// SQL path, unqualified names in the ticket's database, and every malformed
// or refused ticket answered with a clear code and nothing run.
func TestQueryTicket(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	writeBatches(t, srv.Addr, "a", "t", 0, 2, 0)
	writeBatches(t, srv.Addr, "b", "t", 2, 1, 0)
	cn := adbcConn(t, srv.Addr, mem)
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)

	for _, tc := range []struct{ ticket, viaSQL string }{
		{`{"database": "a", "sql_query": "SELECT count(*) AS n, sum(value) AS s FROM t"}`, "SELECT count(*) AS n, sum(value) AS s FROM a.t"},
		{`{"database": "a", "sql_query": "SELECT count(*) AS n FROM b.t", "query_type": "sql"}`, "SELECT count(*) AS n FROM b.t"},
		{`{"namespace_name": "b", "sql_query": "SELECT * FROM t ORDER BY time, tag, value LIMIT 5", "query_type": null}`, "SELECT * FROM b.t ORDER BY time, tag, value LIMIT 5"},
		{`{"bucket-name": "b", "bucket": "b", "sql_query": "SELECT 1 AS one", "is_debug": true}`, "SELECT 1 AS one"},
		{` {"sql_query": "SELECT count(*) AS n FROM system.tables"} `, "SELECT count(*) AS n FROM system.tables"},
		{`{"database": "a", "sql_query": "SELECT * FROM t WHERE false"}`, "SELECT * FROM a.t WHERE false"},
	} {
		got, err := ticketRows(ctx, t, fc, mem, []byte(tc.ticket))
		if err != nil {
			t.Errorf("%s: %v", tc.ticket, err)
			continue
		}
		if want := mustQuery(t, cn, tc.viaSQL); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, Flight SQL gives %v", tc.ticket, got, want)
		}
	}

	before := fmt.Sprint(mustQuery(t, cn, "SELECT count(*) AS n FROM a.t"), mustQuery(t, cn, "SELECT count(*) AS n FROM system.tables"))
	for _, tc := range []struct {
		ticket string
		code   codes.Code
		says   string
	}{
		{`{"database": "a", "sql_query": "SELECT 1"`, codes.InvalidArgument, "malformed query ticket"},
		{`{"database": "a", "sql_query": "SELECT 1"} {"sql_query": "SELECT 2"}`, codes.InvalidArgument, "one JSON object"},
		{`{"database": "a", "sql_query": "SELECT 1", "sql": "SELECT 2"}`, codes.InvalidArgument, `unknown field "sql"`},
		{`{"database": "a", "sql_query": ""}`, codes.InvalidArgument, "no sql_query"},
		{`{"database": "a"}`, codes.InvalidArgument, "no sql_query"},
		{`{"database": "a", "bucket": "b", "sql_query": "SELECT 1"}`, codes.InvalidArgument, "two databases"},
		{`{"database": "a", "sql_query": "SHOW DATABASES", "query_type": "influxql"}`, codes.InvalidArgument, `query_type "influxql"`},
		{`{"database": "a", "sql_query": "SELECT $x", "params": {"x": 1}}`, codes.InvalidArgument, "params"},
		{`{"database": "a", "sql_query": 7}`, codes.InvalidArgument, "malformed query ticket"},
		{"{\"database\": \"a\", \"sql_query\": \"SELECT '\xff'\"}", codes.InvalidArgument, "UTF-8"},
		{`{"database": "nope", "sql_query": "SELECT 1"}`, codes.NotFound, "nope"},
		{`{"database": "a", "sql_query": "SELECT * FROM no_such_table"}`, codes.NotFound, "no_such_table"},
		{`{"database": "a", "sql_query": "SELECT 1 +"}`, codes.InvalidArgument, "syntax"},
		{`{"database": "a", "sql_query": "INSERT INTO t SELECT * FROM t"}`, codes.InvalidArgument, "execute it as an update"},
		{`{"database": "a", "sql_query": "CREATE TABLE u (time TIMESTAMP_NS, x DOUBLE)"}`, codes.InvalidArgument, "execute it as an update"},
		{`{"database": "a", "sql_query": "DELETE FROM t"}`, codes.InvalidArgument, "execute it as an update"},
		{`{"database": "a", "sql_query": "SELECT * FROM t WHERE value = ?"}`, codes.InvalidArgument, "parameters"},
	} {
		_, err := ticketRows(ctx, t, fc, mem, []byte(tc.ticket))
		wantCode(t, err, tc.code, tc.says)
	}
	if after := fmt.Sprint(mustQuery(t, cn, "SELECT count(*) AS n FROM a.t"), mustQuery(t, cn, "SELECT count(*) AS n FROM system.tables")); after != before {
		t.Errorf("refused tickets changed the data: %s, was %s", after, before)
	}
	checkHealth(t, srv.Addr)
}
