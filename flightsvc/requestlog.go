package flightsvc

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// DefaultSlowQueryThreshold is the SlowQueryThreshold that a zero Config
// gets (and `apron serve` starts with, --slow-query-threshold).
const DefaultSlowQueryThreshold = time.Second

// Bounds of what a log line takes from a request: SQL may be megabytes
// (an INSERT … VALUES), and an error message may quote what the client
// sent (a malformed ticket).
const (
	logSQLMax    = 200
	logErrMax    = 1024
	logActionMax = 64
)

// callObserver is the first interceptor of every call: it gives the call
// its request id (requestid.go), sends it back, makes the call's record
// (callinfo.go) and, once the call ends, counts it (rpc_metrics.go) and
// logs it: at debug every call; at info a slow one (slower than slow) or
// one that failed for a reason of the client's; at warn or error one that
// failed for the server's. It runs before authentication, so that a
// refused call has an id too.
type callObserver struct {
	log     *slog.Logger
	slow    time.Duration // < 0: no call is slow
	metrics *rpcMetrics   // nil: none
}

func newCallObserver(log *slog.Logger, slow time.Duration, m *rpcMetrics) *callObserver {
	if slow == 0 {
		slow = DefaultSlowQueryThreshold
	}
	return &callObserver{log: log, slow: slow, metrics: m}
}

// shortMethod is a method without the Flight service's prefix ("DoGet"),
// other services' with their service ("grpc.health.v1.Health/Check").
func shortMethod(full string) string {
	if m, ok := strings.CutPrefix(full, flightServicePrefix); ok {
		return m
	}
	return strings.TrimPrefix(full, "/")
}

func (o *callObserver) begin(ctx context.Context, fullMethod string) (context.Context, *call) {
	// Not FromIncomingContext: that copies every header.
	c := &call{id: requestID(metadata.ValueFromIncomingContext(ctx, requestIDHeader)), method: shortMethod(fullMethod), start: time.Now()}
	return context.WithValue(ctx, callKey{}, c), c
}

func (o *callObserver) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, c := o.begin(ctx, info.FullMethod)
		md := requestIDMD(c.id)
		// Errors only outside a gRPC call (tests): no header to set.
		_ = grpc.SetHeader(ctx, md)
		if d, ok := req.(*flight.FlightDescriptor); ok {
			classifyDescriptor(c, c.method, d)
		}
		resp, err := handler(ctx, req)
		if err != nil {
			_ = grpc.SetTrailer(ctx, md)
		}
		o.end(ctx, c, err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, c := o.begin(ss.Context(), info.FullMethod)
		md := requestIDMD(c.id)
		// Sent with the first message, or with the status of a call that
		// sends none.
		_ = ss.SetHeader(md)
		o.metrics.streamStarted(c.method)
		defer o.metrics.streamEnded(c.method)
		err := handler(srv, &observedStream{ServerStream: ss, ctx: ctx, c: c})
		if err != nil {
			ss.SetTrailer(md)
		}
		o.end(ctx, c, err)
		return err
	}
	return unary, stream
}

// observedStream is a call's stream as its handler sees it: with the
// call in its context, counting the Arrow bytes each way and classifying
// the call by its first request message.
type observedStream struct {
	grpc.ServerStream
	ctx context.Context
	c   *call
}

func (s *observedStream) Context() context.Context { return s.ctx }

func (s *observedStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if fd, ok := m.(*flight.FlightData); ok && err == nil {
		s.c.bytesSent.Add(int64(len(fd.DataHeader) + len(fd.DataBody)))
	}
	return err
}

func (s *observedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	switch m := m.(type) {
	case *flight.FlightData:
		s.c.bytesRecv.Add(int64(len(m.DataHeader) + len(m.DataBody)))
		if d := m.GetFlightDescriptor(); d != nil {
			classifyPut(s.c, d)
		}
	case *flight.Ticket:
		classifyTicket(s.c, m)
	case *flight.Action:
		classifyAction(s.c, m)
	}
	return nil
}

// statusCode is the code the client gets for err, as gRPC makes it: a
// status error's own, a context error's, else UNKNOWN.
func statusCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// codeLevel is the level a call that ended with code is logged at:
// debug for what is no failure of anyone's (OK, CANCELLED: the client
// went away or cancelled) and for refusals the authenticator logs itself;
// info for failures the client caused or can fix; warn for UNAVAILABLE
// (writes refused after the WAL failed, shutting down); error for the
// server's own failures.
func codeLevel(code codes.Code, refused bool) slog.Level {
	switch code {
	case codes.OK, codes.Canceled:
		return slog.LevelDebug
	case codes.Unauthenticated:
		if refused {
			return slog.LevelDebug
		}
	case codes.Unavailable:
		return slog.LevelWarn
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// end counts and logs a finished call.
func (o *callObserver) end(ctx context.Context, c *call, err error) {
	d := time.Since(c.start)
	code := statusCode(err)
	f := c.fields()
	o.metrics.observe(c, f, code, d)
	level := codeLevel(code, f.refused)
	slow := o.slow >= 0 && d > o.slow
	msg := "request"
	switch {
	case level > slog.LevelDebug:
		msg = "request failed"
	case slow:
		msg, level = "slow request", slog.LevelInfo
	}
	if !o.log.Enabled(ctx, level) {
		return
	}
	o.log.LogAttrs(ctx, level, msg, c.attrs(ctx, f, code, err, d, slow)...)
}

// attrs are the fields of a call's log line. Never the credentials: the
// authorization header is not read here, and the token is named by its id.
func (c *call) attrs(ctx context.Context, f callFields, code codes.Code, err error, d time.Duration, slow bool) []slog.Attr {
	method := c.method
	if f.action != "" {
		method += ":" + truncate(f.action, logActionMax)
	}
	a := make([]slog.Attr, 0, 16)
	a = append(a, slog.String("request_id", c.id), slog.String("method", method))
	if f.kind != "" {
		a = append(a, slog.String("kind", f.kind))
	}
	a = append(a, slog.String("client", peerAddr(ctx)))
	if f.token != "" {
		a = append(a, slog.String("token_id", f.token))
	}
	if f.database != "" {
		a = append(a, slog.String("database", f.database))
	}
	if n, b := c.rowsSent.Load(), c.bytesSent.Load(); n > 0 || b > 0 || c.method == "DoGet" {
		a = append(a, slog.Int64("rows_sent", n), slog.Int64("bytes_sent", b))
	}
	if n, b := c.rowsRecv.Load(), c.bytesRecv.Load(); n > 0 || b > 0 || c.method == "DoPut" {
		a = append(a, slog.Int64("rows_received", n), slog.Int64("bytes_received", b))
	}
	a = append(a, slog.Duration("duration", d), slog.String("code", codeName(code)))
	if slow && code != codes.OK {
		a = append(a, slog.Bool("slow", true))
	}
	if err != nil {
		a = append(a, slog.String("err", truncate(status.Convert(err).Message(), logErrMax)))
	}
	if f.sql != "" {
		a = append(a, slog.String("sql", truncate(f.sql, logSQLMax)))
	}
	return a
}

// truncate cuts s to at most max bytes, on a rune boundary, marking the
// cut.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
