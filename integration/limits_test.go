//go:build duckdb_arrow

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// TestPreparedFloodIsPerClient: a client that opens prepared statements
// without closing them is refused at its own bound, while another client
// still prepares and queries.
func TestPreparedFloodIsPerClient(t *testing.T) {
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t)
	flooder := sqlClient(t, srv.Addr, nil)
	var open []*flightsql.PreparedStatement
	defer func() {
		for _, p := range open {
			p.Close(context.Background())
		}
	}()
	var err error
	for i := 0; i <= 1000; i++ {
		var p *flightsql.PreparedStatement
		if p, err = flooder.Prepare(ctx, fmt.Sprintf("SELECT %d", i)); err != nil {
			break
		}
		open = append(open, p)
	}
	if len(open) != 1000 {
		t.Fatalf("the flooding client opened %d prepared statements before being refused (%v), want 1000", len(open), err)
	}
	wantCode(t, err, codes.ResourceExhausted, "others are not affected")

	other := sqlClient(t, srv.Addr, nil)
	p, err := other.Prepare(ctx, "SELECT 42 AS x")
	if err != nil {
		t.Fatalf("another client's Prepare while the flooder is at its bound: %v", err)
	}
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := other.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
	}
	rdr.Release()
	p.Close(ctx)
	if _, err := sqlExecute(ctx, t, other, "SELECT 1 AS x"); err != nil {
		t.Errorf("another client's query: %v", err)
	}
	// Closing one gives the flooder room for one.
	open[0].Close(ctx)
	open = open[1:]
	if p, err := flooder.Prepare(ctx, "SELECT 1"); err != nil {
		t.Errorf("after closing one: %v", err)
	} else {
		open = append(open, p)
	}
}

// stalledQuery starts a large query through c, reads its first batch and
// then stops reading; the returned reader is read later.
func stalledQuery(t *testing.T, ctx context.Context, c *flightsql.Client) *flight.Reader {
	t.Helper()
	info, err := c.Execute(ctx, "SELECT i, i * 2 AS j FROM range(1000000000) t(i)")
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
	return rdr
}

// TestIdleReadersLoseTheirSlots: clients that start queries and stop
// reading hold every --max-concurrent-queries slot; the health check and
// system.queries still answer, the idle queries are cancelled after
// --query-idle-timeout, a new query gets a slot, and each idle client,
// when it reads again, gets DEADLINE_EXCEEDED (not a result cut short).
func TestIdleReadersLoseTheirSlots(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--max-concurrent-queries", "2", "--query-idle-timeout", "1s")
	ctx := testCtx(t)
	var stalled []*flight.Reader
	for range 2 {
		stalled = append(stalled, stalledQuery(t, ctx, sqlClient(t, srv.Addr, nil)))
	}
	checkHealth(t, srv.Addr)
	c := sqlClient(t, srv.Addr, nil)
	rows, err := sqlExecute(ctx, t, c, "SELECT count(*) AS n FROM system.queries")
	if err != nil {
		t.Fatalf("system.queries while every slot is held: %v", err)
	}
	if n := rows[0]["n"].(int64); n < 2 {
		t.Errorf("system.queries shows %d queries, want the 2 stalled ones (and itself)", n)
	}
	start := time.Now()
	rows, err = sqlExecute(ctx, t, c, "SELECT 42 AS x")
	if err != nil {
		t.Fatalf("a new query after the idle ones were cancelled: %v", err)
	}
	t.Logf("a new query got a slot after %s", time.Since(start).Round(time.Millisecond))
	// Both stalled queries are cancelled (each a second after its own
	// stream stalled) before their clients read on: a client that reads
	// again before that is not idle any more.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(srv.Stderr(), "query cancelled: its client took no result batch in time") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled queries were not both cancelled (and logged) within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, rdr := range stalled {
		for rdr.Next() {
		}
		wantCode(t, rdr.Err(), codes.DeadlineExceeded, "--query-idle-timeout")
		rdr.Release()
	}
}

// serverCPU is the CPU time the server process has used.
func serverCPU(t testing.TB, srv *server) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Fields after the command name (in parentheses, which may hold spaces).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// TestCancelledQueryStopsWithinASecond: a query cancelled by its client,
// or stopped by --query-timeout, stops using CPU within a second; an
// expression too deep to bind in time is refused at once.
func TestCancelledQueryStopsWithinASecond(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--query-timeout", "3s")
	c := sqlClient(t, srv.Addr, nil)
	const heavy = "SELECT sum(hash(i * j)) AS s FROM range(100000) a(i), range(100000) b(j)"

	// Cancelled by the client.
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := sqlExecute(ctx, t, c, heavy)
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-errc
	idle(t, srv, "after the client cancelled")

	// Stopped by the timeout.
	start := time.Now()
	_, err := sqlExecute(testCtx(t), t, c, heavy)
	wantCode(t, err, codes.DeadlineExceeded, "--query-timeout")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the query timeout of 3s answered after %s", d)
	}
	idle(t, srv, "after the query timeout")

	// Too deep to bind: refused, fast.
	start = time.Now()
	_, err = sqlExecute(testCtx(t), t, c, "SELECT "+strings.Repeat("abs(", 900)+"1"+strings.Repeat(")", 900))
	wantCode(t, err, codes.InvalidArgument)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a 900-deep expression took %s to refuse", d)
	}
	idle(t, srv, "after the deep expression")
	checkHealth(t, srv.Addr)
}

// idle waits a second for the server to stop working, then checks it used
// less than a fifth of a core over the next second.
func idle(t *testing.T, srv *server, when string) {
	t.Helper()
	time.Sleep(time.Second)
	before := serverCPU(t, srv)
	time.Sleep(time.Second)
	if used := serverCPU(t, srv) - before; used > 200*time.Millisecond {
		t.Errorf("%s: the server used %s of CPU in the second that followed the first", when, used)
	}
}

// TestValueSizeAndTimeRange: a value over --max-value-size, or a time DuckDB
// cannot represent, is refused with nothing written.
func TestValueSizeAndTimeRange(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--max-value-size", "1KiB")
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "payload", Type: arrow.BinaryTypes.String}}, nil)
	build := func(ts int64, payload string) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime))
		b.Field(1).(*array.StringBuilder).Append("small")
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		b.Field(1).(*array.StringBuilder).Append(payload)
		return b.NewRecordBatch()
	}
	big := build(baseTime, strings.Repeat("x", 2000))
	_, err := sqlIngest(ctx, c, "lim", "t", big)
	big.Release()
	wantCode(t, err, codes.InvalidArgument, `"payload"`, "row 1", "--max-value-size")
	late := build(9223372036854775807, "y")
	_, err = sqlIngest(ctx, c, "lim", "t", late)
	late.Release()
	wantCode(t, err, codes.InvalidArgument, `"time"`, "row 1", "outside")
	if state := catalogState(t, srv.Addr); strings.Contains(state, "lim") {
		t.Errorf("a refused batch created its database: %s", state)
	}
	ok := build(baseTime+1, strings.Repeat("z", 1024))
	if _, err := sqlIngest(ctx, c, "lim", "t", ok); err != nil {
		t.Errorf("a value at the limit: %v", err)
	}
	ok.Release()
}
