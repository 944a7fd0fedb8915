package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// TestIngestModes covers the ADBC ingest modes.
func TestIngestModes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	cn := adbcConn(t, srv.Addr, mem)
	ctx := testCtx(t)
	r0 := idRecord(mem, 0, 10)
	r1 := idRecord(mem, 10, 5)
	defer release(r0, r1)

	t.Run("create", func(t *testing.T) {
		n, err := adbcIngest(ctx, cn, "modes", "t", adbc.OptionValueIngestModeCreate, r0)
		if err != nil || n != 10 {
			t.Fatalf("create: got (%d, %v), want (10, nil)", n, err)
		}
	})
	t.Run("create existing fails AlreadyExists", func(t *testing.T) {
		_, err := adbcIngest(ctx, cn, "modes", "t", adbc.OptionValueIngestModeCreate, r1)
		wantADBC(t, err, adbc.StatusAlreadyExists)
	})
	t.Run("default mode is create", func(t *testing.T) {
		_, err := adbcIngest(ctx, cn, "modes", "t", "", r1)
		wantADBC(t, err, adbc.StatusAlreadyExists)
	})
	t.Run("append missing fails NotFound", func(t *testing.T) {
		_, err := adbcIngest(ctx, cn, "modes", "missing", adbc.OptionValueIngestModeAppend, r1)
		wantADBC(t, err, adbc.StatusNotFound, "missing")
	})
	t.Run("append missing database fails NotFound", func(t *testing.T) {
		_, err := adbcIngest(ctx, cn, "nodb", "t", adbc.OptionValueIngestModeAppend, r1)
		wantADBC(t, err, adbc.StatusNotFound)
	})
	t.Run("append", func(t *testing.T) {
		n, err := adbcIngest(ctx, cn, "modes", "t", adbc.OptionValueIngestModeAppend, r1)
		if err != nil || n != 5 {
			t.Fatalf("append: got (%d, %v), want (5, nil)", n, err)
		}
	})
	t.Run("create_append", func(t *testing.T) {
		for _, tbl := range []string{"t", "ca"} {
			n, err := adbcIngest(ctx, cn, "modes", tbl, adbc.OptionValueIngestModeCreateAppend, r1)
			if err != nil || n != 5 {
				t.Fatalf("create_append into %s: got (%d, %v), want (5, nil)", tbl, n, err)
			}
		}
	})
	t.Run("replace", func(t *testing.T) {
		// modes.r is 10 rows, then replaced by 5; new_by_replace is made.
		if _, err := adbcIngest(ctx, cn, "modes", "r", adbc.OptionValueIngestModeCreate, r0); err != nil {
			t.Fatal(err)
		}
		for _, tbl := range []string{"r", "new_by_replace"} {
			n, err := adbcIngest(ctx, cn, "modes", tbl, adbc.OptionValueIngestModeReplace, r1)
			if err != nil || n != 5 {
				t.Fatalf("replace into %s: got (%d, %v), want (5, nil)", tbl, n, err)
			}
		}
	})
	t.Run("no database", func(t *testing.T) {
		_, err := adbcIngest(ctx, cn, "", "t", adbc.OptionValueIngestModeCreateAppend, r1)
		wantADBC(t, err, adbc.StatusInvalidArgument, "database")
	})
	if t.Failed() {
		return
	}
	want := "modes.ca (time:timestamp[ns], id:int64, value:float64, tag:utf8) rows=5\n" +
		"modes.new_by_replace (time:timestamp[ns], id:int64, value:float64, tag:utf8) rows=5\n" +
		"modes.r (time:timestamp[ns], id:int64, value:float64, tag:utf8) rows=5\n" +
		"modes.t (time:timestamp[ns], id:int64, value:float64, tag:utf8) rows=20"
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog:\n%s\nwant:\n%s", got, want)
	}
	srv = srv.Restart(t)
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog after restart:\n%s\nwant:\n%s", got, want)
	}
}

// TestIngestDatabaseHeader names the database with a "database" gRPC header
// instead of the ingest command's db schema.
func TestIngestDatabaseHeader(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := sqlClient(t, srv.Addr, mem)
	rec := idRecord(mem, 0, 3)
	defer rec.Release()

	_, err := sqlIngest(testCtx(t), c, "", "t", rec)
	wantCode(t, err, codes.InvalidArgument, "database")

	ctx := metadata.AppendToOutgoingContext(testCtx(t), "database", "fromheader")
	n, err := sqlIngest(ctx, c, "", "t", rec)
	if err != nil || n != 3 {
		t.Fatalf("ingest with a database header: got (%d, %v), want (3, nil)", n, err)
	}
	wantIDRange(t, readTable(t, srv.Addr, "fromheader", "t"), 0, 3)
}

// TestFlightDoPut writes with plain Flight DoPut and checks the PutResult of
// every batch.
func TestFlightDoPut(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := flightClient(t, srv.Addr)
	ctx := testCtx(t)

	recs := []arrow.RecordBatch{idRecord(mem, 0, 100), idRecord(mem, 100, 50), idRecord(mem, 150, 1)}
	defer release(recs...)
	res, err := flightPut(ctx, c, []string{"plain", "cpu"}, mem, recs...)
	if err != nil {
		t.Fatalf("DoPut: %v", err)
	}
	if len(res) != 3 {
		t.Fatalf("got %d PutResults, want one per batch (3): %v", len(res), res)
	}
	total := int64(0)
	for i, r := range res {
		total += recs[i].NumRows()
		if r.RowsWritten != recs[i].NumRows() || r.TotalRowsWritten != total {
			t.Errorf("PutResult %d = %v, want rows_written %d total_rows_written %d", i, r, recs[i].NumRows(), total)
		}
		if i > 0 && r.Sequence <= res[i-1].Sequence {
			t.Errorf("PutResult %d sequence %d does not follow %d", i, r.Sequence, res[i-1].Sequence)
		}
	}
	// A second stream appends.
	more := idRecord(mem, 151, 9)
	defer more.Release()
	res2, err := flightPut(ctx, c, []string{"plain", "cpu"}, mem, more)
	if err != nil || len(res2) != 1 || res2[0].RowsWritten != 9 || res2[0].TotalRowsWritten != 9 {
		t.Fatalf("second DoPut: got %v, %v; want one PutResult of 9 rows", res2, err)
	}
	if res2[0].Sequence <= res[2].Sequence {
		t.Errorf("second stream's sequence %d does not follow %d", res2[0].Sequence, res[2].Sequence)
	}
	d := readTable(t, srv.Addr, "plain", "cpu")
	wantIDRange(t, d, 0, 160)
	for _, r := range d.Rows {
		id := r["id"].(int64)
		if r["time"] != baseTime+id*int64(time.Second) || r["value"] != float64(id)/2 || r["tag"] != fmt.Sprintf("tag%d", id%7) {
			t.Fatalf("row %v does not hold what was written", r)
		}
	}
	srv = srv.Restart(t)
	wantIDRange(t, readTable(t, srv.Addr, "plain", "cpu"), 0, 160)
}

// TestTimeNanosecondsDistinct writes 10,000 rows 1ns apart: they must stay
// distinct through ingest, replay and reads.
func TestTimeNanosecondsDistinct(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	cn := adbcConn(t, srv.Addr, mem)
	const n = 10000
	sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "i", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	for i := 0; i < n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + int64(i)))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if got, err := adbcIngest(testCtx(t), cn, "ns", "t", adbc.OptionValueIngestModeCreate, rec); err != nil || got != n {
		t.Fatalf("ingest: got (%d, %v), want (%d, nil)", got, err, n)
	}
	check := func(when string) {
		d := readTable(t, srv.Addr, "ns", "t")
		if d.NumRows() != n {
			t.Fatalf("%s: got %d rows, want %d", when, d.NumRows(), n)
		}
		seen := make(map[int64]bool, n)
		for _, r := range d.Rows {
			ts := r["time"].(int64)
			if ts != baseTime+r["i"].(int64) {
				t.Fatalf("%s: row i=%v has time %d, want %d", when, r["i"], ts, baseTime+r["i"].(int64))
			}
			if seen[ts] {
				t.Fatalf("%s: time %d appears twice", when, ts)
			}
			seen[ts] = true
		}
	}
	check("after ingest")
	srv = srv.Restart(t)
	check("after restart")
	srv.Kill(t)
	srv = startServer(t, srv.DataDir)
	check("after SIGKILL and replay")
}

// TestTimeConversion sends time in other units and zones: the server stores
// the same instant as UTC nanoseconds without zone.
func TestTimeConversion(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)
	instant := time.Date(2024, 7, 4, 12, 30, 15, 123_000_000, time.UTC) // a summer instant
	cases := []struct {
		name string
		typ  *arrow.TimestampType
		val  int64
	}{
		{"ms_new_york", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}, instant.UnixMilli()},
		{"s_utc", &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, instant.Unix()},
		{"us_none", &arrow.TimestampType{Unit: arrow.Microsecond}, instant.UnixMicro()},
		{"ns_tokyo", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Asia/Tokyo"}, instant.UnixNano()},
	}
	for _, tc := range cases {
		sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tc.typ}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(tc.val))
		b.Field(1).(*array.Int64Builder).Append(1)
		rec := b.NewRecordBatch()
		b.Release()
		_, err := sqlIngest(ctx, c, "tz", tc.name, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("%s: ingest: %v", tc.name, err)
		}
	}
	for _, when := range []string{"before restart", "after restart"} {
		if when == "after restart" {
			srv = srv.Restart(t)
		}
		for _, tc := range cases {
			d := readTable(t, srv.Addr, "tz", tc.name)
			if f := d.Schema.Field(0); f.Name != "time" || !arrow.TypeEqual(f.Type, tsNs) {
				t.Errorf("%s %s: first column %s %s, want time timestamp[ns] without zone", tc.name, when, f.Name, f.Type)
			}
			want := tc.val * int64(tc.typ.Unit.Multiplier())
			if d.NumRows() != 1 || d.Rows[0]["time"] != want {
				t.Errorf("%s %s: got rows %v, want time %d", tc.name, when, d.Rows, want)
			}
		}
	}
}

// TestTimeMissing writes a batch without a time column: every row gets the
// server's current time.
func TestTimeMissing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := flightClient(t, srv.Addr)
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := jsonRecord(t, mem, sc, `[{"v":1},{"v":2},{"v":3}]`)
	defer rec.Release()
	before := time.Now().UnixNano()
	if _, err := flightPut(testCtx(t), c, []string{"notime", "t"}, mem, rec); err != nil {
		t.Fatalf("DoPut: %v", err)
	}
	after := time.Now().UnixNano()
	d := readTable(t, srv.Addr, "notime", "t")
	if d.Schema.Field(0).Name != "time" || !arrow.TypeEqual(d.Schema.Field(0).Type, tsNs) {
		t.Errorf("schema %s: want time timestamp[ns] first", d.Schema)
	}
	if d.NumRows() != 3 {
		t.Fatalf("got %d rows, want 3", d.NumRows())
	}
	first := d.Rows[0]["time"]
	for _, r := range d.Rows {
		ts, _ := r["time"].(int64)
		if ts < before || ts > after {
			t.Errorf("row %v: time %d is not the server's time (between %d and %d)", r, ts, before, after)
		}
		if r["time"] != first {
			t.Errorf("rows of one batch got different times: %v vs %v", r["time"], first)
		}
	}
}

// TestSegmentRollover writes over ~3s with 1s segments: reads span several
// segments (endpoints) and stay complete after a restart.
func TestSegmentRollover(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir(), "--segment-duration", "1s")
	c := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	const batches, rows = 15, 20
	for i := 0; i < batches; i++ {
		rec := idRecord(mem, int64(i*rows), rows)
		_, err := flightPut(ctx, c, []string{"roll", "t"}, mem, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		time.Sleep(200 * time.Millisecond) // spread the load over ~3s
	}
	d := readTable(t, srv.Addr, "roll", "t")
	if d.Endpoints < 2 {
		t.Errorf("GetFlightInfo has %d endpoints after writing for ~3s with 1s segments, want more than one", d.Endpoints)
	}
	wantIDRange(t, d, 0, batches*rows)
	srv = srv.Restart(t)
	d = readTable(t, srv.Addr, "roll", "t")
	if d.Endpoints < 2 {
		t.Errorf("after restart: %d endpoints, want more than one", d.Endpoints)
	}
	wantIDRange(t, d, 0, batches*rows)
}

// TestWALSyncNone runs with --wal-sync none.
func TestWALSyncNone(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir(), "--wal-sync", "none")
	cn := adbcConn(t, srv.Addr, mem)
	for i := int64(0); i < 5; i++ {
		rec := idRecord(mem, i*100, 100)
		_, err := adbcIngest(testCtx(t), cn, "nosync", "t", adbc.OptionValueIngestModeCreateAppend, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("ingest %d: %v", i, err)
		}
	}
	wantIDRange(t, readTable(t, srv.Addr, "nosync", "t"), 0, 500)
	srv = srv.Restart(t)
	wantIDRange(t, readTable(t, srv.Addr, "nosync", "t"), 0, 500)
}

// TestFlagsFromEnvironment sets flags through APRON_* variables.
func TestFlagsFromEnvironment(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	srv := startServerEnv(t, []string{"APRON_DATA_DIR=" + dir, "APRON_ADDR=127.0.0.1:0", "APRON_METRICS_ADDR=", "APRON_MAX_TABLES=1", "APRON_WITHOUT_AUTH=true"},
		[]string{"serve"}, dir)
	c := sqlClient(t, srv.Addr, mem)
	rec := idRecord(mem, 0, 1)
	defer rec.Release()
	if _, err := sqlIngest(testCtx(t), c, "env", "a", rec); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	_, err := sqlIngest(testCtx(t), c, "env", "b", rec)
	wantCode(t, err, codes.ResourceExhausted, "--max-tables")
	if _, err := os.Stat(dir + "/wal"); err != nil {
		t.Errorf("APRON_DATA_DIR not used: %v", err)
	}
}

// TestIngestEmptyCreate creates a table from a stream without rows.
func TestIngestEmptyCreate(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	cn := adbcConn(t, srv.Addr, mem)
	rec := idRecord(mem, 0, 0)
	defer rec.Release()
	n, err := adbcIngest(testCtx(t), cn, "empty", "t", adbc.OptionValueIngestModeCreate, rec)
	if err != nil || n != 0 {
		t.Fatalf("create with no rows: got (%d, %v), want (0, nil)", n, err)
	}
	want := "empty.t (time:timestamp[ns], id:int64, value:float64, tag:utf8) rows=0"
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog:\n%s\nwant:\n%s", got, want)
	}
	_, err = adbcIngest(testCtx(t), cn, "empty", "t", adbc.OptionValueIngestModeCreate, rec)
	wantADBC(t, err, adbc.StatusAlreadyExists)
	srv = srv.Restart(t)
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog after restart:\n%s\nwant:\n%s", got, want)
	}
}

// TestJSONLogs runs with --log-format json --log-level debug.
func TestJSONLogs(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--log-format", "json", "--log-level", "debug")
	putIDs(t, srv.Addr, "j", "t", 0, 10, 10, 0)
	wantIDRange(t, readTable(t, srv.Addr, "j", "t"), 0, 10)
	srv.Stop(t)
	for _, line := range strings.Split(strings.TrimSpace(srv.Stderr()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("log line is not JSON: %q", line)
		}
	}
}

// TestBufferMemLimit fills a small buffer: writes past --buffer-mem-limit
// get ResourceExhausted naming the flag, and what was acknowledged stays.
func TestBufferMemLimit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	// Without an object store nothing leaves memory, so the limit must be
	// reached. (With one, buffer tests cover the limit while persistence
	// fails: TestPersistStoreDown.)
	srv := startServer(t, t.TempDir(), "--buffer-mem-limit", "1MiB", "--object-store", "none")
	c := sqlClient(t, srv.Addr, mem)
	var written int64
	var err error
	for i := 0; i < 500 && err == nil; i++ {
		rec := idRecord(mem, written, 1000)
		_, err = sqlIngest(testCtx(t), c, "full", "t", rec)
		rec.Release()
		if err == nil {
			written += 1000
		}
	}
	if err == nil {
		t.Fatalf("%d rows written into a 1 MiB buffer without an error", written)
	}
	wantCode(t, err, codes.ResourceExhausted, "--buffer-mem-limit")
	t.Logf("%d rows written before: %v", written, err)
	wantIDRange(t, readTable(t, srv.Addr, "full", "t"), 0, written)
	checkHealth(t, srv.Addr)
}
