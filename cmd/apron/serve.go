package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/flightsvc"
	"github.com/apron-db/apron/query"
	"github.com/apron-db/apron/wal"
)

type serveFlags struct {
	addr, metricsAddr   string
	logLevel, logFormat string
	walSync             string
	shutdownTimeout     time.Duration
	memLimit            byteSize
	cfg                 buffer.Config
	queryMemLimit       byteSize
	queryCfg            query.Config
	store               storeFlags
	cacheSize           byteSize
	maxValueSize        byteSize
	sqlCfg              flightsvc.Config
	gogc                int
	gogcGiven           bool // by flag or APRON_GOGC
	auth                authFlags
	tls                 tlsFlags
}

func parseServeFlags(args []string) (*serveFlags, error) {
	f := &serveFlags{cfg: buffer.DefaultConfig(), queryCfg: query.DefaultConfig(), sqlCfg: flightsvc.Config{QueryIdleTimeout: flightsvc.DefaultQueryIdleTimeout}}
	f.memLimit = byteSize(f.cfg.MemLimit)
	f.maxValueSize = byteSize(f.cfg.MaxValueSize)
	f.queryMemLimit = byteSize(f.queryCfg.MemoryLimit)
	fs := flag.NewFlagSet("apron serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8082", "address the Flight / Flight SQL gRPC service listens on")
	fs.StringVar(&f.cfg.DataDir, "data-dir", f.cfg.DataDir, "directory of the WAL and the catalog")
	fs.DurationVar(&f.cfg.SegmentDuration, "segment-duration", f.cfg.SegmentDuration, "how long a segment takes writes before it rolls over")
	fs.Var(&f.memLimit, "buffer-mem-limit", "memory for buffered data, e.g. 2GiB; the open segment rolls over at half of it, writes past it get RESOURCE_EXHAUSTED")
	fs.StringVar(&f.walSync, "wal-sync", "fsync", "fsync: acknowledge a write once its WAL record is fsynced; none: once written to the OS (a machine crash can lose acknowledged writes)")
	fs.BoolVar(&f.cfg.WALMoveCorrupt, "wal-move-corrupt", false, "at startup, move a WAL file with a corrupt record aside (to <file>.corrupt) and keep its records before the corruption, instead of refusing to start")
	fs.IntVar(&f.cfg.Limits.MaxDatabases, "max-databases", f.cfg.Limits.MaxDatabases, "most databases")
	fs.IntVar(&f.cfg.Limits.MaxTables, "max-tables", f.cfg.Limits.MaxTables, "most tables, all databases together")
	fs.IntVar(&f.cfg.Limits.MaxColumnsPerTable, "max-columns-per-table", f.cfg.Limits.MaxColumnsPerTable, "most columns in a table, time included")
	fs.Var(&f.queryMemLimit, "query-memory-limit", "DuckDB's memory limit for queries, e.g. 4GiB; 0 leaves DuckDB's default (80% of RAM)")
	fs.IntVar(&f.queryCfg.Threads, "query-threads", f.queryCfg.Threads, "DuckDB worker threads; 0 = one per core")
	fs.IntVar(&f.queryCfg.MaxConcurrent, "max-concurrent-queries", f.queryCfg.MaxConcurrent, "most SQL statements running at once; more wait up to 5s, then get RESOURCE_EXHAUSTED")
	fs.DurationVar(&f.queryCfg.Timeout, "query-timeout", f.queryCfg.Timeout, "a query running longer is cancelled (DEADLINE_EXCEEDED); 0 = no limit")
	fs.DurationVar(&f.sqlCfg.QueryIdleTimeout, "query-idle-timeout", f.sqlCfg.QueryIdleTimeout, "a query whose client takes no result batch for this long is cancelled and frees its slot; 0 = never")
	fs.StringVar(&f.queryCfg.TempDir, "query-temp-dir", "", "directory where DuckDB may spill queries larger than --query-memory-limit (it may write files there, and nowhere else); empty: no spilling, such a query fails")
	fs.Var(&f.maxValueSize, "max-value-size", "largest string or binary value a write may carry, e.g. 8MiB (clients read values back in gRPC messages of 4-16 MiB); 0 = no limit")
	f.store.register(fs)
	fs.StringVar(&f.queryCfg.CacheDir, "cache-dir", "", "local copies of persisted Parquet files fetched from the object store; default <data-dir>/cache")
	f.cacheSize = byteSize(f.queryCfg.CacheSize)
	fs.Var(&f.cacheSize, "cache-size", "most bytes of Parquet files kept in --cache-dir, least recently used out first, e.g. 10GiB")
	fs.IntVar(&f.cfg.PersistConcurrency, "persist-concurrency", f.cfg.PersistConcurrency, "Parquet files of a closed segment written and uploaded at once")
	fs.DurationVar(&f.cfg.PersistAttemptTimeout, "persist-attempt-timeout", f.cfg.PersistAttemptTimeout, "one object store request of a persist that takes longer (plus 1s per MiB it uploads) fails, is counted and logged, and is retried")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:8083", "address of the HTTP /metrics (Prometheus) and /debug/pprof/ (Go profiles) endpoints; empty to disable")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.IntVar(&f.gogc, "gogc", defaultGOGC, "Go's GC target percentage (as GOGC): the heap may grow this far past the live data between collections; a GOGC environment variable wins over the default")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long in-flight requests may take before they are cut off")
	f.auth.register(fs)
	f.tls.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	if err := f.auth.check(f.addr, f.metricsAddr); err != nil {
		return nil, err
	}
	if err := f.tls.validate(); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.gogcGiven = f.gogcGiven || fl.Name == "gogc" })
	f.gogcGiven = f.gogcGiven || os.Getenv("APRON_GOGC") != ""
	f.cfg.MemLimit = int64(f.memLimit)
	f.cfg.MaxValueSize = int64(f.maxValueSize)
	f.queryCfg.CacheSize = int64(f.cacheSize)
	if f.queryCfg.CacheDir == "" {
		f.queryCfg.CacheDir = filepath.Join(f.cfg.DataDir, "cache")
	}
	f.queryCfg.MemoryLimit = int64(f.queryMemLimit)
	if err := f.queryCfg.Validate(); err != nil {
		return nil, err
	}
	switch f.walSync {
	case "fsync":
		f.cfg.WALSync = wal.SyncFsync
	case "none":
		f.cfg.WALSync = wal.SyncNone
	default:
		return nil, fmt.Errorf("--wal-sync %q: want fsync or none", f.walSync)
	}
	return f, f.cfg.Validate()
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func serve(args []string) error {
	f, err := parseServeFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	gogc := setGCPercent(f.gogc, f.gogcGiven)
	f.queryCfg.ExtraProcs = queryExtraProcs(f.queryCfg.Threads)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f.cfg.Logger = log
	f.cfg.Registerer = reg

	start := time.Now()
	// The buffer learns of the errors the storage client retries by
	// itself once it is open (Open's own store calls report theirs).
	var opened atomic.Pointer[buffer.WriteBuffer]
	store, err := f.store.open(context.Background(), f.cfg.DataDir, func(op string, err error) {
		if b := opened.Load(); b != nil {
			b.NoteStoreAttemptFailure(op, err)
		}
	})
	if err != nil {
		return err
	}
	if store != nil {
		defer store.Close()
		f.cfg.Store = store
		// Persisted segments leave memory: SQL and plain Flight read their
		// Parquet files.
		f.cfg.ReleasePersisted = true
	}
	wb, err := buffer.Open(f.cfg)
	if err != nil {
		return err
	}
	opened.Store(wb)
	f.queryCfg.Logger = log
	eng, err := query.Open(wb, f.queryCfg)
	if err != nil {
		wb.Close()
		return err
	}
	// closeAll closes the engine before the buffer it reads. The engine
	// waits for every running query to give its connection back; if that
	// takes longer than the shutdown timeout, the buffer is closed anyway
	// so that the WAL is closed cleanly.
	closeAll := func() error {
		closed := make(chan error, 1)
		go func() { closed <- eng.Close() }()
		var err error
		select {
		case err = <-closed:
		case <-time.After(f.shutdownTimeout):
			err = fmt.Errorf("the query engine did not close within %s (a query still holds a connection)", f.shutdownTimeout)
		}
		return errors.Join(err, wb.Close())
	}
	verifier, err := f.auth.setup(wb, f.cfg.DataDir, log, os.Stderr)
	if err != nil {
		closeAll()
		return err
	}
	f.sqlCfg.Logger = log
	f.sqlCfg.Auth = verifier
	f.sqlCfg.Registerer = reg
	sql, err := flightsvc.NewSQLServer(wb, eng, f.sqlCfg)
	if err != nil {
		closeAll()
		return err
	}
	defer sql.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var grpcOpts []grpc.ServerOption
	var certs *tlsReloader
	if f.tls.enabled() {
		if certs, err = f.tls.load(log); err != nil {
			closeAll()
			return err
		}
		defer certs.watchSIGHUP(ctx)()
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(certs.grpcConfig())))
	} else if !isLoopback(f.addr) {
		log.Warn("serving on a network address without TLS: tokens and data travel in clear text; give --tls-cert and --tls-key", "addr", f.addr)
	}
	srv, health := flightsvc.NewGRPCServer(flightsvc.NewService(sql), grpcOpts...)
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		closeAll()
		return fmt.Errorf("--addr: %w", err)
	}
	var metricsSrv *http.Server
	metricsAddr := ""
	if f.metricsAddr != "" {
		ml, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			lis.Close()
			closeAll()
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		metricsAddr = ml.Addr().String()
		if certs != nil {
			ml = tls.NewListener(ml, certs.httpConfig())
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("/readyz", readyz(wb))
		// Go's profiles, as Prometheus serves them beside its metrics.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		metricsSrv = &http.Server{Handler: metricsAuth(verifier, f.metricsAddr, mux), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metricsSrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "err", err)
			}
		}()
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info("apron ready", "addr", lis.Addr().String(), "metrics_addr", metricsAddr, "data_dir", f.cfg.DataDir,
		"wal_sync", f.walSync, "segment_duration", f.cfg.SegmentDuration, "buffer_mem_limit", f.cfg.MemLimit,
		"query_memory_limit", f.queryCfg.MemoryLimit, "query_threads", f.queryCfg.Threads, "max_concurrent_queries", f.queryCfg.MaxConcurrent,
		"query_timeout", f.queryCfg.Timeout, "query_idle_timeout", f.sqlCfg.QueryIdleTimeout, "max_value_size", f.cfg.MaxValueSize,
		"object_store", f.store.describe(store), "cache_dir", f.queryCfg.CacheDir, "gogc", gogc, "gomaxprocs", runtime.GOMAXPROCS(0), "gomaxprocs_while_querying", runtime.GOMAXPROCS(0)+f.queryCfg.ExtraProcs,
		"authentication", verifier != nil, "tls", certs != nil, "mtls", f.tls.clientCA != "", "startup", time.Since(start).Round(time.Millisecond))

	select {
	case err = <-served:
		log.Error("gRPC server stopped", "err", err)
	case <-ctx.Done():
		log.Info("shutting down: no new requests; waiting for in-flight ones", "timeout", f.shutdownTimeout)
	}
	health.Shutdown()
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(f.shutdownTimeout):
		log.Warn("in-flight requests did not finish in time; cutting them off", "timeout", f.shutdownTimeout)
		srv.Stop()
	}
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	if cerr := closeAll(); cerr != nil {
		log.Error("closing the query engine and the buffer", "err", cerr)
		return cerr
	}
	log.Info("apron stopped")
	return err
}
