package flightsvc

import (
	"runtime"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/apron-db/apron/buffer"
)

// MaxMessageSize bounds one gRPC message each way. gRPC's default receive
// limit of 4 MiB is smaller than one 64k-row batch of a few columns, which
// is what ADBC sends by default.
const MaxMessageSize = 256 << 20

// WriteHealthService is the health service name that says whether writes
// work: NOT_SERVING once the WAL has failed (writes are refused until a
// restart), while "" and the Flight service stay SERVING for reads.
const WriteHealthService = "apron.v1.Write"

// NewGRPCServer returns a gRPC server with the Flight service and the
// standard health service registered. The health service answers SERVING
// for "", "arrow.flight.protocol.FlightService" and WriteHealthService
// (until the WAL fails). Flight calls run in
// a Flight session (arrow-go's cookie-based session middleware), which
// carries the session options of SetSessionOptions.
func NewGRPCServer(svc *Service, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	svc.sql.auth.drain = svc.drainPut
	authUnary, authStream := svc.sql.auth.interceptors()
	callUnary, callStream := svc.sql.calls.interceptors()
	unary, stream := sessionInterceptors(svc.sql.sessions, svc.sql.log)
	// FlightData bodies are decoded into recycled memory (bodyCodec); plain
	// Go memory underneath, so a body never given back is just garbage.
	bodies := buffer.NewRecycler(memory.DefaultAllocator)
	svc.bodies = bodies
	frames := &framePool{}
	opts = append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		// The request id and the call's log line and metrics first, so
		// that a refused call has them too; then authentication: a
		// refused call reaches nothing else.
		grpc.ChainUnaryInterceptor(callUnary, authUnary, unary), grpc.ChainStreamInterceptor(callStream, authStream, stream),
		grpc.ForceServerCodecV2(newBodyCodec(bodies, frames)),
		experimental.BufferPool(frames),
		// Calls run on long-lived goroutines whose stacks have already
		// grown (a call's interceptors, Flight SQL handler and cgo calls
		// into DuckDB need tens of KiB): a new goroutine per call spent
		// about 0.18 ms of a SELECT 1's 2.2 ms of server CPU copying its
		// stack as it grew (runtime.newstack), a worker 0.04 ms.
		// Busy workers are not waited for: a call beyond them gets a
		// goroutine of its own, as without the option.
		grpc.NumStreamWorkers(streamWorkers()),
	}, opts...)
	srv := grpc.NewServer(opts...)
	flight.RegisterFlightServiceServer(srv, svc)
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	h.SetServingStatus("arrow.flight.protocol.FlightService", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(WriteHealthService, healthpb.HealthCheckResponse_SERVING)
	go svc.sql.watchWAL(h)
	return srv, h
}

// streamWorkers is how many goroutines serve calls: enough that the
// streams a server keeps open for long (ingest, large results) leave
// idle ones for short calls.
func streamWorkers() uint32 {
	return uint32(max(16, 4*runtime.GOMAXPROCS(0)))
}

// watchWAL marks writes NOT_SERVING once the WAL fails, until Close.
func (s *SQLServer) watchWAL(h *health.Server) {
	select {
	case <-s.wb.WALFailed():
		h.SetServingStatus(WriteHealthService, healthpb.HealthCheckResponse_NOT_SERVING)
		s.log.Error("writes are down: the WAL failed, and every write is refused until apron is restarted; health "+WriteHealthService+" is NOT_SERVING", "err", s.wb.WALError())
	case <-s.closed:
	}
}
