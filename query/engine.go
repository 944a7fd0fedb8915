//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/buffer"
)

// Config configures an Engine. Flags of `apron serve` map onto it in
// cmd/apron only.
type Config struct {
	// MemoryLimit is DuckDB's memory_limit in bytes (--query-memory-limit);
	// 0 leaves DuckDB's default.
	MemoryLimit int64
	// Threads is DuckDB's threads setting (--query-threads); 0 leaves
	// DuckDB's default (the number of cores).
	Threads int
	// MaxConcurrent bounds the queries running at once
	// (--max-concurrent-queries).
	MaxConcurrent int
	// QueueTimeout is how long a query waits for a free connection before
	// it fails with ErrTooManyQueries.
	QueueTimeout time.Duration
	// CacheDir holds local copies of persisted Parquet files fetched from
	// the buffer's object store (--cache-dir; cmd/apron defaults it to
	// <data-dir>/cache). Required when the store is not a local one, whose
	// files are read in place.
	CacheDir string
	// CacheSize bounds the bytes of files in CacheDir (--cache-size); the
	// least recently used go first. Files a running query reads are kept
	// even past it. 0 means DefaultCacheSize.
	CacheSize int64
	// ExtraProcs is added to GOMAXPROCS while queries run (see procBoost);
	// cmd/apron sets it to the DuckDB threads unless GOMAXPROCS is set.
	ExtraProcs int
	Logger     *slog.Logger
}

// DefaultCacheSize is the CacheSize `apron serve` starts with: 10 GiB.
const DefaultCacheSize = 10 << 30

// DefaultConfig returns the configuration `apron serve` starts with.
func DefaultConfig() Config {
	return Config{MaxConcurrent: 16, QueueTimeout: 5 * time.Second, CacheSize: DefaultCacheSize}
}

// Validate reports the settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("query memory limit %d bytes is negative (--query-memory-limit)", c.MemoryLimit))
	}
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("query threads %d is negative (--query-threads)", c.Threads))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max concurrent queries %d must be positive (--max-concurrent-queries)", c.MaxConcurrent))
	}
	if c.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("cache size %d bytes is negative (--cache-size)", c.CacheSize))
	}
	if c.QueueTimeout < 0 {
		errs = append(errs, fmt.Errorf("query queue timeout %s is negative", c.QueueTimeout))
	}
	return errors.Join(errs...)
}

// Engine runs SQL queries over a WriteBuffer. It is safe for concurrent use.
type Engine struct {
	wb  *buffer.WriteBuffer
	cfg Config
	log *slog.Logger

	db duck.Database
	// conv is never used to run a query: the scan converts Arrow data to
	// DuckDB chunks with its settings, from any thread.
	conv    duck.Connection
	threads int

	// sem holds one token per running query.
	sem   chan struct{}
	procs *procBoost

	// qstate is per-query state (time bounds) by DuckDB connection id,
	// read by the scans' bind.
	qstate sync.Map // uint64 → *queryState
	// running holds the queries started and not finished, for
	// system.queries.
	running sync.Map // int64 → *runningQuery

	views viewSync
	// evalTemplate is a serialized statement time bounds are evaluated
	// with (see evalTimes).
	evalTemplate string

	mu struct {
		sync.Mutex
		idle   []*conn
		active map[*conn]struct{}
		open   int
		closed bool
	}
	queries       atomic.Int64 // queries started
	chunksScanned atomic.Int64 // buffered chunks read by scans
	chunksPruned  atomic.Int64 // buffered chunks skipped by time pruning
	directScans   atomic.Int64 // queries streamed as direct scans
	// scanMem allocates the batches direct scans build; they are released
	// once sent, and reused.
	scanMem *buffer.Recycler

	// cache holds persisted files; nil without an object store.
	cache            *fileCache
	filesScanned     atomic.Int64
	filesPruned      atomic.Int64
	rowGroupsScanned atomic.Int64
	rowGroupsPruned  atomic.Int64

	// nativeDirs are the directories DuckDB may read persisted files in
	// (see native.go); footers caches the files' footers.
	nativeDirs []string
	footers    footerCache
}

// conn is one pooled DuckDB connection.
type conn struct {
	c      duck.Connection
	id     uint64
	schema string // the database unqualified names resolve in now
	sql    string // the statement prepared last, for system.queries
	// macros is the body of each file macro on this connection.
	macros map[string]string
}

// Open starts an engine over wb.
func Open(wb *buffer.WriteBuffer, cfg Config) (*Engine, error) {
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 16
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = 5 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{wb: wb, cfg: cfg, log: cfg.Logger, sem: make(chan struct{}, cfg.MaxConcurrent), procs: &procBoost{extra: cfg.ExtraProcs},
		scanMem: buffer.NewRecycler(wb.Allocator())}
	if store := wb.Store(); store != nil {
		if cfg.CacheDir == "" {
			if _, local := inPlace(store, buffer.PersistedFile{Path: "x"}); !local {
				return nil, errors.New("query: a cache dir is required to read persisted files (--cache-dir)")
			}
			e.cache = &fileCache{store: store} // local files only: read in place
		} else {
			c, err := newFileCache(cfg.CacheDir, cfg.CacheSize, store)
			if err != nil {
				return nil, err
			}
			e.cache = c
		}
	}
	e.mu.active = make(map[*conn]struct{})
	e.threads = cfg.Threads
	if e.threads == 0 {
		e.threads = runtime.NumCPU()
	}

	var dcfg duck.Config
	if duck.CreateConfig(&dcfg) == duck.StateError {
		return nil, errors.New("query: creating DuckDB config failed")
	}
	defer duck.DestroyConfig(&dcfg)
	settings := [][2]string{
		// Queries read Apron's tables only: no network, no extension
		// downloads; files only in the cache (external access is turned
		// off once the allowed directories are set, below).
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		// Apron's tables have no insertion order to keep (rows of a
		// table come from many segments, partitions and files), and
		// keeping it would make DuckDB run a scan without ORDER BY on one
		// thread: a table function cannot tell it batch order.
		{"preserve_insertion_order", "false"},
	}
	if cfg.MemoryLimit > 0 {
		settings = append(settings, [2]string{"memory_limit", fmt.Sprintf("%dB", cfg.MemoryLimit)})
	}
	if cfg.Threads > 0 {
		settings = append(settings, [2]string{"threads", fmt.Sprint(cfg.Threads)})
	}
	for _, s := range settings {
		if duck.SetConfig(dcfg, s[0], s[1]) == duck.StateError {
			return nil, fmt.Errorf("query: DuckDB setting %s=%s refused", s[0], s[1])
		}
	}
	var msg string
	if duck.OpenExt(":memory:", &e.db, dcfg, &msg) == duck.StateError {
		return nil, fmt.Errorf("query: opening DuckDB: %s", msg)
	}
	if duck.Connect(e.db, &e.conv) == duck.StateError {
		duck.Close(&e.db)
		return nil, errors.New("query: connecting to DuckDB failed")
	}
	e.nativeDirs = e.allowedDirs()
	if len(e.nativeDirs) > 0 {
		lits := make([]string, len(e.nativeDirs))
		for i, d := range e.nativeDirs {
			lits[i] = quoteLiteral(d)
		}
		if err := exec(e.conv, "SET GLOBAL allowed_directories = ["+strings.Join(lits, ", ")+"]"); err != nil {
			e.closeDuckDB()
			return nil, fmt.Errorf("query: DuckDB allowed_directories: %w", err)
		}
	}
	if err := exec(e.conv, "SET GLOBAL enable_external_access = false"); err != nil {
		e.closeDuckDB()
		return nil, fmt.Errorf("query: DuckDB enable_external_access: %w", err)
	}
	if err := e.registerScan(); err != nil {
		e.closeDuckDB()
		return nil, err
	}
	if err := e.views.init(e); err != nil {
		e.closeDuckDB()
		return nil, err
	}
	rows, err := queryStrings(e.conv, evalTemplateSQL)
	if err != nil || len(rows) != 1 {
		e.closeDuckDB()
		return nil, fmt.Errorf("query: serializing the bounds template: %v", err)
	}
	e.evalTemplate = rows[0][0]
	return e, nil
}

func (e *Engine) closeDuckDB() {
	e.views.close()
	duck.Disconnect(&e.conv)
	duck.Close(&e.db)
}

// Close interrupts running queries, waits until their readers are
// released, and closes DuckDB. Readers must be released for Close to
// return.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	for c := range e.mu.active {
		duck.Interrupt(c.c)
	}
	e.mu.Unlock()
	for range cap(e.sem) {
		e.sem <- struct{}{}
	}
	e.mu.Lock()
	for _, c := range e.mu.idle {
		duck.Disconnect(&c.c)
	}
	e.mu.idle = nil
	e.mu.open = 0
	e.mu.Unlock()
	e.closeDuckDB()
	// Every query has given its connection back: no scan allocates now.
	e.scanMem.Close()
	return nil
}

// Stats describes the connection pool and the work done.
type Stats struct {
	Open   int // connections made and not closed
	Active int // connections running a query
	Idle   int
	Max    int // MaxConcurrent

	Queries       int64 // queries started
	ChunksScanned int64 // buffered chunks read by scans
	ChunksPruned  int64 // buffered chunks skipped by time pruning
	DirectScans   int64 // queries streamed straight from storage (direct.go)

	// Persisted files: read, or skipped by time pruning (their
	// [MinTime, MaxTime], or all their row groups' time statistics).
	FilesScanned, FilesPruned int64
	// Row groups of the files opened: read, or skipped by their time
	// statistics.
	RowGroupsScanned, RowGroupsPruned int64
	// The file cache: files found there (or read in place), fetched from
	// the object store (and their bytes), evicted; what it holds now.
	CacheHits, CacheFetches, CacheFetchedBytes, CacheEvictions int64
	CacheBytes                                                 int64
	CacheFiles                                                 int
}

// Stats describes the engine now.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{Open: e.mu.open, Active: len(e.mu.active), Idle: len(e.mu.idle), Max: cap(e.sem),
		Queries: e.queries.Load(), ChunksScanned: e.chunksScanned.Load(), ChunksPruned: e.chunksPruned.Load(), DirectScans: e.directScans.Load(),
		FilesScanned: e.filesScanned.Load(), FilesPruned: e.filesPruned.Load(),
		RowGroupsScanned: e.rowGroupsScanned.Load(), RowGroupsPruned: e.rowGroupsPruned.Load()}
	if c := e.cache; c != nil {
		st.CacheHits, st.CacheFetches, st.CacheEvictions = c.hits.Load(), c.fetches.Load(), c.evictions.Load()
		st.CacheFetchedBytes = c.fetchedBytes.Load()
		if c.entries != nil {
			st.CacheBytes, st.CacheFiles = c.usage()
		}
	}
	return st
}

// acquire takes a connection, waiting up to QueueTimeout for a slot.
func (e *Engine) acquire(ctx context.Context) (*conn, error) {
	select {
	case e.sem <- struct{}{}:
	default:
		t := time.NewTimer(e.cfg.QueueTimeout)
		defer t.Stop()
		select {
		case e.sem <- struct{}{}:
		case <-t.C:
			return nil, fmt.Errorf("%w: %d queries are running (--max-concurrent-queries) and none finished within %s",
				ErrTooManyQueries, cap(e.sem), e.cfg.QueueTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		<-e.sem
		return nil, ErrClosed
	}
	var c *conn
	if n := len(e.mu.idle); n > 0 {
		c = e.mu.idle[n-1]
		e.mu.idle = e.mu.idle[:n-1]
	}
	if c == nil {
		c = &conn{}
		if duck.Connect(e.db, &c.c) == duck.StateError {
			e.mu.Unlock()
			<-e.sem
			return nil, errors.New("query: connecting to DuckDB failed")
		}
		if err := exec(c.c, "USE "+Catalog); err != nil {
			duck.Disconnect(&c.c)
			e.mu.Unlock()
			<-e.sem
			return nil, fmt.Errorf("query: new connection: %w", err)
		}
		var cc duck.ClientContext
		duck.ConnectionGetClientContext(c.c, &cc)
		c.id = uint64(duck.ClientContextGetConnectionId(cc))
		duck.DestroyClientContext(&cc)
		e.mu.open++
	}
	e.mu.active[c] = struct{}{}
	e.mu.Unlock()
	e.procs.enter()
	return c, nil
}

// release returns a connection to the pool.
func (e *Engine) release(c *conn) {
	e.dropState(c.id)
	e.mu.Lock()
	delete(e.mu.active, c)
	e.mu.idle = append(e.mu.idle, c)
	e.mu.Unlock()
	e.procs.exit()
	<-e.sem
}

// Query plans and starts a query. database is the database unqualified
// table names resolve in ("" = none). The reader streams batches as DuckDB
// produces them; releasing it, or cancelling ctx, interrupts the query and
// returns its connection to the pool. Only a single SELECT (or EXPLAIN)
// statement is accepted.
func (e *Engine) Query(ctx context.Context, sql string, database string) (array.RecordReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if database != "" {
		if _, ok := e.wb.Catalog().Database(database); !ok {
			return nil, newError(ErrNotFound, "database %q not found", database)
		}
	}
	c, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	e.queries.Add(1)
	r, err := e.start(ctx, c, sql, database)
	if err != nil {
		e.release(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return r, nil
}

func (e *Engine) start(ctx context.Context, c *conn, sql, database string) (array.RecordReader, error) {
	stmt, err := e.prepareOn(c, sql, database)
	if err != nil {
		return nil, err
	}
	if duck.NParams(stmt) > 0 {
		duck.DestroyPrepare(&stmt)
		return nil, newError(ErrSyntax, "the query has %d parameters; prepare it and bind them", duck.NParams(stmt))
	}
	if r := e.direct(ctx, c, stmt); r != nil {
		return r, nil
	}
	return e.execute(ctx, c, stmt)
}

// prepareOn prepares sql on c with database current: the views are synced
// first and the statement's time bounds published for its scans. Only a
// single query statement is accepted. The caller destroys the statement.
func (e *Engine) prepareOn(c *conn, sql, database string) (duck.PreparedStatement, error) {
	var stmt duck.PreparedStatement
	sql = qualifySystem(sql)
	if err := e.views.sync(); err != nil {
		return stmt, err
	}
	if c.schema != database {
		var set string
		if database == "" {
			set = "SET search_path = 'apron.main'"
		} else {
			// main keeps Apron's macros (now()) reachable.
			set = "SET search_path = " + quoteLiteral("apron."+quoteIdent(database)+",apron.main")
		}
		if err := exec(c.c, set); err != nil {
			return stmt, fmt.Errorf("query: setting database %q: %w", database, err)
		}
		c.schema = database
	}

	var ext duck.ExtractedStatements
	n := duck.ExtractStatements(c.c, sql, &ext)
	defer duck.DestroyExtracted(&ext)
	if n == 0 {
		msg := duck.ExtractStatementsError(ext)
		if msg == "" {
			return stmt, newError(ErrSyntax, "no statement in query")
		}
		return stmt, classify(msg)
	}
	if n > 1 {
		return stmt, newError(ErrSyntax, "%d statements in query; one is allowed", n)
	}
	if !readOnlyStatement.MatchString(sql) {
		return stmt, errUnsupported
	}
	qs, refs := e.prepareState(c, sql)
	c.sql = sql
	// The views and the connection's file macros stay as set until the
	// statement is bound.
	e.views.bindMu.RLock()
	defer e.views.bindMu.RUnlock()
	if err := e.setFiles(c, qs, refs); err != nil {
		return stmt, err
	}
	if duck.PrepareExtractedStatement(c.c, ext, 0, &stmt) == duck.StateError {
		err := classify(duck.PrepareError(stmt))
		duck.DestroyPrepare(&stmt)
		return stmt, err
	}
	switch t := duck.PreparedStatementType(stmt); t {
	case duck.StatementTypeSelect, duck.StatementTypeExplain:
	default:
		duck.DestroyPrepare(&stmt)
		return stmt, errUnsupported
	}
	return stmt, nil
}

var errUnsupported = newError(ErrUnsupportedStatement,
	"only queries (SELECT, WITH, VALUES, FROM, TABLE, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE) and INSERT INTO <table> VALUES … / SELECT … are supported")

// readOnlyStatement matches the first keyword of the statements a query may
// be: looking at it before DuckDB binds a DELETE or CREATE says "not
// supported" rather than some binder error about views.
var readOnlyStatement = regexp.MustCompile(`(?is)^(\s|--[^\n]*\n|/\*.*?\*/|\()*(select|with|values|from|table|explain|describe|show|summarize|pivot|unpivot)\b`)

// exec runs a statement that returns nothing of interest.
func exec(c duck.Connection, sql string) error {
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.Query(c, sql, &res) == duck.StateError {
		return classify(duck.ResultError(&res))
	}
	return nil
}

func quoteIdent(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
