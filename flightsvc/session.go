package flightsvc

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/session"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/auth"
)

// Session options a client may set (SetSessionOptions): what the JDBC
// driver and ADBC send for the current catalog and db schema.
const (
	sessionCatalog = "catalog"
	sessionSchema  = "schema"
)

// Session limits: a session that holds options is kept until CloseSession,
// until it has been idle for sessionIdle, or until newer ones push it out:
// sessionMax in all, least recently used first, and sessionsPerHost
// from one host, whose own least recently used goes first (so that a
// client making sessions in a loop pushes out only its own).
const (
	sessionIdle     = time.Hour
	sessionMax      = 10000
	sessionsPerHost = 1000
)

// sessionStore keeps the sessions that hold options, for arrow-go's
// stateful (cookie) session manager. A session is created for every call
// that sends no session cookie; it is only stored once SetSessionOptions
// gives it something to remember (keep), so that clients that never send
// cookies do not fill the store.
type sessionStore struct {
	idle    time.Duration
	max     int
	perHost int
	log     *slog.Logger
	mu      struct {
		sync.Mutex
		m map[string]*storedSession
	}
}

type storedSession struct {
	s     session.ServerSession
	host  string
	owner string // the token id that made it ("" without authentication)
	used  time.Time
}

func newSessionStore(log *slog.Logger) *sessionStore {
	st := &sessionStore{idle: sessionIdle, max: sessionMax, perHost: sessionsPerHost, log: log}
	st.mu.m = make(map[string]*storedSession)
	return st
}

// Get returns the session of a client's cookie. A cookie of a session the
// store does not hold (never given options, expired, or from before a
// restart) gets a new, empty session under the same id rather than an
// error: an error would make the middleware issue a new cookie, and a
// client whose calls overlap (the ADBC driver reads GetSqlInfo at connect
// while the caller goes on) can then store an older call's cookie after a
// newer one's and lose the session it just set options on.
func (st *sessionStore) Get(id string) (session.ServerSession, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.mu.m[id]
	if ok && time.Since(e.used) <= st.idle {
		e.used = time.Now()
		return e.s, nil
	}
	delete(st.mu.m, id)
	return session.NewSessionFactory(func() string { return id }).CreateSession()
}

// holds says whether the store holds the session id.
func (st *sessionStore) holds(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.mu.m[id]
	return ok
}

// owner is the token id a held session belongs to.
func (st *sessionStore) owner(id string) (string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.mu.m[id]
	if !ok {
		return "", false
	}
	return e.owner, true
}

// Put does nothing: a new session is stored by keep, once it has options.
func (st *sessionStore) Put(session.ServerSession) error { return nil }

func (st *sessionStore) Remove(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.mu.m, id)
	return nil
}

// keep stores s, of a client on host with the token owner (or refreshes
// it), dropping expired sessions and, past the bounds, the least recently
// used one of the host, or of all.
func (st *sessionStore) keep(s session.ServerSession, host, owner string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	if e, ok := st.mu.m[s.Token()]; ok {
		e.used = now
		return
	}
	var hostOldest string
	var hostOldestUsed time.Time
	n := 0
	for id, e := range st.mu.m {
		if e.host != host {
			continue
		}
		n++
		if hostOldest == "" || e.used.Before(hostOldestUsed) {
			hostOldest, hostOldestUsed = id, e.used
		}
	}
	if n >= st.perHost {
		delete(st.mu.m, hostOldest)
		st.log.Warn("sessions of one host at their bound: dropped its least recently used", "host", host, "max", st.perHost)
	}
	if len(st.mu.m) >= st.max {
		var oldest string
		var oldestUsed time.Time
		for id, e := range st.mu.m {
			if now.Sub(e.used) > st.idle {
				delete(st.mu.m, id)
				continue
			}
			if oldest == "" || e.used.Before(oldestUsed) {
				oldest, oldestUsed = id, e.used
			}
		}
		if len(st.mu.m) >= st.max && oldest != "" {
			delete(st.mu.m, oldest)
			st.log.Warn("session store full: dropped the least recently used session", "max", st.max)
		}
	}
	st.mu.m[s.Token()] = &storedSession{s: s, host: host, owner: owner, used: now}
}

// flightServicePrefix is the gRPC method prefix of the Flight service;
// sessions apply to it only (not to the health service).
const flightServicePrefix = "/arrow.flight.protocol.FlightService/"

// sessionInterceptors returns gRPC interceptors that run arrow-go's session
// middleware around Flight calls. The middleware panics on errors it
// cannot handle; the interceptors turn a panic into an Internal error
// rather than a crash.
func sessionInterceptors(store *sessionStore, log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	mw := flight.CreateServerMiddleware(session.NewServerSessionMiddleware(
		session.NewStatefulServerSessionManager(session.WithStore(store))))
	recovered := func(method string, err *error) {
		if r := recover(); r != nil {
			log.Error("panic in a Flight call", "method", method, "panic", r)
			*err = status.Errorf(codes.Internal, "internal error in %s: %v", method, r)
		}
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (_ any, err error) {
		if !strings.HasPrefix(info.FullMethod, flightServicePrefix) {
			return handler(ctx, req)
		}
		defer recovered(info.FullMethod, &err)
		return mw.Unary(ctx, req, info, handler)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if !strings.HasPrefix(info.FullMethod, flightServicePrefix) {
			return handler(srv, ss)
		}
		defer recovered(info.FullMethod, &err)
		return mw.Stream(srv, ss, info, handler)
	}
	return unary, stream
}

// currentDatabase is the database unqualified names resolve in: the
// "database" request header if sent (InfluxDB 3's convention), else the
// session's "schema" option, else none.
func currentDatabase(ctx context.Context) string {
	if db := databaseHeader(ctx); db != "" {
		return db
	}
	if sess, err := session.GetSessionFromContext(ctx); err == nil {
		if v := sess.GetSessionOption(sessionSchema); v != nil {
			return v.GetStringValue()
		}
	}
	return ""
}

// databaseHeader is the current database a client names with a "database"
// request header (InfluxDB 3's convention).
func databaseHeader(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("database"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func sessionError(v flightpb.SetSessionOptionsResult_ErrorValue) *flightpb.SetSessionOptionsResult_Error {
	return &flightpb.SetSessionOptionsResult_Error{Value: v}
}

// SetSessionOptions sets "catalog" (only "apron") and "schema" (the
// current database; checked when a statement uses it). Other names are
// answered INVALID_NAME, values of another type INVALID_VALUE.
func (s *SQLServer) SetSessionOptions(ctx context.Context, req *flight.SetSessionOptionsRequest) (*flight.SetSessionOptionsResult, error) {
	sess, err := session.GetSessionFromContext(ctx)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, "no session: the server's session middleware did not run")
	}
	res := &flight.SetSessionOptionsResult{Errors: map[string]*flightpb.SetSessionOptionsResult_Error{}}
	for name, v := range req.GetSessionOptions() {
		_, isString := v.GetOptionValue().(*flightpb.SessionOptionValue_StringValue)
		erase := v.GetOptionValue() == nil || (isString && v.GetStringValue() == "")
		switch name {
		case sessionCatalog:
			switch {
			case erase:
				sess.EraseSessionOption(name)
			case !isString || !strings.EqualFold(v.GetStringValue(), CatalogName):
				res.Errors[name] = sessionError(flightpb.SetSessionOptionsResult_INVALID_VALUE)
			default:
				sess.SetSessionOption(name, v)
			}
		case sessionSchema:
			switch {
			case erase:
				sess.EraseSessionOption(name)
			case !isString:
				res.Errors[name] = sessionError(flightpb.SetSessionOptionsResult_INVALID_VALUE)
			default:
				sess.SetSessionOption(name, v)
			}
		default:
			res.Errors[name] = sessionError(flightpb.SetSessionOptionsResult_INVALID_NAME)
		}
	}
	s.sessions.keep(sess, hostKey(ctx), auth.FromContext(ctx).ID())
	return res, nil
}

// GetSessionOptions answers "catalog" (always "apron") and "schema" (when
// set).
func (s *SQLServer) GetSessionOptions(ctx context.Context, _ *flight.GetSessionOptionsRequest) (*flight.GetSessionOptionsResult, error) {
	opts := map[string]*flight.SessionOptionValue{
		sessionCatalog: {OptionValue: &flightpb.SessionOptionValue_StringValue{StringValue: CatalogName}},
	}
	if sess, err := session.GetSessionFromContext(ctx); err == nil {
		if v := sess.GetSessionOption(sessionSchema); v != nil {
			opts[sessionSchema] = v
		}
	}
	return &flight.GetSessionOptionsResult{SessionOptions: opts}, nil
}

// CloseSession forgets the session; the middleware tells the client to
// drop its cookie.
func (s *SQLServer) CloseSession(ctx context.Context, _ *flight.CloseSessionRequest) (*flight.CloseSessionResult, error) {
	sess, err := session.GetSessionFromContext(ctx)
	if err != nil {
		return &flight.CloseSessionResult{Status: flight.CloseSessionResultNotCloseable}, nil
	}
	if err := sess.Close(); err != nil {
		return nil, statusOf(err)
	}
	return &flight.CloseSessionResult{Status: flight.CloseSessionResultClosed}, nil
}
