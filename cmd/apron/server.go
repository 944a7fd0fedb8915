package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/flightsvc"
	"github.com/apron-db/apron/internal/gcfloor"
	"github.com/apron-db/apron/internal/offheap"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/query"
)

// server is a running `apron serve`: newServer builds it part by part,
// Run serves until SIGTERM and shuts it down, Close closes what is open.
// Each part that opens something adds its closer; a part that fails just
// returns its error, and what was opened before is closed in reverse
// order. A new part (a listener, an interceptor) is one more step.
type server struct {
	f     *serveFlags
	log   *slog.Logger
	start time.Time
	reg   *prometheus.Registry
	gogc  string // the GC target in force, for the ready line
	// gcMemLimit is the soft memory limit in force, for the ready line.
	gcMemLimit string
	// procs is GOMAXPROCS as set at startup, for the ready line: by then
	// the query engine may have raised it for a while (query/procs.go).
	procs   int
	life    *lifecycle
	closers closers

	certs        *tlsReloader
	grpcOpts     []grpc.ServerOption // of both gRPC servers: TLS
	lis          *handoffListener
	metricsAddr  string
	metricsAuth  *metricsGate
	starting     *grpc.Server
	startingView net.Listener
	store        objstore.Store
	wb           *buffer.WriteBuffer
	eng          *query.Engine
	verifier     *auth.Verifier
	sql          *flightsvc.SQLServer
	grpc         *grpc.Server
	health       *health.Server
	calls        *callGate
	served       chan error // the real gRPC server's Serve returned

	// opening holds buffer.Open's result when the startup was interrupted
	// during the replay (errStartupInterrupted).
	opening chan openResult
	// leaked is set by shutdown when queries still ran at its deadline:
	// their memory and the query engine are left to the process exit.
	leaked bool
	// deadline ends the shutdown, Close included; zero before one.
	deadline time.Time
}

// errStartupInterrupted: SIGTERM came before the server was ready.
var errStartupInterrupted = errors.New("interrupted during startup")

// newServer builds a server, listening from its first steps: /healthz,
// /readyz and the gRPC health service answer while the WAL replays. It
// returns once the server is ready (the ready line is logged), or with
// errStartupInterrupted when ctx ends first. On error, whatever it opened
// is closed.
func newServer(ctx context.Context, f *serveFlags, log *slog.Logger) (*server, error) {
	s := &server{f: f, log: log, start: time.Now(), life: &lifecycle{}, calls: newCallGate(), served: make(chan error, 1)}
	for _, step := range []func(context.Context) error{
		s.setupRuntime,
		s.setupTLS,
		s.listen,
		s.serveMetrics,
		s.serveStarting,
		s.openBuffer,
		s.openQueries,
		s.serveFlight,
	} {
		if err := step(ctx); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	s.life.set(phaseReady)
	f, st := s.f, s.f.store
	log.Info("apron ready", "addr", s.lis.Addr().String(), "metrics_addr", s.metricsAddr, "data_dir", f.cfg.DataDir,
		"wal_sync", f.walSync, "retention", f.retention, "segment_duration", f.cfg.SegmentDuration, "buffer_mem_limit", f.cfg.MemLimit, "buffer_off_heap", f.offHeap,
		"query_memory_limit", f.queryCfg.MemoryLimit, "query_threads", f.queryCfg.Threads, "max_concurrent_queries", f.queryCfg.MaxConcurrent,
		"query_timeout", f.queryCfg.Timeout, "query_idle_timeout", f.sqlCfg.QueryIdleTimeout, "slow_query_threshold", f.sqlCfg.SlowQueryThreshold, "max_value_size", f.cfg.MaxValueSize,
		"object_store", st.describe(s.store), "cache_dir", f.queryCfg.CacheDir, "gogc", s.gogc, "gc_memory_limit", s.gcMemLimit, "gc_min_heap", int64(f.gcMinHeap), "cores", f.cfg.Cores, "gomaxprocs", s.procs, "gomaxprocs_while_querying", s.procs+f.queryCfg.ExtraProcs,
		"authentication", s.verifier != nil, "tls", s.certs != nil, "mtls", f.tls.clientCA != "", "startup", time.Since(s.start).Round(time.Millisecond))
	for _, name := range readyServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return s, nil
}

// readyServices are the health service names that say SERVING once the
// server is ready: the server as a whole and Flight. (Writes' own name,
// flightsvc.WriteHealthService, says whether the WAL takes writes.)
var readyServices = []string{"", "arrow.flight.protocol.FlightService"}

// setupRuntime sets the GC target, GOMAXPROCS and the query engine's
// extra procs, and the metrics registry.
func (s *server) setupRuntime(context.Context) error {
	s.gogc = setGCPercent(s.f.gogc, s.f.gogcGiven)
	if n, err := strconv.Atoi(s.gogc); err == nil && n > 0 {
		if floor := gcfloor.Start(n, int64(s.f.gcMinHeap)); floor != nil {
			s.closers.add("the GC's heap floor", func() error { floor.Stop(); return nil })
		}
	}
	s.gcMemLimit = setMemoryLimit(s.f.gcMemLimit, s.f.gcMemLimitGiven, s.f.cfg.MemLimit)
	s.f.cfg.Cores = raiseProcs()
	s.procs = runtime.GOMAXPROCS(0)
	s.f.queryCfg.ExtraProcs = queryExtraProcs(s.f.queryCfg.Threads, s.f.cfg.Cores)
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return nil
}

// setupTLS loads the certificates, before any listener opens.
func (s *server) setupTLS(ctx context.Context) error {
	if !s.f.tls.enabled() {
		if !isLoopback(s.f.addr) {
			s.log.Warn("serving on a network address without TLS: tokens and data travel in clear text; give --tls-cert and --tls-key", "addr", s.f.addr)
		}
		return nil
	}
	certs, err := s.f.tls.load(s.log)
	if err != nil {
		return err
	}
	s.certs = certs
	stop := certs.watchSIGHUP(ctx)
	s.closers.add("the TLS reloader", func() error { stop(); return nil })
	s.grpcOpts = append(s.grpcOpts, grpc.Creds(credentials.NewTLS(certs.grpcConfig())))
	return nil
}

// listen opens the gRPC port, before the WAL replays.
func (s *server) listen(context.Context) error {
	ln, err := net.Listen("tcp", s.f.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	s.lis = newHandoffListener(ln)
	s.closers.add("the gRPC listener", s.lis.Close)
	return nil
}

// serveStarting serves the port while the WAL replays (newStartingServer).
func (s *server) serveStarting(context.Context) error {
	s.starting = newStartingServer(s.life, s.grpcOpts...)
	s.startingView = s.lis.view()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.starting.Serve(s.startingView); err != nil {
			s.log.Error("the gRPC server of the startup stopped", "err", err)
		}
	}()
	s.closers.add("the gRPC server of the startup", func() error {
		s.starting.Stop()
		<-done
		return nil
	})
	s.log.Info("apron listening; replaying the WAL before serving (gRPC health NOT_SERVING until then)",
		"addr", s.lis.Addr().String(), "metrics_addr", s.metricsAddr, "data_dir", s.f.cfg.DataDir)
	return nil
}

// retireStarting stops the starting server, once the real one serves:
// its listener view first, so that every new connection goes to the real
// one, then its connections (a client watching its health is cut off
// after retireWait, and watches again on the real server).
func (s *server) retireStarting() {
	if s.starting != nil {
		s.startingView.Close()
		stopWithin(s.starting, retireWait)
	}
}

// openResult is what buffer.Open returned.
type openResult struct {
	wb  *buffer.WriteBuffer
	err error
}

// openBuffer opens the object store and the buffer, which replays the
// WAL. SIGTERM during the replay does not wait for it (it can take
// minutes and has no way to stop early): the process exits with the
// replay unfinished, which is safe, since a replay changes nothing but
// what a crash at any point leaves right (torn tails, empty files); the
// next start replays again.
func (s *server) openBuffer(ctx context.Context) error {
	// The buffer learns of the errors the storage client retries by
	// itself once it is open (Open's own store calls report theirs).
	var opened atomic.Pointer[buffer.WriteBuffer]
	store, err := s.f.store.open(context.Background(), s.f.cfg.DataDir, func(op string, err error) {
		if b := opened.Load(); b != nil {
			b.NoteStoreAttemptFailure(op, err)
		}
	})
	if err != nil {
		return err
	}
	cfg := s.f.cfg
	if store != nil {
		// The readiness probe asks the bare store: its checks are not
		// requests to count.
		probe := newStoreProbe(store)
		store = objstore.Instrument(store, s.reg)
		s.store = store
		s.closers.add("the object store", func() error {
			if s.opening != nil {
				return nil // Open may still use it, until the exit
			}
			return store.Close()
		})
		cfg.Store = store
		s.metricsAuth.setReadyz(readyz(s.life, probe))
		// Persisted segments leave memory: SQL and plain Flight read their
		// Parquet files.
		cfg.ReleasePersisted = true
	}
	cfg.Logger, cfg.Registerer, cfg.ReplayProgress = s.log, s.reg, &s.life.replay
	if s.f.offHeap {
		a := offheap.New()
		cfg.ChunkAllocator = a
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "apron_buffer_offheap_bytes",
			Help: "Bytes of sealed chunks held outside the Go heap (--buffer-off-heap), in memory maps of their own.",
		}, func() float64 { return float64(a.Mapped()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "apron_buffer_offheap_fallbacks_total",
			Help: "Sealed chunks that went on the Go heap because their memory map failed (vm.max_map_count reached, or out of memory).",
		}, func() float64 { return float64(a.Fallbacks()) }))
	}
	res := make(chan openResult, 1)
	go func() {
		wb, err := buffer.Open(cfg)
		res <- openResult{wb, err}
	}()
	var r openResult
	select {
	case r = <-res:
	case <-ctx.Done():
		s.opening = res
		s.log.Info("SIGTERM during startup: exiting without waiting for the WAL replay (nothing is lost: the next start replays it again)",
			"replay_percent", fmt.Sprintf("%.1f", s.life.replay.Snapshot().Percent))
		return errStartupInterrupted
	}
	if r.err != nil {
		return r.err
	}
	s.wb = r.wb
	opened.Store(s.wb)
	s.life.wb.Store(s.wb)
	s.closers.add("the buffer", s.wb.Close)
	return nil
}

// openQueries opens the query engine, sets up authentication and builds
// the Flight SQL server.
func (s *server) openQueries(context.Context) error {
	f := s.f
	f.queryCfg.Logger = s.log
	eng, err := query.Open(s.wb, f.queryCfg)
	if err != nil {
		return err
	}
	s.eng = eng
	s.reg.MustRegister(eng.Collectors()...)
	s.closers.add("the query engine", func() error {
		if s.leaked {
			return nil // queries still read it: left to the exit
		}
		return eng.Close()
	})
	if s.verifier, err = f.auth.setup(s.wb, f.cfg.DataDir, s.log, os.Stderr); err != nil {
		return err
	}
	s.metricsAuth.setVerifier(s.verifier)
	f.sqlCfg.Logger, f.sqlCfg.Auth, f.sqlCfg.Registerer = s.log, s.verifier, s.reg
	if s.sql, err = flightsvc.NewSQLServer(s.wb, s.eng, f.sqlCfg); err != nil {
		return err
	}
	s.closers.add("the Flight SQL server", func() error { s.sql.Close(); return nil })
	return nil
}

// serveFlight starts the real gRPC server on the port the starting server
// holds; new connections go to it from now on.
func (s *server) serveFlight(context.Context) error {
	opts := append(append([]grpc.ServerOption(nil), s.grpcOpts...),
		grpc.ChainUnaryInterceptor(s.calls.unary), grpc.ChainStreamInterceptor(s.calls.stream))
	s.grpc, s.health = flightsvc.NewGRPCServer(flightsvc.NewService(s.sql), opts...)
	// NOT_SERVING until the ready line is logged (newServer): a client
	// that sees SERVING may rely on everything the line reports.
	for _, name := range readyServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	view := s.lis.view()
	go func() { s.served <- s.grpc.Serve(view) }()
	// From now on new connections are the real server's; those the
	// starting server holds get a GOAWAY, before the ready line.
	s.retireStarting()
	s.closers.add("the gRPC server", func() error {
		s.grpc.Stop()
		return nil
	})
	return nil
}

// Close closes every part opened, in reverse order, and joins their
// errors. After a shutdown it ends by the shutdown's deadline: what has
// not closed by then is left to the process exit (every write is in the
// WAL already), which it logs. Idempotent.
func (s *server) Close() error {
	if s.deadline.IsZero() {
		return s.closers.closeAll()
	}
	done := make(chan error, 1)
	go func() { done <- s.closers.closeAll() }()
	t := time.NewTimer(time.Until(s.deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		select {
		case err := <-done: // it finished just now
			return err
		default:
		}
		err := fmt.Errorf("the shutdown did not finish within --shutdown-timeout (%s): exiting with %s still closing", s.f.shutdownTimeout, s.closers.current())
		s.log.Error("exiting before the shutdown finished", "err", err)
		return err
	}
}
