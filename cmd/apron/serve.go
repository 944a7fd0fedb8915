package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
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
	pageCacheSize       byteSize
	maxValueSize        byteSize
	sqlCfg              flightsvc.Config
	gogc                int
	offHeap             bool // --buffer-off-heap
	gogcGiven           bool // by flag or APRON_GOGC
	gcMemLimit          gcMemoryLimit
	gcMemLimitGiven     bool // by flag or APRON_GC_MEMORY_LIMIT
	gcMinHeap           byteSize
	auth                authFlags
	tls                 tlsFlags
	retention           string
}

// newServeFlagSet is the flag set of apron serve over f's defaults (also
// what shell completion lists).
func newServeFlagSet() (*serveFlags, *flag.FlagSet) {
	f := &serveFlags{cfg: buffer.DefaultConfig(), queryCfg: query.DefaultConfig(), sqlCfg: flightsvc.Config{
		QueryIdleTimeout: flightsvc.DefaultQueryIdleTimeout, SlowQueryThreshold: flightsvc.DefaultSlowQueryThreshold}}
	f.memLimit = byteSize(f.cfg.MemLimit)
	f.gcMemLimit = gcMemoryLimit{auto: true}
	f.gcMinHeap = defaultGCMinHeap
	f.maxValueSize = byteSize(f.cfg.MaxValueSize)
	f.queryMemLimit = byteSize(f.queryCfg.MemoryLimit)
	fs := flag.NewFlagSet("apron serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8082", "address the Flight / Flight SQL gRPC service listens on")
	fs.StringVar(&f.cfg.DataDir, "data-dir", f.cfg.DataDir, "directory of the WAL and the catalog")
	fs.DurationVar(&f.cfg.SegmentDuration, "segment-duration", f.cfg.SegmentDuration, "how long a segment takes writes before it rolls over")
	fs.Var(&f.memLimit, "buffer-mem-limit", "memory for buffered data, e.g. 2GiB; the open segment rolls over at half of it, writes past it wait for room (--buffer-full-wait) or get RESOURCE_EXHAUSTED")
	fs.DurationVar(&f.cfg.FullWait, "buffer-full-wait", f.cfg.FullWait, "how long a write waits for room when the buffer is at --buffer-mem-limit while closed segments are being persisted, before it gets RESOURCE_EXHAUSTED; 0 refuses it at once (as when persistence fails or there is no object store)")
	fs.BoolVar(&f.cfg.WriteSlowdown, "buffer-slowdown", f.cfg.WriteSlowdown, "from seven eighths of --buffer-mem-limit while a segment is being persisted, pace writes so that the buffer reaches its limit about when the persist frees memory: each write waits at most a second, rather than every write stopping for the rest of the persist; false lets writes go at full speed until the limit")
	fs.BoolVar(&f.offHeap, "buffer-off-heap", true, "keep sealed chunks of buffered rows (most of the buffer) in memory maps of their own outside the Go heap, freed when their last reader is done: the resident set stays near the buffered bytes instead of growing with the GC's headroom; false keeps them on the Go heap")
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
	fs.DurationVar(&f.cfg.CompactionInterval, "compaction-interval", f.cfg.CompactionInterval, "how often the persisted files are looked at for compaction (each table's files of one day merged into one once there are --compaction-min-files); 0 turns compaction off")
	fs.IntVar(&f.cfg.CompactionMinFiles, "compaction-min-files", f.cfg.CompactionMinFiles, "how many persisted files of one table and day make a compaction (at least 2)")
	fs.Float64Var(&f.cfg.CompactionShare, "compaction-cpu-share", buffer.DefaultCompactionShare, "the most of one core's time a compaction takes while writes arrive (it sleeps between its steps), and its share of the persister's time while segments keep waiting (unless the buffer holds 3/4 of --buffer-mem-limit); 1 never holds it back; with no writes it takes what it needs")
	fs.StringVar(&f.retention, "retention", "none", "default retention of a database without its own (apron.database.update): rows older are invisible to reads and their Parquet files deleted, e.g. 30d, 2w, 36h; none keeps everything")
	f.store.register(fs)
	fs.StringVar(&f.queryCfg.CacheDir, "cache-dir", "", "local copies of persisted Parquet files fetched from the object store; default <data-dir>/cache")
	f.cacheSize = byteSize(f.queryCfg.CacheSize)
	fs.Var(&f.cacheSize, "cache-size", "most bytes of Parquet files kept in --cache-dir, least recently used out first, e.g. 10GiB")
	f.pageCacheSize = byteSize(query.DefaultPageCacheSize)
	fs.Var(&f.pageCacheSize, "page-cache-size", "most bytes of decompressed Parquet pages kept in memory for selective queries (one series, a time range), least recently used out first; 0 keeps none")
	fs.IntVar(&f.cfg.PersistConcurrency, "persist-concurrency", f.cfg.PersistConcurrency, "Parquet files of a closed segment written and uploaded at once")
	fs.BoolVar(&f.cfg.FullOrphanScan, "full-orphan-scan", false, "at startup, list every object under dbs/ in the object store and delete the Parquet files no listing names; without it, startup deletes those the data dir's journal names (what this data dir's crashes can leave) and lists nothing: use it once for a data dir of an older version, or one whose files were lost")
	fs.DurationVar(&f.cfg.PersistAttemptTimeout, "persist-attempt-timeout", f.cfg.PersistAttemptTimeout, "one object store request of a persist that takes longer (plus 1s per MiB it uploads) fails, is counted and logged, and is retried")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:8083", "address of the HTTP /metrics (Prometheus) and /debug/pprof/ (Go profiles) endpoints; empty to disable")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.IntVar(&f.gogc, "gogc", defaultGOGC, "Go's GC target percentage (as GOGC): the heap may grow this far past the live data between collections; a GOGC environment variable wins over the default")
	fs.Var(&f.gcMinHeap, "gc-min-heap", "the GC's heap goal is kept at least this big (GOGC raised while the live heap is small), so that a server whose data is off the Go heap does not collect every few MiB of a query's garbage; 0 for Go's own goal")
	fs.Var(&f.gcMemLimit, "gc-memory-limit", "Go's soft memory limit (as GOMEMLIMIT): the GC runs more often as the heap nears it; auto is --buffer-mem-limit plus half of it (at least 256MiB), off for none, or a size such as 3GiB; a GOMEMLIMIT environment variable wins over the default")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, the most the shutdown takes: in-flight writes, the cancelled queries and a persist in progress get this long (less a reserve for closing the WAL), then are cut off")
	fs.DurationVar(&f.sqlCfg.SlowQueryThreshold, "slow-query-threshold", f.sqlCfg.SlowQueryThreshold, "a call (query, ingest stream, any RPC) taking longer is logged at info as a slow request, with its request id, SQL and rows; 0 = the default 1s, negative = never (every call is logged at debug)")
	f.auth.register(fs)
	f.tls.register(fs)
	return f, fs
}

func parseServeFlags(args []string) (*serveFlags, error) {
	f, fs := newServeFlagSet()
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
	fs.Visit(func(fl *flag.Flag) { f.gcMemLimitGiven = f.gcMemLimitGiven || fl.Name == "gc-memory-limit" })
	f.gcMemLimitGiven = f.gcMemLimitGiven || os.Getenv("APRON_GC_MEMORY_LIMIT") != ""
	f.cfg.MemLimit = int64(f.memLimit)
	f.cfg.MaxValueSize = int64(f.maxValueSize)
	f.queryCfg.CacheSize = int64(f.cacheSize)
	f.queryCfg.PageCacheSize = int64(f.pageCacheSize)
	if f.pageCacheSize == 0 {
		f.queryCfg.PageCacheSize = -1 // none (0 is the engine's default)
	}
	f.queryCfg.StateDir = filepath.Join(f.cfg.DataDir, "query")
	if f.queryCfg.CacheDir == "" {
		f.queryCfg.CacheDir = filepath.Join(f.cfg.DataDir, "cache")
	}
	f.queryCfg.MemoryLimit = int64(f.queryMemLimit)
	r, err := catalog.ParseRetention(f.retention)
	if err != nil || r == 0 && !strings.EqualFold(strings.TrimSpace(f.retention), "none") && f.retention != "" {
		return nil, fmt.Errorf("--retention %q: want a duration such as 30d, 2w or 36h, or none", f.retention)
	}
	if r > 0 {
		f.cfg.Retention = r
	}
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

// serve is `apron serve`: it parses the flags, builds the server (which
// listens before it replays the WAL), runs it until SIGTERM or SIGINT and
// closes it. A SIGTERM that stops it cleanly, even during the startup,
// exits 0.
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := newServer(ctx, f, log)
	if errors.Is(err, errStartupInterrupted) {
		log.Info("apron stopped during startup")
		return nil
	}
	if err != nil {
		return err
	}
	if err := errors.Join(s.Run(ctx), s.Close()); err != nil {
		log.Error("apron stopped with an error", "err", err)
		return err
	}
	log.Info("apron stopped")
	return nil
}
