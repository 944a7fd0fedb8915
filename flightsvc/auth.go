package flightsvc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/session"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/internal/lograte"
)

// authorizationHeader is the request header of credentials (gRPC keys are
// lower case): "Bearer <token>" on any call, or "Basic base64(user:token)",
// which a Handshake answers with "Bearer <token>" (the user name is not
// looked at: a token says who a client is).
const authorizationHeader = "authorization"

// authenticator runs before every Flight call: it turns the call's
// credentials into an auth.Principal in the call's context, or refuses
// the call UNAUTHENTICATED. Nothing else runs for a refused call. The
// gRPC health service is not a Flight call and needs no token (load
// balancers probe it).
type authenticator struct {
	v        *auth.Verifier // nil: authentication is off
	sessions *sessionStore
	log      *slog.Logger
	failures *prometheus.CounterVec
	logs     lograte.Limiter
	// drain reads and drops what a refused DoPut's client still sends
	// (Service.drainPut), so that it reads the refusal rather than a bare
	// EOF on its next send.
	drain func(putReceiver)
}

func newAuthenticator(v *auth.Verifier, sessions *sessionStore, log *slog.Logger, reg prometheus.Registerer) *authenticator {
	a := &authenticator{v: v, sessions: sessions, log: log,
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_auth_failures_total",
			Help: "Flight calls refused UNAUTHENTICATED, by reason (missing, malformed, unknown, expired, revoked).",
		}, []string{"reason"}),
		logs: lograte.Limiter{Every: time.Second}}
	if reg != nil {
		if err := reg.Register(a.failures); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				a.failures = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return a
}

// authenticate returns ctx with the call's Principal, and the token to
// answer a Handshake with.
func (a *authenticator) authenticate(ctx context.Context, method string) (context.Context, string, error) {
	if a.v == nil {
		return ctx, "", nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authorizationHeader)
	if len(vals) == 0 {
		return nil, "", a.refuse(ctx, method, "missing", fmt.Errorf("%w: no credentials: send the header \"authorization: Bearer <token>\" (ADBC option adbc.flight.sql.authorization_header, JDBC URL token=…, pyarrow FlightCallOptions(headers=…)) or log in with user and password where the password is a token", auth.ErrUnauthenticated))
	}
	// Some clients send the header twice (the ADBC driver after a
	// user/password login, on bulk ingest): the same token twice is one
	// credential; two different ones are refused.
	var token string
	for i, v := range vals {
		t, err := credential(v)
		if err != nil {
			return nil, "", a.refuse(ctx, method, "malformed", err)
		}
		if i > 0 && t != token {
			return nil, "", a.refuse(ctx, method, "malformed", fmt.Errorf("%w: %d authorization headers with different credentials: send one", auth.ErrUnauthenticated, len(vals)))
		}
		token = t
	}
	p, err := a.v.Verify(token)
	if err != nil {
		return nil, "", a.refuse(ctx, method, auth.Reason(err), err)
	}
	ctx = auth.NewContext(ctx, p)
	callFrom(ctx).setToken(p.ID())
	return a.ownSession(ctx, p), token, nil
}

// credential is the token in an authorization header value.
func credential(v string) (string, error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return cred, nil
	case strings.EqualFold(scheme, "Basic"):
		// arrow-go's client sends unpadded base64, the JDBC driver and
		// pyarrow padded.
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(cred)
		}
		if err != nil {
			return "", fmt.Errorf("%w: the Basic credentials are not base64", auth.ErrUnauthenticated)
		}
		_, password, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", fmt.Errorf("%w: the Basic credentials are not user:password", auth.ErrUnauthenticated)
		}
		return password, nil
	}
	return "", fmt.Errorf("%w: the authorization header must be \"Bearer <token>\" or \"Basic <base64 of user:token>\"", auth.ErrUnauthenticated)
}

// refuse counts and logs (rate-limited, with the client's address and
// the request id, never the credential) a refused call and returns its
// status. This is the call's one line above debug: the call's own log
// line (requestlog.go) stays at debug for a refusal, so that a client
// retrying a bad token cannot flood the log past the rate limit.
func (a *authenticator) refuse(ctx context.Context, method, reason string, err error) error {
	a.failures.WithLabelValues(reason).Inc()
	c := callFrom(ctx)
	c.setRefused()
	if n, ok := a.logs.Allow(); ok {
		a.log.Warn("authentication failed", "request_id", c.requestID(), "client", peerAddr(ctx), "method", strings.TrimPrefix(method, flightServicePrefix),
			"reason", reason, "err", err, "suppressed_since_last", n)
	}
	return statusOf(err)
}

// ownSession drops the session cookie of a call whose session another
// token made: a session is bound to its token, so the session middleware
// then starts a new one for this call instead.
func (a *authenticator) ownSession(ctx context.Context, p *auth.Principal) context.Context {
	c, err := session.GetIncomingCookieByName(ctx, session.StatefulSessionCookieName)
	if err != nil || c.Value == "" {
		return ctx
	}
	if owner, ok := a.sessions.owner(c.Value); !ok || owner == p.ID() {
		return ctx
	}
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	var keep []string
	for _, v := range md.Get("cookie") {
		cookies, err := http.ParseCookie(v)
		if err != nil {
			continue
		}
		var parts []string
		for _, ck := range cookies {
			if ck.Name != session.StatefulSessionCookieName {
				parts = append(parts, ck.String())
			}
		}
		if len(parts) > 0 {
			keep = append(keep, strings.Join(parts, "; "))
		}
	}
	md.Set("cookie", keep...)
	if len(keep) == 0 {
		md.Delete("cookie")
	}
	return metadata.NewIncomingContext(ctx, md)
}

// interceptors are the gRPC interceptors of authentication, to run before
// the session middleware.
func (a *authenticator) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, flightServicePrefix) {
			return handler(ctx, req)
		}
		ctx, _, err := a.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, flightServicePrefix) {
			return handler(srv, ss)
		}
		ctx, token, err := a.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			if info.FullMethod == flightServicePrefix+"DoPut" && a.drain != nil {
				a.drain(&doPutReceiver{ss})
			}
			return err
		}
		if token != "" && info.FullMethod == flightServicePrefix+"Handshake" {
			// What the clients of Basic login read the bearer token from:
			// the response headers. Not the trailer too: arrow-go's
			// client middleware joins headers and trailers, and the ADBC
			// driver then sends the token twice on every call.
			if err := ss.SetHeader(metadata.Pairs(authorizationHeader, "Bearer "+token)); err != nil {
				return err
			}
		}
		return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
	}
	return unary, stream
}

// doPutReceiver reads a DoPut stream before its handler has typed it.
type doPutReceiver struct{ grpc.ServerStream }

func (r *doPutReceiver) Recv() (*flight.FlightData, error) {
	m := new(flight.FlightData)
	if err := r.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// contextStream is a ServerStream with the context authenticate made.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

// Handshake answers a Flight Handshake: the authenticator has checked the
// credentials and put the bearer token in the response headers; the
// stream's messages carry nothing Apron needs, and it answers none.
// (arrow-go's AuthenticateBasicToken reads the trailer after one Recv;
// with a message there, that Recv returns it and the trailer is read
// while gRPC still writes it, a data race; with none it returns EOF.)
func (s *Service) Handshake(stream flight.FlightService_HandshakeServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

// errNotOwner is the refusal of a handle (ticket, prepared statement)
// made for another token.
func errNotOwner(what string) error {
	return fmt.Errorf("%w: this %s was made for another token: only the token that made it may use it", auth.ErrPermissionDenied, what)
}

// hostKey is what the per-host limits count by: the token when there is
// one (a token is one client's, wherever it connects from), else the
// peer's host.
func hostKey(ctx context.Context) string {
	if p := auth.FromContext(ctx); p != nil {
		return "token:" + p.ID()
	}
	return peerHost(ctx)
}
