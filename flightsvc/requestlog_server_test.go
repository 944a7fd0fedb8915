package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/query"
)

// startLogged serves the Flight service on loopback with cfg (and, with
// withAuth, a verifier over the buffer's catalog, which starts with no
// token) and returns its address and write buffer.
func startLogged(t testing.TB, cfg Config, withAuth bool) (string, *buffer.WriteBuffer) {
	t.Helper()
	bcfg := buffer.DefaultConfig()
	bcfg.DataDir = t.TempDir()
	wb, err := buffer.Open(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	qcfg := query.DefaultConfig()
	qcfg.CacheDir = filepath.Join(bcfg.DataDir, "cache")
	eng, err := query.Open(wb, qcfg)
	if err != nil {
		wb.Close()
		t.Fatal(err)
	}
	if withAuth {
		cfg.Auth = auth.NewVerifier(wb.Catalog(), nil)
	}
	sql, err := NewSQLServer(wb, eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewGRPCServer(NewService(sql))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Stop()
		sql.Close()
		eng.Close()
		wb.Close()
	})
	return lis.Addr().String(), wb
}

func loggedSQLClient(t *testing.T, addr string) *flightsql.Client {
	t.Helper()
	c, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runQuery runs sql (GetFlightInfo, then DoGet of its endpoint) and
// returns the request ids the two calls answered in their headers and
// the rows read.
func runQuery(ctx context.Context, c *flightsql.Client, sql string) (infoID, getID string, rows int64, err error) {
	var h1, h2 metadata.MD
	info, err := c.Execute(ctx, sql, grpc.Header(&h1))
	if err != nil {
		return first(h1.Get(requestIDHeader)), "", 0, err
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket, grpc.Header(&h2))
	if err != nil {
		return first(h1.Get(requestIDHeader)), "", 0, err
	}
	defer rdr.Release()
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	return first(h1.Get(requestIDHeader)), first(h2.Get(requestIDHeader)), rows, rdr.Err()
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// findLine is the line with msg and request_id id.
func findLine(t *testing.T, rec *recordLog, msg, id string) logLine {
	t.Helper()
	for _, ln := range rec.lines() {
		if ln.msg == msg && ln.attrs["request_id"] == id {
			return ln
		}
	}
	t.Fatalf("no %q line with request_id %q in %+v", msg, id, rec.lines())
	return logLine{}
}

// TestSlowQueryLogged: with a threshold under the query's duration, the
// GetFlightInfo and the DoGet of a query each log a "slow request" line at
// info with the request id the client got in the header, the SQL and the
// rows sent; a failed query logs "request failed" with the id of the
// response. The threshold from a negative Config logs neither as slow.
func TestSlowQueryLogged(t *testing.T) {
	rec := &recordLog{}
	addr, _ := startLogged(t, Config{Logger: slog.New(rec), SlowQueryThreshold: time.Nanosecond}, false)
	c := loggedSQLClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infoID, getID, rows, err := runQuery(ctx, c, "SELECT * FROM range(5000)")
	if err != nil || rows != 5000 {
		t.Fatalf("query: %d rows, %v", rows, err)
	}
	if infoID == "" || getID == "" || infoID == getID {
		t.Fatalf("request ids %q and %q, want two different ones", infoID, getID)
	}
	info := findLine(t, rec, "slow request", infoID)
	get := findLine(t, rec, "slow request", getID)
	for k, v := range map[string]string{"method": "GetFlightInfo", "kind": "statement", "code": "OK", "sql": "SELECT * FROM range(5000)"} {
		if info.attrs[k] != v {
			t.Errorf("GetFlightInfo line: %s = %q, want %q", k, info.attrs[k], v)
		}
	}
	for k, v := range map[string]string{"method": "DoGet", "kind": "statement", "code": "OK", "rows_sent": "5000", "sql": "SELECT * FROM range(5000)"} {
		if get.attrs[k] != v {
			t.Errorf("DoGet line: %s = %q, want %q", k, get.attrs[k], v)
		}
	}
	if get.level != slog.LevelInfo || get.attrs["bytes_sent"] == "0" {
		t.Errorf("DoGet line at %v with bytes_sent %q", get.level, get.attrs["bytes_sent"])
	}

	var hdr, trl metadata.MD
	_, err = c.Execute(ctx, "SELECT * FROM nosuchdb.nosuchtable", grpc.Header(&hdr), grpc.Trailer(&trl))
	if status.Code(err) == codes.OK {
		t.Fatal("a query of a missing table succeeded")
	}
	id := first(hdr.Get(requestIDHeader))
	if id == "" || first(trl.Get(requestIDHeader)) != id {
		t.Fatalf("failed call: header id %q, trailer id %q", id, first(trl.Get(requestIDHeader)))
	}
	failed := findLine(t, rec, "request failed", id)
	if failed.attrs["code"] != codeName(status.Code(err)) || failed.attrs["slow"] != "true" || !strings.Contains(failed.attrs["err"], "nosuchtable") {
		t.Errorf("failed line %+v, for %v", failed.attrs, err)
	}

	// A client's own request id is the call's.
	ctx2 := metadata.AppendToOutgoingContext(ctx, requestIDHeader, "client-trace-1")
	var h metadata.MD
	if _, err := c.Execute(ctx2, "SELECT 1", grpc.Header(&h)); err != nil {
		t.Fatal(err)
	}
	if got := first(h.Get(requestIDHeader)); got != "client-trace-1" {
		t.Errorf("answered request id %q, want the client's", got)
	}
	findLine(t, rec, "slow request", "client-trace-1")
}

func TestNeverSlow(t *testing.T) {
	rec := &recordLog{}
	addr, _ := startLogged(t, Config{Logger: slog.New(rec), SlowQueryThreshold: -1}, false)
	c := loggedSQLClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infoID, getID, _, err := runQuery(ctx, c, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	findLine(t, rec, "request", infoID)
	if ln := findLine(t, rec, "request", getID); ln.level != slog.LevelDebug || ln.attrs["rows_sent"] != "1" {
		t.Errorf("DoGet line at %v, rows_sent %q", ln.level, ln.attrs["rows_sent"])
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTokenNeverLogged: at debug, with every call logged (and slow), no
// token reaches the log, nor its secret part: not of a bearer call, a
// failed one, a refused wrong token, a Basic login, nor the new token
// that apron.token.create answers. The token id does.
func TestTokenNeverLogged(t *testing.T) {
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	addr, wb := startLogged(t, Config{Logger: log, SlowQueryThreshold: time.Nanosecond}, true)
	token, rec, err := auth.Generate("test admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec.Admin = true
	if err := wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
		t.Fatal(err)
	}
	wrong, _, err := auth.Generate("never stored", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := loggedSQLClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bearer := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, _, _, err := runQuery(bearer, c, "SELECT 42"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(bearer, "SELEC 42"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad SQL: %v", err)
	}
	if _, err := c.Execute(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+wrong), "SELECT 1"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := c.Execute(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token+"x"), "SELECT 1"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("malformed token: %v", err)
	}
	fc, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, err := fc.AuthenticateBasicToken(ctx, "user", token); err != nil {
		t.Fatalf("basic login: %v", err)
	}
	stream, err := fc.DoAction(bearer, &flight.Action{Type: actionTokenCreate, Body: []byte(`{"description":"made in a test","permissions":"admin"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ Token string }
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("apron.token.create: %v", err)
		}
		if err := json.Unmarshal(r.Body, &created); err != nil {
			t.Fatal(err)
		}
	}
	if created.Token == "" {
		t.Fatal("apron.token.create answered no token")
	}
	logs := out.String()
	for name, secret := range map[string]string{
		"token": token, "token secret": token[len(auth.Prefix)+16:],
		"wrong token": wrong, "wrong token secret": wrong[len(auth.Prefix)+16:],
		"created token": created.Token, "created token secret": created.Token[len(auth.Prefix)+16:],
	} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the %s:\n%s", name, logs)
		}
	}
	for _, want := range []string{"token_id=" + rec.ID, "method=Handshake", "method=DoAction:apron.token.create", `msg="authentication failed" request_id=`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %q:\n%s", want, logs)
		}
	}
}

// BenchmarkUnaryRoundTrip is a whole unary call over loopback TCP (a
// GetSchema of a missing table, answered NOT_FOUND and logged at info),
// to set BenchmarkUnaryInterceptor's figure against.
func BenchmarkUnaryRoundTrip(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, _ := startLogged(b, Config{Logger: log}, false)
	fc, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	ctx := context.Background()
	d := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fc.GetSchema(ctx, d); status.Code(err) != codes.NotFound {
			b.Fatal(err)
		}
	}
}
