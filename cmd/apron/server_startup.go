package main

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/flightsvc"
)

// flightService is the Flight gRPC service's name.
const flightService = "arrow.flight.protocol.FlightService"

// healthServices are the names the gRPC health service answers for.
var healthServices = []string{"", flightService, flightsvc.WriteHealthService}

// newStartingServer is the gRPC server of the port while the WAL replays:
// the health service says NOT_SERVING for every name, and every other call
// is refused UNAVAILABLE with how far the startup has come, which clients
// retry. It needs nothing of the buffer (the Flight service, its
// authentication and sessions all read it), so it can listen before
// buffer.Open; it makes way for the real server on the same socket
// (handoffListener) once that one is built.
func newStartingServer(life *lifecycle, opts ...grpc.ServerOption) *grpc.Server {
	h := health.NewServer()
	for _, name := range healthServices {
		h.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	refuse := func(any, grpc.ServerStream) error {
		return status.Error(codes.Unavailable, life.startingMessage())
	}
	srv := grpc.NewServer(append(opts, grpc.UnknownServiceHandler(refuse))...)
	healthpb.RegisterHealthServer(srv, h)
	return srv
}

// retireWait bounds the graceful stop of the starting server: a client
// watching its health (a stream that never ends by itself) is then cut
// off, and watches again, on the real server.
const retireWait = time.Second

// stopWithin stops srv gracefully, or at once after d, and waits for it at
// most d more (gRPC's Stop waits for connections in their handshake).
func stopWithin(srv *grpc.Server, d time.Duration) (graceful bool) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	srv.Stop()
	t.Reset(d)
	select {
	case <-done:
	case <-t.C:
	}
	return false
}
