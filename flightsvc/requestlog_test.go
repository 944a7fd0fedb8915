package flightsvc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// recordLog is a slog.Handler that keeps every record, at every level.
type recordLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordLog) WithGroup(string) slog.Handler            { return l }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// logLine is one record: its level, message and attributes as strings.
type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *recordLog) lines() []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logLine
	for _, r := range l.recs {
		ln := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			ln.attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, ln)
	}
	return out
}

// only is the one line logged, failing the test unless there is exactly
// one.
func (l *recordLog) only(t *testing.T) logLine {
	t.Helper()
	lines := l.lines()
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %+v", len(lines), lines)
	}
	return lines[0]
}

func cmdBytes(t testing.TB, m proto.Message) []byte {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func peerCtx(md metadata.MD) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5555}})
	if md != nil {
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return ctx
}

func unaryInfo(method string) *grpc.UnaryServerInfo {
	return &grpc.UnaryServerInfo{FullMethod: flightServicePrefix + method}
}

// TestCallLogLine: a failed GetFlightInfo of a statement logs one line at
// info with every field, the client's request id and the SQL cut to
// logSQLMax bytes.
func TestCallLogLine(t *testing.T) {
	rec := &recordLog{}
	o := newCallObserver(slog.New(rec), time.Hour, nil)
	unary, _ := o.interceptors()
	sql := "SELECT '" + strings.Repeat("é", 300) + "'"
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(t, &flightpb.CommandStatementQuery{Query: sql})}
	_, err := unary(peerCtx(metadata.Pairs(requestIDHeader, "client-req-1")), desc, unaryInfo("GetFlightInfo"),
		func(ctx context.Context, _ any) (any, error) {
			callFrom(ctx).setToken("0123456789abcdef")
			callFrom(ctx).setSQL(sql, "metrics")
			return nil, status.Error(codes.InvalidArgument, "syntax error at end of input")
		})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
	ln := rec.only(t)
	if ln.level != slog.LevelInfo || ln.msg != "request failed" {
		t.Errorf("level %v msg %q, want INFO \"request failed\"", ln.level, ln.msg)
	}
	want := map[string]string{
		"request_id": "client-req-1", "method": "GetFlightInfo", "kind": "statement", "client": "10.1.2.3:5555",
		"token_id": "0123456789abcdef", "database": "metrics", "code": "INVALID_ARGUMENT", "err": "syntax error at end of input",
	}
	for k, v := range want {
		if ln.attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, ln.attrs[k], v)
		}
	}
	if _, err := time.ParseDuration(ln.attrs["duration"]); err != nil {
		t.Errorf("duration %q: %v", ln.attrs["duration"], err)
	}
	if got := ln.attrs["sql"]; len(got) > logSQLMax+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "SELECT 'é") {
		t.Errorf("sql = %q (%d bytes), want the first %d bytes and a mark", got, len(got), logSQLMax)
	}
	for _, k := range []string{"rows_sent", "rows_received", "slow"} {
		if v, ok := ln.attrs[k]; ok {
			t.Errorf("%s = %q on a unary call that moved no rows", k, v)
		}
	}
}

// TestCallLogLevels: the level and message of a call by its code,
// duration and whether the authenticator refused it (and logged that).
func TestCallLogLevels(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      codes.Code
		slow      time.Duration
		refused   bool
		wantLevel slog.Level
		wantMsg   string
	}{
		{"ok", codes.OK, time.Hour, false, slog.LevelDebug, "request"},
		{"ok_slow", codes.OK, time.Nanosecond, false, slog.LevelInfo, "slow request"},
		{"ok_never_slow", codes.OK, -1, false, slog.LevelDebug, "request"},
		{"cancelled", codes.Canceled, time.Hour, false, slog.LevelDebug, "request"},
		{"cancelled_slow", codes.Canceled, time.Nanosecond, false, slog.LevelInfo, "slow request"},
		{"invalid_argument", codes.InvalidArgument, time.Hour, false, slog.LevelInfo, "request failed"},
		{"not_found", codes.NotFound, time.Hour, false, slog.LevelInfo, "request failed"},
		{"resource_exhausted", codes.ResourceExhausted, time.Hour, false, slog.LevelInfo, "request failed"},
		{"refused", codes.Unauthenticated, time.Hour, true, slog.LevelDebug, "request"},
		{"unauthenticated_mid_stream", codes.Unauthenticated, time.Hour, false, slog.LevelInfo, "request failed"},
		{"unavailable", codes.Unavailable, time.Hour, false, slog.LevelWarn, "request failed"},
		{"internal", codes.Internal, time.Hour, false, slog.LevelError, "request failed"},
		{"data_loss", codes.DataLoss, time.Hour, false, slog.LevelError, "request failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordLog{}
			unary, _ := newCallObserver(slog.New(rec), tc.slow, nil).interceptors()
			unary(peerCtx(nil), &flight.FlightDescriptor{}, unaryInfo("GetSchema"), func(ctx context.Context, _ any) (any, error) {
				if tc.refused {
					callFrom(ctx).setRefused()
				}
				time.Sleep(time.Microsecond)
				return nil, status.Error(tc.code, "x")
			})
			ln := rec.only(t)
			if ln.level != tc.wantLevel || ln.msg != tc.wantMsg {
				t.Errorf("level %v msg %q, want %v %q", ln.level, ln.msg, tc.wantLevel, tc.wantMsg)
			}
			if tc.code != codes.OK && tc.slow == time.Nanosecond && ln.attrs["slow"] != "true" {
				t.Errorf("slow = %q on a slow failed call, want true", ln.attrs["slow"])
			}
		})
	}
	if o := newCallObserver(slog.New(slog.DiscardHandler), 0, nil); o.slow != DefaultSlowQueryThreshold {
		t.Errorf("a zero threshold is %s, want the default %s", o.slow, DefaultSlowQueryThreshold)
	}
}

// fakeStream is a server stream that hands out recv and keeps what is
// sent and set.
type fakeStream struct {
	ctx             context.Context
	recv            []proto.Message
	sent            []any
	header, trailer metadata.MD
}

func (f *fakeStream) SetHeader(md metadata.MD) error {
	f.header = metadata.Join(f.header, md)
	return nil
}
func (f *fakeStream) SendHeader(md metadata.MD) error { return f.SetHeader(md) }
func (f *fakeStream) SetTrailer(md metadata.MD)       { f.trailer = metadata.Join(f.trailer, md) }
func (f *fakeStream) Context() context.Context        { return f.ctx }
func (f *fakeStream) SendMsg(m any) error             { f.sent = append(f.sent, m); return nil }
func (f *fakeStream) RecvMsg(m any) error {
	if len(f.recv) == 0 {
		return io.EOF
	}
	proto.Merge(m.(proto.Message), f.recv[0])
	f.recv = f.recv[1:]
	return nil
}

// streamCall runs the stream interceptor of o over a fakeStream of method
// that receives recv, with handler.
func streamCall(o *callObserver, method string, recv []proto.Message, handler grpc.StreamHandler) (*fakeStream, error) {
	_, stream := o.interceptors()
	fs := &fakeStream{ctx: peerCtx(nil), recv: recv}
	err := stream(nil, fs, &grpc.StreamServerInfo{FullMethod: flightServicePrefix + method, IsServerStream: true}, handler)
	return fs, err
}

// TestStreamCallCounts: a DoGet of a statement ticket is classified by its
// ticket, counts the rows its handler reports and the Arrow bytes it
// sends, and carries its request id in the header, and in the trailer
// when it fails; the metrics count it as a query.
func TestStreamCallCounts(t *testing.T) {
	rec := &recordLog{}
	reg := prometheus.NewRegistry()
	m, err := newRPCMetrics(reg, newPreparedStore())
	if err != nil {
		t.Fatal(err)
	}
	o := newCallObserver(slog.New(rec), time.Hour, m)
	tkt := &flight.Ticket{Ticket: cmdBytes(t, &flightpb.TicketStatementQuery{StatementHandle: []byte(`{"sql":"SELECT 1","id":"x"}`)})}
	fs, err := streamCall(o, "DoGet", []proto.Message{tkt}, func(_ any, ss grpc.ServerStream) error {
		var got flight.Ticket
		if err := ss.RecvMsg(&got); err != nil {
			return err
		}
		if m := testutil.ToFloat64(o.metrics.active.WithLabelValues("DoGet")); m != 1 {
			t.Errorf("apron_active_streams{method=DoGet} = %v during the call, want 1", m)
		}
		for range 3 {
			if err := ss.SendMsg(&flight.FlightData{DataHeader: make([]byte, 10), DataBody: make([]byte, 90)}); err != nil {
				return err
			}
			callFrom(ss.Context()).sent(7)
		}
		return status.Error(codes.DeadlineExceeded, "the query timed out")
	})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	ln := rec.only(t)
	id := ln.attrs["request_id"]
	if got := fs.header.Get(requestIDHeader); len(got) != 1 || got[0] != id {
		t.Errorf("header %s = %q, want [%q]", requestIDHeader, got, id)
	}
	if got := fs.trailer.Get(requestIDHeader); len(got) != 1 || got[0] != id {
		t.Errorf("trailer %s = %q, want [%q]", requestIDHeader, got, id)
	}
	for k, v := range map[string]string{"method": "DoGet", "kind": "statement", "rows_sent": "21", "bytes_sent": "300", "code": "DEADLINE_EXCEEDED"} {
		if ln.attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, ln.attrs[k], v)
		}
	}
	for _, c := range []struct {
		name string
		got  prometheus.Collector
		want float64
	}{
		{"apron_grpc_requests_total{DoGet,deadline_exceeded}", m.requests.WithLabelValues("DoGet", "deadline_exceeded"), 1},
		{"apron_queries_total{statement,deadline_exceeded}", m.queries.WithLabelValues("statement", "deadline_exceeded"), 1},
		{"apron_query_rows_sent_total{statement}", m.rowsSent.WithLabelValues("statement"), 21},
		{"apron_query_bytes_sent_total{statement}", m.bytesSent.WithLabelValues("statement"), 300},
		{"apron_active_streams{DoGet}", m.active.WithLabelValues("DoGet"), 0},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.queryDuration); n != 1 {
		t.Errorf("apron_query_duration_seconds has %d series, want 1", n)
	}
}

// TestQueryCounting: a query counts once: at the call that runs it, or at
// the GetFlightInfo or CreatePreparedStatement that failed to plan it; a
// successful plan, a metadata read or an ingest is no query. Action types
// outside the known ones share one label.
func TestQueryCounting(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newRPCMetrics(reg, newPreparedStore())
	if err != nil {
		t.Fatal(err)
	}
	o := newCallObserver(slog.New(slog.DiscardHandler), time.Hour, m)
	unary, _ := o.interceptors()
	stmt := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(t, &flightpb.CommandStatementQuery{Query: "SELECT 1"})}
	tables := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(t, &flightpb.CommandGetTables{})}
	path := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}}
	fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.NotFound, "no") }
	ok := func(context.Context, any) (any, error) { return nil, nil }
	unary(peerCtx(nil), stmt, unaryInfo("GetFlightInfo"), ok)     // planned: no query yet
	unary(peerCtx(nil), stmt, unaryInfo("GetFlightInfo"), fail)   // failed plan: one
	unary(peerCtx(nil), tables, unaryInfo("GetFlightInfo"), fail) // metadata: none
	unary(peerCtx(nil), path, unaryInfo("GetFlightInfo"), fail)   // plain: one
	recvAll := func(_ any, ss grpc.ServerStream) error {
		for {
			var fd flight.FlightData
			if err := ss.RecvMsg(&fd); err != nil {
				return nil
			}
		}
	}
	update := &flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(t, &flightpb.CommandStatementUpdate{Query: "INSERT"})}}
	ingest := &flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(t, &flightpb.CommandStatementIngest{Table: "t"})}}
	streamCall(o, "DoPut", []proto.Message{update}, recvAll) // runs an update: one
	streamCall(o, "DoPut", []proto.Message{ingest}, recvAll) // ingest: none
	action := func(typ string) {
		streamCall(o, "DoAction", []proto.Message{&flight.Action{Type: typ}}, func(_ any, ss grpc.ServerStream) error {
			var a flight.Action
			ss.RecvMsg(&a)
			return status.Error(codes.InvalidArgument, "bad")
		})
	}
	action("CreatePreparedStatement") // failed plan: one
	action("no such action, with spaces")
	if n := testutil.CollectAndCount(m.queries); n != 4 {
		t.Errorf("apron_queries_total has %d series, want 4", n)
	}
	for _, c := range []struct {
		name string
		got  prometheus.Collector
		want float64
	}{
		{"statement not_found", m.queries.WithLabelValues("statement", "not_found"), 1},
		{"statement ok", m.queries.WithLabelValues("statement", "ok"), 0},
		{"plain not_found", m.queries.WithLabelValues("plain", "not_found"), 1},
		{"update ok", m.queries.WithLabelValues("update", "ok"), 1},
		{"prepared invalid_argument", m.queries.WithLabelValues("prepared", "invalid_argument"), 1},
		{"requests GetFlightInfo not_found", m.requests.WithLabelValues("GetFlightInfo", "not_found"), 3},
		{"requests DoAction:CreatePreparedStatement", m.requests.WithLabelValues("DoAction:CreatePreparedStatement", "invalid_argument"), 1},
		{"requests DoAction:other", m.requests.WithLabelValues("DoAction:other", "invalid_argument"), 1},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPreparedGauge: apron_prepared_statements counts the open handles
// of the server's store; a second server on the registry takes it over.
func TestPreparedGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newPreparedStore()
	m, err := newRPCMetrics(reg, p)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.add("c", "h", "", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "apron_prepared_statements"); err != nil || n != 1 {
		t.Fatalf("apron_prepared_statements: %d series, %v", n, err)
	}
	if got := testutil.ToFloat64(m.prepared); got != 3 {
		t.Errorf("apron_prepared_statements = %v, want 3", got)
	}
	m2, err := newRPCMetrics(reg, newPreparedStore())
	if err != nil {
		t.Fatalf("a second server on the registry: %v", err)
	}
	if got := testutil.ToFloat64(m2.prepared); got != 0 {
		t.Errorf("the second server's gauge = %v, want 0", got)
	}
	m2.unregister()
	if n, _ := testutil.GatherAndCount(reg, "apron_prepared_statements"); n != 0 {
		t.Errorf("%d apron_prepared_statements series after unregister, want 0", n)
	}
	var none *rpcMetrics // no registerer: every method is a no-op
	none.observe(&call{}, callFields{}, codes.OK, 0)
	none.streamStarted("DoGet")
	none.unregister()
}

func TestCommandKind(t *testing.T) {
	for _, tc := range []struct {
		msg  proto.Message
		want string
	}{
		{&flightpb.CommandStatementQuery{}, kindStatement},
		{&flightpb.TicketStatementQuery{}, kindStatement},
		{&flightpb.CommandPreparedStatementQuery{}, kindPrepared},
		{&flightpb.CommandPreparedStatementUpdate{}, kindPrepared},
		{&flightpb.CommandStatementUpdate{}, kindUpdate},
		{&flightpb.CommandStatementIngest{}, kindIngest},
		{&flightpb.CommandGetTables{}, kindMetadata},
		{&flightpb.CommandGetSqlInfo{}, kindMetadata},
		{&flightpb.Action{}, ""},
	} {
		if got := commandKind(cmdBytes(t, tc.msg)); got != tc.want {
			t.Errorf("%T: %q, want %q", tc.msg, got, tc.want)
		}
	}
	for _, junk := range [][]byte{nil, []byte("apron:x"), {0xff, 0xff, 0xff}, {0x0a, 0x7f}} {
		if got := commandKind(junk); got != "" {
			t.Errorf("%q: %q, want none", junk, got)
		}
	}
}

// nopTransportStream is the transport stream gRPC puts in a call's
// context, for grpc.SetHeader; it keeps nothing.
type nopTransportStream struct{}

func (nopTransportStream) Method() string                  { return "" }
func (nopTransportStream) SetHeader(metadata.MD) error     { return nil }
func (nopTransportStream) SendHeader(metadata.MD) error    { return nil }
func (nopTransportStream) SetTrailer(md metadata.MD) error { return nil }

// BenchmarkUnaryInterceptor is the cost of the first interceptor on a
// unary call whose log line is not written (info level: the call
// succeeds and is fast), with and without metrics, and with the debug
// line written (to io.Discard, through slog's text handler).
func BenchmarkUnaryInterceptor(b *testing.B) {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmdBytes(b, &flightpb.CommandStatementQuery{Query: "SELECT 1"})}
	ctx := grpc.NewContextWithServerTransportStream(peerCtx(metadata.Pairs("authorization", "Bearer x", "user-agent", "grpc-go")), nopTransportStream{})
	handler := func(context.Context, any) (any, error) { return nil, nil }
	info := unaryInfo("GetFlightInfo")
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, bc := range []struct {
		name string
		reg  prometheus.Registerer
		log  *slog.Logger
	}{
		{"no_metrics", nil, log},
		{"metrics", prometheus.NewRegistry(), log},
		{"metrics_debug_log", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := newRPCMetrics(bc.reg, newPreparedStore())
			if err != nil {
				b.Fatal(err)
			}
			unary, _ := newCallObserver(bc.log, time.Hour, m).interceptors()
			b.ReportAllocs()
			for b.Loop() {
				unary(ctx, desc, info, handler)
			}
		})
	}
}
