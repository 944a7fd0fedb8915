package integration

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// TestSQLBigResult streams 2M rows to a client with gRPC's default 4 MiB
// receive limit, cancels DoGets part way, and checks that the cancelled
// queries gave their connections back (two may run at once here).
func TestSQLBigResult(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 2M rows")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir(), "--max-concurrent-queries", "2", "--wal-sync", "none")
	const total, per = 2_000_000, 250_000
	wc := sqlClient(t, srv.Addr, mem)
	for from := int64(0); from < total; from += per {
		r := idRecord(mem, from, per)
		_, err := sqlIngest(testCtx(t), wc, sqlDB, "big", r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	// A client with gRPC's default limits (4 MiB per received message).
	c, err := flightsql.NewClient(srv.Addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Alloc = mem

	count := func(t *testing.T, sql string) (rows, batches int64) {
		t.Helper()
		info, err := c.Execute(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
			batches++
		}
		if err := rdr.Err(); err != nil {
			t.Fatalf("after %d rows: %v", rows, err)
		}
		return rows, batches
	}
	t.Run("stream all", func(t *testing.T) {
		rows, batches := count(t, `SELECT * FROM sqldb.big`)
		if rows != total {
			t.Errorf("streamed %d rows, want %d", rows, total)
		}
		t.Logf("%d rows in %d batches", rows, batches)
	})
	t.Run("wide rows", func(t *testing.T) {
		// A 2048-row DuckDB chunk of these is ~8 MiB: the server must cut
		// it for a client that takes 4 MiB messages.
		rows, batches := count(t, `SELECT id, repeat(tag, 1000) AS wide FROM sqldb.big WHERE id < 20000`)
		if rows != 20000 {
			t.Errorf("streamed %d rows, want 20000", rows)
		}
		t.Logf("%d wide rows in %d batches", rows, batches)
	})

	t.Run("cancelled DoGet", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			qctx, cancel := context.WithCancel(ctx)
			info, err := c.Execute(qctx, `SELECT * FROM sqldb.big ORDER BY value DESC`)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			rdr, err := c.DoGet(qctx, info.Endpoint[0].Ticket)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if !rdr.Next() {
				t.Fatalf("no first batch: %v", rdr.Err())
			}
			cancel()
			for rdr.Next() {
			}
			rdr.Release()
		}
		// The three cancelled queries freed their connections: with
		// --max-concurrent-queries 2, a leak would make this wait 5s and
		// fail with RESOURCE_EXHAUSTED.
		start := time.Now()
		rows, err := sqlExecute(ctx, t, c, `SELECT count(*) AS n FROM sqldb.big`)
		if err != nil {
			t.Fatal(err)
		}
		wantValues(t, "count", column(rows, "n"), int64(total))
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("query after cancelled ones took %s", d)
		}
		checkHealth(t, srv.Addr)
	})

	t.Run("CancelFlightInfo", func(t *testing.T) {
		info, err := c.Execute(ctx, `SELECT * FROM sqldb.big`)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		if !rdr.Next() {
			t.Fatalf("no first batch: %v", rdr.Err())
		}
		res, err := c.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetStatus() != flight.CancelStatusCancelled {
			t.Errorf("CancelFlightInfo status = %v", res.GetStatus())
		}
		n := int64(0)
		for rdr.Next() {
			n += rdr.RecordBatch().NumRows()
		}
		wantCode(t, rdr.Err(), codes.Canceled)
		rdr.Release()
		if n >= total {
			t.Errorf("read all %d rows after the cancel", n)
		}
		// A cancelled ticket stays cancelled.
		rdr, err = c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err == nil {
			for rdr.Next() {
			}
			err = rdr.Err()
			rdr.Release()
		}
		wantCode(t, err, codes.Canceled)

		// A ticket not fetched yet.
		info, err = c.Execute(ctx, `SELECT 1 AS one`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info}); err != nil {
			t.Fatal(err)
		}
		_, err = c.DoGet(ctx, info.Endpoint[0].Ticket)
		wantCode(t, err, codes.Canceled)
	})
}
