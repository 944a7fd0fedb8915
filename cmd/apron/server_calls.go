package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errShuttingDown ends the reads a shutdown cancels. UNAVAILABLE: clients
// and balancers retry it elsewhere, or once the server is back.
var errShuttingDown = status.Error(codes.Unavailable, "apron is shutting down: the read was cancelled; retry it once the server is back, or on another one")

// readMethods are the calls a shutdown cancels at once: they only read,
// and may run for as long as their client reads (a query's DoGet). Writes
// (DoPut) are let finish, until the shutdown's grace deadline.
var readMethods = map[string]bool{
	"/" + flightService + "/DoGet":      true,
	"/" + flightService + "/DoExchange": true,
}

// callGate cancels the running reads when the server shuts down. A
// query's DoGet stops when its context does, whether DuckDB runs it (the
// engine is also interrupted) or it streams straight from the buffer (a
// direct scan, a plain Flight read, which DuckDB cannot interrupt). Its
// client then gets errShuttingDown, never a stream that just ends, which
// it would take for the whole result. It runs inside authentication: a
// refused call never reaches it.
//
// It also counts the other calls in flight (but health checks and
// watches), so that a shutdown knows when only cancelled reads are left:
// those whose client stopped reading are stuck in a send that only
// closing their connection ends, and need not wait for the grace deadline.
type callGate struct {
	others atomic.Int64 // calls in flight that are not reads, nor health
	mu     struct {
		sync.Mutex
		stopping bool
		calls    map[*context.CancelCauseFunc]struct{}
	}
}

// healthPrefix is the methods of the gRPC health service.
const healthPrefix = "/grpc.health.v1.Health/"

// unary is the gRPC unary interceptor: it counts the call.
func (g *callGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, healthPrefix) {
		g.others.Add(1)
		defer g.others.Add(-1)
	}
	return handler(ctx, req)
}

// othersInFlight counts the calls in flight that are not reads.
func (g *callGate) othersInFlight() int64 { return g.others.Load() }

func newCallGate() *callGate {
	g := &callGate{}
	g.mu.calls = make(map[*context.CancelCauseFunc]struct{})
	return g
}

// stream is the gRPC stream interceptor.
func (g *callGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !readMethods[info.FullMethod] {
		if !strings.HasPrefix(info.FullMethod, healthPrefix) {
			g.others.Add(1)
			defer g.others.Add(-1)
		}
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancelCause(ss.Context())
	defer cancel(nil)
	if !g.add(&cancel) {
		return errShuttingDown
	}
	defer g.remove(&cancel)
	err := handler(srv, &gatedStream{ServerStream: ss, ctx: ctx})
	if context.Cause(ctx) == errShuttingDown {
		// Whatever the handler made of its cancellation (an error, or
		// none: the stream just ended), the client must not take the
		// rows it got for the whole result.
		return errShuttingDown
	}
	return err
}

func (g *callGate) add(c *context.CancelCauseFunc) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.stopping {
		return false
	}
	g.mu.calls[c] = struct{}{}
	return true
}

func (g *callGate) remove(c *context.CancelCauseFunc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.mu.calls, c)
}

// cancelAll cancels the running reads and refuses new ones; it returns how
// many it cancelled.
func (g *callGate) cancelAll() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.stopping = true
	for c := range g.mu.calls {
		(*c)(errShuttingDown)
	}
	return len(g.mu.calls)
}

// gatedStream is a ServerStream with the gate's cancellable context.
type gatedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *gatedStream) Context() context.Context { return s.ctx }
