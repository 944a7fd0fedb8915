package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	maxMsgSize   = 256 << 20
)

// logBuffer collects a server's stderr and wakes up whoever waits for a line.
type logBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{notify: make(chan struct{}, 1)} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// server is one running apron process.
type server struct {
	t       testing.TB
	Addr    string
	DataDir string
	args    []string
	cmd     *exec.Cmd
	log     *logBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
}

// readyRE matches the ready line in text and in JSON log format.
var readyRE = regexp.MustCompile(`msg="apron ready" addr=(\S+)|"msg":"apron ready".*?"addr":"([^"]+)"`)

func readyAddr(m []string) string {
	if m[1] != "" {
		return m[1]
	}
	return m[2]
}

// serverArgs returns the command line of `apron serve` on dataDir,
// without authentication (loopback only): the tests of everything but
// authentication run as a local user would with --without-auth.
func serverArgs(dataDir string, extra ...string) []string {
	return append(authServerArgs(dataDir, "--without-auth"), extra...)
}

// authServerArgs is serverArgs with authentication on (the default).
func authServerArgs(dataDir string, extra ...string) []string {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "", "--data-dir", dataDir}
	return append(args, extra...)
}

// launch starts the process without waiting for it to be ready.
func launch(t testing.TB, env []string, args []string) *server {
	t.Helper()
	s := &server{t: t, args: args, log: newLogBuffer(), done: make(chan struct{})}
	s.cmd = exec.Command(apronBin, args...)
	s.cmd.Stderr = s.log
	s.cmd.Stdout = s.log
	s.cmd.Env = append(os.Environ(), env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting apron: %v", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		if !s.exited() {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("stderr of apron %s:\n%s", strings.Join(s.args, " "), s.log.String())
		}
	})
	return s
}

// startServer starts apron on dataDir with extra flags and waits for its
// ready line.
func startServer(t testing.TB, dataDir string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, nil, serverArgs(dataDir, extra...), dataDir)
}

func startServerEnv(t testing.TB, env []string, args []string, dataDir string) *server {
	t.Helper()
	s := launch(t, env, args)
	s.DataDir = dataDir
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		if m := readyRE.FindStringSubmatch(s.log.String()); m != nil {
			s.Addr = readyAddr(m)
			return s
		}
		select {
		case <-s.log.notify:
		case <-s.done:
			if m := readyRE.FindStringSubmatch(s.log.String()); m != nil {
				t.Fatalf("apron exited right after becoming ready (%v); stderr:\n%s", s.waitErr, s.log.String())
			}
			t.Fatalf("apron exited before becoming ready (%v); stderr:\n%s", s.waitErr, s.log.String())
		case <-deadline.C:
			t.Fatalf("apron not ready after %s; stderr:\n%s", readyTimeout, s.log.String())
		}
	}
}

// startServerExpectFailure starts apron and expects it to exit without
// becoming ready. It returns the exit code and stderr.
func startServerExpectFailure(t testing.TB, dataDir string, extra ...string) (int, string) {
	t.Helper()
	s := launch(t, nil, serverArgs(dataDir, extra...))
	select {
	case <-s.done:
	case <-time.After(readyTimeout):
		t.Fatalf("apron neither exited nor failed after %s; stderr:\n%s", readyTimeout, s.log.String())
	}
	out := s.log.String()
	if readyRE.MatchString(out) {
		t.Errorf("apron became ready, want a startup failure; stderr:\n%s", out)
	}
	return s.cmd.ProcessState.ExitCode(), out
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *server) Stderr() string { return s.log.String() }

// Stop sends SIGTERM and requires a clean exit with code 0.
func (s *server) Stop(t testing.TB) {
	t.Helper()
	if s.exited() {
		t.Fatalf("apron already exited (%v); stderr:\n%s", s.waitErr, s.log.String())
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Fatalf("apron did not exit %s after SIGTERM; stderr:\n%s", stopTimeout, s.log.String())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("apron exited with code %d after SIGTERM (%v), want 0; stderr:\n%s", code, s.waitErr, s.log.String())
	}
}

// Kill sends SIGKILL and waits for the process to die.
func (s *server) Kill(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !s.exited() {
		t.Fatalf("SIGKILL: %v", err)
	}
	<-s.done
}

// Restart stops the server gracefully and starts a new one on the same data
// dir with the same flags plus extra.
func (s *server) Restart(t testing.TB, extra ...string) *server {
	t.Helper()
	s.Stop(t)
	return startServerEnv(t, nil, append(append([]string(nil), s.args...), extra...), s.DataDir)
}

// ---- clients ----

func grpcOpts() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
}

// flightClient is a plain Flight client, closed at the end of the test.
func flightClient(t testing.TB, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpcOpts()...)
	if err != nil {
		t.Fatalf("flight client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sqlClient is an arrow-go Flight SQL client, closed at the end of the test.
func sqlClient(t testing.TB, addr string, mem memory.Allocator) *flightsql.Client {
	t.Helper()
	c, err := flightsql.NewClient(addr, nil, nil, grpcOpts()...)
	if err != nil {
		t.Fatalf("flight sql client: %v", err)
	}
	if mem != nil {
		c.Alloc = mem
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// adbcConn opens an ADBC Flight SQL connection, closed at the end of the
// test.
func adbcConn(t testing.TB, addr string, mem memory.Allocator) adbc.Connection {
	t.Helper()
	drv := adbcflightsql.NewDriver(mem)
	db, err := drv.NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc+tcp://" + addr})
	if err != nil {
		t.Fatalf("adbc database: %v", err)
	}
	cn, err := db.Open(context.Background())
	if err != nil {
		db.Close()
		t.Fatalf("adbc connection: %v", err)
	}
	t.Cleanup(func() {
		cn.Close()
		db.Close()
	})
	return cn
}

// adbcIngest runs one ADBC bulk ingest of recs into db.table. mode "" leaves
// the driver's default; db "" sets no target db schema.
func adbcIngest(ctx context.Context, cn adbc.Connection, db, table, mode string, recs ...arrow.RecordBatch) (int64, error) {
	st, err := cn.NewStatement()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if err := st.SetOption(adbc.OptionKeyIngestTargetTable, table); err != nil {
		return 0, err
	}
	if db != "" {
		if err := st.SetOption(adbc.OptionValueIngestTargetDBSchema, db); err != nil {
			return 0, err
		}
	}
	if mode != "" {
		if err := st.SetOption(adbc.OptionKeyIngestMode, mode); err != nil {
			return 0, err
		}
	}
	rdr, err := array.NewRecordReader(recs[0].Schema(), recs)
	if err != nil {
		return 0, err
	}
	err = st.BindStream(ctx, rdr)
	rdr.Release()
	if err != nil {
		return 0, err
	}
	return st.ExecuteUpdate(ctx)
}

// sqlIngest runs a Flight SQL ExecuteIngest (create_append) and returns the
// count the server reported, also on error.
func sqlIngest(ctx context.Context, c *flightsql.Client, db, table string, recs ...arrow.RecordBatch) (int64, error) {
	rdr, err := array.NewRecordReader(recs[0].Schema(), recs)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	opts := &flightsql.ExecuteIngestOpts{
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend,
		},
		Table: table,
	}
	if db != "" {
		opts.Schema = &db
	}
	return c.ExecuteIngest(ctx, rdr, opts)
}

// flightPut writes recs (one schema) with a plain Flight DoPut to the PATH
// descriptor path and returns the decoded PutResult metadata it got back,
// with the stream's final error.
func flightPut(ctx context.Context, c flight.Client, path []string, mem memory.Allocator, recs ...arrow.RecordBatch) ([]*apronpb.PutResultMetadata, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: path})
	var werr error
	for _, r := range recs {
		if werr = w.Write(r); werr != nil {
			break
		}
	}
	cerr := w.Close()
	_ = stream.CloseSend()
	var out []*apronpb.PutResultMetadata
	for {
		res, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if err == nil && werr != nil && !errors.Is(werr, io.EOF) {
				err = werr
			}
			if err == nil && cerr != nil && !errors.Is(cerr, io.EOF) {
				err = cerr
			}
			return out, err
		}
		var md apronpb.PutResultMetadata
		if err := proto.Unmarshal(res.GetAppMetadata(), &md); err != nil {
			return out, fmt.Errorf("decoding PutResult metadata %x: %w", res.GetAppMetadata(), err)
		}
		out = append(out, &md)
	}
}

// ---- reading ----

// tableData is what a table read back holds, decoded to Go values.
type tableData struct {
	Schema    *arrow.Schema
	Endpoints int
	Rows      []map[string]any // column name -> value (nil for null)
}

func (d *tableData) NumRows() int { return len(d.Rows) }

// goValue turns one Arrow value into a comparable Go value: integers as
// int64 (or uint64), timestamps as int64 in their unit, strings, bools,
// floats, []byte as string.
func goValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Dictionary:
		return goValue(a.Dictionary(), a.GetValueIndex(i))
	}
	return arr.ValueStr(i)
}

// readTable reads db.table back through GetFlightInfo and a DoGet of every
// endpoint.
func readTable(t testing.TB, addr, db, table string) *tableData {
	t.Helper()
	d, err := tryReadTable(t, addr, db, table)
	if err != nil {
		t.Fatalf("reading %s.%s: %v", db, table, err)
	}
	return d
}

func tryReadTable(t testing.TB, addr, db, table string) (*tableData, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpcOpts()...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{db, table}})
	if err != nil {
		return nil, err
	}
	sc, err := flight.DeserializeSchema(info.GetSchema(), mem)
	if err != nil {
		return nil, fmt.Errorf("schema of the flight info: %w", err)
	}
	out := &tableData{Schema: sc, Endpoints: len(info.Endpoint)}
	for i, ep := range info.Endpoint {
		if err := readEndpoint(ctx, c, ep, mem, out); err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
	}
	return out, nil
}

func readEndpoint(ctx context.Context, c flight.Client, ep *flight.FlightEndpoint, mem memory.Allocator, out *tableData) error {
	stream, err := c.DoGet(ctx, ep.GetTicket())
	if err != nil {
		return err
	}
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(mem))
	if err != nil {
		return err
	}
	defer rdr.Release()
	if !rdr.Schema().Equal(out.Schema) {
		return fmt.Errorf("DoGet schema %s differs from the flight info's %s", rdr.Schema(), out.Schema)
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			row := make(map[string]any, rec.NumCols())
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = goValue(rec.Column(c), r)
			}
			out.Rows = append(out.Rows, row)
		}
	}
	return rdr.Err()
}

// ---- catalog snapshots ----

// catalogState describes every table (with its schema and row count) as one
// comparable string.
func catalogState(t testing.TB, addr string) string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, addr, mem)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true})
	if err != nil {
		t.Fatalf("GetTables: %v", err)
	}
	var lines []string
	for _, ep := range info.Endpoint {
		rdr, err := c.DoGet(ctx, ep.Ticket)
		if err != nil {
			t.Fatalf("DoGet GetTables: %v", err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				db := rec.Column(1).(*array.String).Value(i)
				tbl := rec.Column(2).(*array.String).Value(i)
				sc, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(i), mem)
				if err != nil {
					t.Fatalf("table schema of %s.%s: %v", db, tbl, err)
				}
				n := readTable(t, addr, db, tbl).NumRows()
				lines = append(lines, fmt.Sprintf("%s.%s %s rows=%d", db, tbl, schemaString(sc), n))
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatalf("reading GetTables: %v", err)
		}
		rdr.Release()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// schemaString is a schema's field names and types, without metadata.
func schemaString(sc *arrow.Schema) string {
	parts := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		parts[i] = fmt.Sprintf("%s:%s", f.Name, f.Type)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// ---- errors ----

// grpcCode returns the gRPC code and message of a flight client error.
func grpcCode(err error) (codes.Code, string) {
	if err == nil {
		return codes.OK, ""
	}
	if s, ok := status.FromError(err); ok {
		return s.Code(), s.Message()
	}
	// Wrapped status errors.
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code(), se.GRPCStatus().Message()
	}
	return codes.Unknown, err.Error()
}

// wantCode fails unless err is a gRPC status with code want whose message
// contains every one of parts (case-insensitively).
func wantCode(t testing.TB, err error, want codes.Code, parts ...string) {
	t.Helper()
	code, msg := grpcCode(err)
	if code != want {
		t.Errorf("got code %v (%v), want %v", code, err, want)
		return
	}
	for _, p := range parts {
		if !strings.Contains(strings.ToLower(msg), strings.ToLower(p)) {
			t.Errorf("error %q does not mention %q", msg, p)
		}
	}
}

// wantADBC fails unless err is an adbc.Error with status want whose message
// contains every one of parts (case-insensitively).
func wantADBC(t testing.TB, err error, want adbc.Status, parts ...string) {
	t.Helper()
	var ae adbc.Error
	if !errors.As(err, &ae) {
		t.Errorf("got %T %v, want an adbc.Error with status %v", err, err, want)
		return
	}
	if ae.Code != want {
		t.Errorf("got ADBC status %v (%s), want %v", ae.Code, ae.Msg, want)
		return
	}
	for _, p := range parts {
		if !strings.Contains(strings.ToLower(ae.Msg), strings.ToLower(p)) {
			t.Errorf("ADBC error %q does not mention %q", ae.Msg, p)
		}
	}
}

// ---- building batches ----

var (
	tsNs = &arrow.TimestampType{Unit: arrow.Nanosecond}
	// baseTime is the time of generated rows: 2024-01-02T03:04:05Z.
	baseTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
)

// jsonRecord builds a batch from JSON rows.
func jsonRecord(t testing.TB, mem memory.Allocator, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("building batch %s from %s: %v", sc, rows, err)
	}
	return rec
}

// idSchema is (time ns, id int64, value float64, tag utf8).
var idSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: tsNs},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// idRecord builds n rows of idSchema with ids from, from+1, …; row i has time
// baseTime + id seconds.
func idRecord(mem memory.Allocator, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, idSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + i*int64(time.Second)))
		b.Field(1).(*array.Int64Builder).Append(i)
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("tag%d", i%7))
	}
	return b.NewRecordBatch()
}

// ids returns the int64 column name of every row, sorted.
func (d *tableData) ids(t testing.TB, name string) []int64 {
	t.Helper()
	out := make([]int64, 0, len(d.Rows))
	for i, r := range d.Rows {
		v, ok := r[name].(int64)
		if !ok {
			t.Fatalf("row %d: column %q is %T %v, want int64", i, name, r[name], r[name])
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// wantIDs fails unless the table's id column holds exactly from..from+n-1.
func wantIDRange(t testing.TB, d *tableData, from, n int64) {
	t.Helper()
	got := d.ids(t, "id")
	if int64(len(got)) != n {
		t.Fatalf("got %d rows, want %d", len(got), n)
	}
	for i, v := range got {
		if v != from+int64(i) {
			t.Fatalf("sorted ids[%d] = %d, want %d (duplicate or missing rows)", i, v, from+int64(i))
		}
	}
}

func release(recs ...arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func stringsContainsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
