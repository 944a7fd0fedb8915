package integration

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// timedRecord is rows of idSchema with ids from.. and the given times.
func timedRecord(mem memory.Allocator, from int64, times ...time.Time) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, idSchema)
	defer b.Release()
	for i, at := range times {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixNano()))
		b.Field(1).(*array.Int64Builder).Append(from + int64(i))
		b.Field(2).(*array.Float64Builder).Append(1)
		b.Field(3).(*array.StringBuilder).Append("h")
	}
	return b.NewRecordBatch()
}

// repeatTime is n copies of at.
func repeatTime(at time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = at
	}
	return out
}

// databaseAction runs apron.database.update with body.
func databaseAction(ctx context.Context, c flight.Client, body any) (map[string]string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: "apron.database.update", Body: b})
	if err != nil {
		return nil, err
	}
	var out map[string]string
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			return nil, err
		}
	}
}

// TestRetention: rows older than a database's retention (or the server's
// --retention) are left out of SQL (through DuckDB and direct scans),
// plain Flight reads and counts, before and after persistence and across
// a restart; the setting is durable and shown in system.databases; bad
// settings are refused and change nothing.
func TestRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s", "--retention", "30d")
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	now := time.Now()
	ingest := func(db string, rec arrow.RecordBatch) {
		t.Helper()
		defer rec.Release()
		if _, err := sqlIngest(ctx, c, db, "t", rec); err != nil {
			t.Fatalf("ingest into %s.t: %v", db, err)
		}
	}
	ingest("ret", timedRecord(mem, 0, repeatTime(now.Add(-10*24*time.Hour), 100)...))                                // old
	ingest("ret", timedRecord(mem, 100, repeatTime(now.Add(-time.Hour), 100)...))                                    // recent
	ingest("ret", timedRecord(mem, 200, append(repeatTime(now.Add(-10*24*time.Hour), 5), repeatTime(now, 5)...)...)) // both in one chunk
	ingest("fresh", timedRecord(mem, 0, append(repeatTime(now.Add(-40*24*time.Hour), 7), repeatTime(now, 3)...)...))

	counts := func(when string, db string, want int64) {
		t.Helper()
		sqlCount := queryOne(t, srv.Addr, "SELECT count(*) AS n FROM "+db+".t")["n"].(int64)
		rows, err := sqlExecute(ctx, t, c, "SELECT * FROM "+db+".t") // a direct scan when no chunk straddles the cutoff
		if err != nil {
			t.Fatal(err)
		}
		old := queryOne(t, srv.Addr, "SELECT count(*) AS n FROM "+db+".t WHERE time < now() - INTERVAL 35 DAY")["n"].(int64)
		plain := readTable(t, srv.Addr, db, "t").NumRows()
		if sqlCount != want || int64(len(rows)) != want || int64(plain) != want || old != 0 {
			t.Fatalf("%s: %s.t: count(*) %d, SELECT * %d rows, plain Flight %d rows, rows past 35 days %d; want %d",
				when, db, sqlCount, len(rows), plain, old, want)
		}
	}
	counts("default 30d", "ret", 210)
	counts("default 30d", "fresh", 3)
	r := queryOne(t, srv.Addr, "SELECT retention, effective_retention FROM system.databases WHERE database_name = 'ret'")
	if r["retention"] != "default" || r["effective_retention"] != "30d" {
		t.Fatalf("system.databases: %v", r)
	}

	fc := flightClient(t, srv.Addr)
	got, err := databaseAction(ctx, fc, map[string]any{"database": "ret", "retention": "7d"})
	if err != nil {
		t.Fatal(err)
	}
	if got["retention"] != "7d" || got["effective_retention"] != "7d" {
		t.Fatalf("apron.database.update answered %v", got)
	}
	counts("7d", "ret", 105)
	for _, bad := range []struct {
		body any
		code codes.Code
	}{
		{map[string]any{"database": "ret", "retention": "3s"}, codes.InvalidArgument},
		{map[string]any{"database": "ret", "retention": "soon"}, codes.InvalidArgument},
		{map[string]any{"database": "ret", "retention": "1d", "colour": 1}, codes.InvalidArgument},
		{map[string]any{"database": "ret"}, codes.InvalidArgument},
		{map[string]any{"database": "nope", "retention": "1d"}, codes.NotFound},
	} {
		_, err := databaseAction(ctx, fc, bad.body)
		wantCode(t, err, bad.code)
	}
	counts("7d, after refusals", "ret", 105)

	// Persisted (partitions wholly expired are not written), and after a
	// restart, the same.
	deadline := time.Now().Add(30 * time.Second)
	for queryOne(t, srv.Addr, "SELECT count(*) AS n FROM system.segments WHERE state <> 'persisted' AND rows > 0")["n"].(int64) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("segments not persisted after 30s; stderr:\n%s", srv.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
	counts("7d, persisted", "ret", 105)
	counts("default 30d, persisted", "fresh", 3)
	srv.Kill(t)
	srv = startServer(t, dir, "--segment-duration", "1s", "--retention", "30d")
	c = sqlClient(t, srv.Addr, mem)
	counts("7d, after kill -9", "ret", 105)
	counts("default 30d, after kill -9", "fresh", 3)
	r = queryOne(t, srv.Addr, "SELECT retention, effective_retention FROM system.databases WHERE database_name = 'ret'")
	if r["retention"] != "7d" || r["effective_retention"] != "7d" {
		t.Fatalf("system.databases after restart: %v", r)
	}
	// "none" overrides the server's default.
	if _, err := databaseAction(ctx, flightClient(t, srv.Addr), map[string]any{"database": "fresh", "retention": "none"}); err != nil {
		t.Fatal(err)
	}
	r = queryOne(t, srv.Addr, "SELECT retention, effective_retention FROM system.databases WHERE database_name = 'fresh'")
	if r["retention"] != "none" || r["effective_retention"] != "none" {
		t.Fatalf("system.databases after none: %v", r)
	}
}
