package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// replaceSchema is the new content of the replace tests: id changes type
// (int64 to utf8), value and tag go, extra comes.
var replaceSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: tsNs},
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "extra", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// replaceRecord is rows from..from+n-1 of replaceSchema: extra i, id
// "r<i>", time baseTime + i ms.
func replaceRecord(mem memory.Allocator, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, replaceSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + i*int64(time.Millisecond)))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		b.Field(2).(*array.Int64Builder).Append(i)
	}
	return b.NewRecordBatch()
}

// tableColumns is db.table's columns as system.columns shows them.
func tableColumns(t testing.TB, cn adbc.Connection, db, table string) string {
	t.Helper()
	rows := mustQuery(t, cn, "SELECT column_name || ':' || data_type AS c FROM system.columns WHERE database_name = '"+db+
		"' AND table_name = '"+table+"' ORDER BY ordinal_position")
	var cols []string
	for _, r := range rows {
		cols = append(cols, r["c"].(string))
	}
	return strings.Join(cols, ",")
}

// wantReplaced checks that db.table is exactly rows lo..hi-1 of
// replaceRecord, with its columns.
func wantReplaced(t testing.TB, addr, db, table string, lo, hi int64, when string) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, addr, mem)
	defer cn.Close()
	if got, want := tableColumns(t, cn, db, table), "time:TIMESTAMP_NS,id:VARCHAR,extra:BIGINT"; got != want {
		t.Fatalf("%s: columns %s, want %s", when, got, want)
	}
	r := mustQuery(t, cn, "SELECT count(*) AS n, count(DISTINCT id) AS ids, min(extra) AS lo, max(extra) AS hi, CAST(sum(extra) AS BIGINT) AS s FROM "+db+"."+table)[0]
	n := hi - lo
	if r["n"] != n || r["ids"] != n || r["lo"] != lo || r["hi"] != hi-1 || r["s"] != (lo+hi-1)*n/2 {
		t.Fatalf("%s: %s.%s is %v, want rows %d..%d of the replace", when, db, table, r, lo, hi-1)
	}
}

// TestReplace: ADBC ingest mode replace against the real binary. The
// stream becomes the table's whole content, with its columns and types,
// buffered and persisted rows of the old table gone; readers counting in
// a loop meanwhile see the old table or the new one, whole; a replace
// whose stream fails leaves the table as it was; a replace survives
// kill -9 right after it returned and a clean restart, and the old rows
// never come back.
func TestReplace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cn := adbcConn(t, srv.Addr, mem)
	defer cn.Close()

	written := writeBatches(t, srv.Addr, "rep", "t", 0, 4, 300*time.Millisecond)
	waitPersisted(t, srv, "rep", "t", written)
	writeBatches(t, srv.Addr, "rep", "t", 4, 1, 0) // and some buffered
	const oldN, newN = 5 * persistBatchRows, 1000
	oldCols := tableColumns(t, cn, "rep", "t")

	// A reader counting the rows in a loop, on a connection of its own.
	var (
		mu     sync.Mutex
		counts []int64
		rerr   error
	)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		rmem := memory.NewGoAllocator()
		rcn := adbcConn(t, srv.Addr, rmem)
		defer rcn.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rdr, err := adbcQuery(ctx, rcn, "SELECT count(*) AS n FROM rep.t")
			var n int64 = -1
			if err == nil {
				for rdr.Next() {
					n = rdr.RecordBatch().Column(0).(*array.Int64).Value(0)
				}
				err = rdr.Err()
				rdr.Release()
			}
			mu.Lock()
			if err != nil && rerr == nil {
				rerr = err
			}
			counts = append(counts, n)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	seen := func(n int64) bool {
		mu.Lock()
		defer mu.Unlock()
		return rerr != nil || (len(counts) > 0 && counts[len(counts)-1] == n)
	}
	waitUntil(t, "the reader to count the old table", func() bool { return seen(oldN) })

	// 40 batches a client sends over a second or so, while the reader
	// counts.
	var recs []arrow.RecordBatch
	for i := range int64(40) {
		recs = append(recs, replaceRecord(mem, i*25, 25))
	}
	n, err := adbcIngestReader(ctx, cn, "rep", "t", adbc.OptionValueIngestModeReplace, &pacedReader{recs: recs, pace: 25 * time.Millisecond})
	release(recs...)
	if err != nil || n != newN {
		t.Fatalf("replace: got (%d, %v), want (%d, nil)", n, err, newN)
	}
	waitUntil(t, "the reader to count the new table", func() bool { return seen(newN) })
	close(stop)
	<-readerDone
	if rerr != nil {
		t.Fatalf("the reader failed: %v", rerr)
	}
	for i, c := range counts {
		if c != oldN && c != newN {
			t.Fatalf("count %d of the reader is %d: neither the old table (%d rows) nor the new one (%d)", i, c, oldN, newN)
		}
		if i > 0 && c == oldN && counts[i-1] == newN {
			t.Fatalf("count %d of the reader is the old table's, after the new one's", i)
		}
	}
	t.Logf("the reader counted %d times", len(counts))
	wantReplaced(t, srv.Addr, "rep", "t", 0, newN, "after the replace")
	if oldCols == tableColumns(t, cn, "rep", "t") {
		t.Fatal("the columns did not change")
	}
	if st := parquetFileStats(t, srv.Addr, "rep", "t"); st.Rows > newN {
		t.Fatalf("system.parquet_files lists %d rows of rep.t: the old table's files are still there", st.Rows)
	}

	// A stream whose third batch is bad leaves the table as it was.
	nullable := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs, Nullable: true}, {Name: "id", Type: arrow.BinaryTypes.String}, {Name: "extra", Type: arrow.PrimitiveTypes.Int64}}, nil)
	bad := []arrow.RecordBatch{
		jsonRecord(t, mem, nullable, `[{"time":1,"id":"x","extra":1},{"time":2,"id":"y","extra":2}]`),
		jsonRecord(t, mem, nullable, `[{"time":3,"id":"z","extra":3}]`),
		jsonRecord(t, mem, nullable, `[{"time":4,"id":"w","extra":4},{"time":null,"id":"v","extra":5}]`),
	}
	_, err = adbcIngest(ctx, cn, "rep", "t", adbc.OptionValueIngestModeReplace, bad...)
	release(bad...)
	wantADBC(t, err, adbc.StatusInvalidArgument, "aborted", "as it was", "null")
	wantReplaced(t, srv.Addr, "rep", "t", 0, newN, "after a failed replace")

	// kill -9 right after a replace returned.
	recs = []arrow.RecordBatch{replaceRecord(mem, 1000, 40), replaceRecord(mem, 1040, 10)}
	if n, err := adbcIngest(ctx, cn, "rep", "t", adbc.OptionValueIngestModeReplace, recs...); err != nil || n != 50 {
		t.Fatalf("second replace: got (%d, %v)", n, err)
	}
	release(recs...)
	cn.Close()
	srv.Kill(t)
	srv = startServer(t, dir, "--segment-duration", "1s")
	wantReplaced(t, srv.Addr, "rep", "t", 1000, 1050, "after kill -9")
	waitPersisted(t, srv, "rep", "t", 50)
	wantReplaced(t, srv.Addr, "rep", "t", 1000, 1050, "persisted")
	srv = srv.Restart(t)
	wantReplaced(t, srv.Addr, "rep", "t", 1000, 1050, "after a clean restart")
}

// pacedReader yields its batches pace apart: a client that streams
// them as it makes them.
type pacedReader struct {
	recs []arrow.RecordBatch
	pace time.Duration
	i    int
}

func (r *pacedReader) Retain()                        {}
func (r *pacedReader) Release()                       {}
func (r *pacedReader) Schema() *arrow.Schema          { return r.recs[0].Schema() }
func (r *pacedReader) Record() arrow.RecordBatch      { return r.recs[r.i-1] }
func (r *pacedReader) RecordBatch() arrow.RecordBatch { return r.recs[r.i-1] }
func (r *pacedReader) Err() error                     { return nil }

func (r *pacedReader) Next() bool {
	if r.i == len(r.recs) {
		return false
	}
	if r.i > 0 {
		time.Sleep(r.pace)
	}
	r.i++
	return true
}

// adbcIngestReader is adbcIngest of the batches rdr yields.
func adbcIngestReader(ctx context.Context, cn adbc.Connection, db, table, mode string, rdr array.RecordReader) (int64, error) {
	st, err := cn.NewStatement()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	for k, v := range map[string]string{adbc.OptionKeyIngestTargetTable: table, adbc.OptionValueIngestTargetDBSchema: db, adbc.OptionKeyIngestMode: mode} {
		if err := st.SetOption(k, v); err != nil {
			return 0, err
		}
	}
	if err := st.BindStream(ctx, rdr); err != nil {
		return 0, err
	}
	return st.ExecuteUpdate(ctx)
}

// blockingReader yields its batches, then blocks until ctx ends: a client
// that stops in the middle of its stream.
type blockingReader struct {
	ctx  context.Context
	recs []arrow.RecordBatch
	i    int
	err  error
}

func (r *blockingReader) Retain()                        {}
func (r *blockingReader) Release()                       {}
func (r *blockingReader) Schema() *arrow.Schema          { return r.recs[0].Schema() }
func (r *blockingReader) Record() arrow.RecordBatch      { return r.recs[r.i-1] }
func (r *blockingReader) RecordBatch() arrow.RecordBatch { return r.recs[r.i-1] }
func (r *blockingReader) Err() error                     { return r.err }

func (r *blockingReader) Next() bool {
	if r.i < len(r.recs) {
		r.i++
		return true
	}
	<-r.ctx.Done()
	r.err = r.ctx.Err()
	return false
}

// segmentRows is the rows of every segment, buffered (hidden ones too)
// and persisted.
func segmentRows(t testing.TB, addr string) int64 {
	t.Helper()
	return queryOne(t, addr, "SELECT CAST(coalesce(sum(rows), 0) AS BIGINT) AS n FROM system.segments")["n"].(int64)
}

// TestReplaceKilledMidStream: kill -9 while a replace's stream is open,
// its first batches durable: after the restart the table is the old one,
// whole (buffered and persisted rows), the replace's rows never show, the
// table takes writes, and a replace then commits.
func TestReplaceKilledMidStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, "--segment-duration", "1s")
	written := writeBatches(t, srv.Addr, "rep", "k", 0, 2, 300*time.Millisecond)
	waitPersisted(t, srv, "rep", "k", written)
	writeBatches(t, srv.Addr, "rep", "k", 2, 1, 0)
	const oldN = 3 * persistBatchRows
	base := segmentRows(t, srv.Addr)

	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := []arrow.RecordBatch{replaceRecord(mem, 0, 200), replaceRecord(mem, 200, 200)}
	defer release(recs...)
	cctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := make(chan error, 1)
	// The Flight SQL client of arrow-go, not ADBC's driver: when the server
	// dies in the middle of a stream, the driver reads the call's header
	// metadata while gRPC still writes it (a data race in the client,
	// adbc v1.12.0 flightsql_bulk_ingest.go).
	c := sqlClient(t, srv.Addr, memory.NewGoAllocator())
	go func() {
		db := "rep"
		_, err := c.ExecuteIngest(cctx, &blockingReader{ctx: cctx, recs: recs}, &flightsql.ExecuteIngestOpts{
			TableDefinitionOptions: &flightsql.TableDefinitionOptions{
				IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
				IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionReplace,
			},
			Table: "k", Schema: &db})
		done <- err
	}()
	waitUntil(t, "the replace's batches in the buffer", func() bool { return segmentRows(t, srv.Addr) == base+400 })
	srv.Kill(t)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the replace cut by kill -9 succeeded")
	}

	srv = startServer(t, dir, "--segment-duration", "1s")
	if !strings.Contains(srv.Stderr(), "aborted a replace that the last run did not finish") {
		t.Errorf("no log line of the aborted replace; stderr:\n%s", srv.Stderr())
	}
	sqlTotals(t, srv.Addr, "rep", "k", oldN)
	cn := adbcConn(t, srv.Addr, mem)
	defer cn.Close()
	if got := tableColumns(t, cn, "rep", "k"); got != "time:TIMESTAMP_NS,id:BIGINT,value:DOUBLE,tag:VARCHAR" {
		t.Fatalf("columns after the restart: %s", got)
	}
	writeBatches(t, srv.Addr, "rep", "k", 3, 1, 0)
	sqlTotals(t, srv.Addr, "rep", "k", oldN+persistBatchRows)

	more := replaceRecord(mem, 0, 30)
	defer more.Release()
	if n, err := adbcIngest(testCtx(t), cn, "rep", "k", adbc.OptionValueIngestModeReplace, more); err != nil || n != 30 {
		t.Fatalf("replace after the restart: got (%d, %v)", n, err)
	}
	wantReplaced(t, srv.Addr, "rep", "k", 0, 30, "replaced after the restart")
	cn.Close()
	srv = srv.Restart(t)
	wantReplaced(t, srv.Addr, "rep", "k", 0, 30, "after a clean restart")
}

// TestPythonPandasReplace runs testdata/pandas_replace.py: Python's ADBC
// driver with mode="replace", and pandas DataFrame.to_sql with
// if_exists="replace", against the real server. APRON_TEST_PYTHON names a
// Python with adbc_driver_flightsql, pyarrow and pandas (test.sh makes one);
// without it, or without pandas, the test is skipped, saying so.
func TestPythonPandasReplace(t *testing.T) {
	py := os.Getenv("APRON_TEST_PYTHON")
	if py == "" {
		t.Skip("APRON_TEST_PYTHON is not set: no Python with adbc_driver_flightsql (test.sh sets one up)")
	}
	if out, err := exec.Command(py, "-c", "import pandas").CombinedOutput(); err != nil {
		t.Skipf("%s has no pandas: %v %s", py, err, out)
	}
	srv := startServer(t, t.TempDir())
	script, err := filepath.Abs(filepath.Join("testdata", "pandas_replace.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), py, script, srv.Addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python pandas client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
