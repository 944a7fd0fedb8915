//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	duck "github.com/duckdb/duckdb-go-bindings"
	"golang.org/x/sync/singleflight"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
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
	// Timeout cancels a query that runs longer (--query-timeout); 0 means
	// no limit.
	Timeout time.Duration
	// CacheDir holds local copies of persisted Parquet files fetched from
	// the buffer's object store (--cache-dir; cmd/apron defaults it to
	// <data-dir>/cache). Required when the store is not a local one, whose
	// files are read in place.
	CacheDir string
	// CacheSize bounds the bytes of files in CacheDir (--cache-size); the
	// least recently used go first. Files a running query reads are kept
	// even past it. 0 means DefaultCacheSize.
	CacheSize int64
	// StateDir is where the engine keeps what it would rather not learn
	// again after a restart: which files' latest rows to read ahead
	// (latest_file_hint.go); cmd/apron sets it to <data-dir>/query. ""
	// keeps nothing.
	StateDir string
	// PageCacheSize bounds the bytes of decompressed Parquet pages kept in
	// memory for selective queries (--page-cache-size; pqpages.go). 0
	// means DefaultPageCacheSize; negative, no page cache.
	PageCacheSize int64
	// TempDir is where DuckDB may spill what does not fit in MemoryLimit
	// (--query-temp-dir); "" means no spilling: such a query fails. DuckDB
	// may write files there (and nowhere else).
	TempDir string
	// ExtraProcs is added to GOMAXPROCS while queries run (see procBoost);
	// cmd/apron sets it to the DuckDB threads unless GOMAXPROCS is set.
	ExtraProcs int
	Logger     *slog.Logger
}

// DefaultTimeout is the Timeout `apron serve` starts with.
const DefaultTimeout = 10 * time.Minute

// DefaultCacheSize is the CacheSize `apron serve` starts with: 10 GiB.
const DefaultCacheSize = 10 << 30

// DefaultPageCacheSize is the PageCacheSize `apron serve` starts with: 64
// MiB, a thousand 64 KiB pages: the pages of a few hundred selective
// queries of distinct series.
const DefaultPageCacheSize = 64 << 20

// DefaultConfig returns the configuration `apron serve` starts with.
func DefaultConfig() Config {
	return Config{MaxConcurrent: 16, QueueTimeout: 5 * time.Second, Timeout: DefaultTimeout, CacheSize: DefaultCacheSize}
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
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("query timeout %s is negative (--query-timeout)", c.Timeout))
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

	// sem holds one token per running query; sysSem one per query that
	// reads only system tables, which has slots of its own (slots.go).
	sem    chan struct{}
	sysSem chan struct{}
	procs  *procBoost
	// parsers are idle connections that admission parses statements on
	// (json_serialize_sql), outside the pool: a statement is admitted
	// before it takes a slot.
	parsers struct {
		sync.Mutex
		idle []*conn
	}

	// qstate is per-query state (time bounds) by DuckDB connection id,
	// read by the scans' bind.
	qstate sync.Map // uint64 → *queryState
	// running holds the queries started and not finished, for
	// system.queries.
	running sync.Map // int64 → *runningQuery
	// pooled holds the ids of the pool's connections, which run clients'
	// statements.
	pooled sync.Map // uint64 → struct{}

	views viewSync
	// parses and shapes keep what repeats from one run of a statement to
	// the next (parsecache.go).
	parses *parseCache
	shapes *shapeCache
	// boundValues keeps the values of constant time bounds (evalTimes).
	boundValues *lru[string, evaluated]
	// directShapes keeps the result schemas of filtered direct scans by
	// their shape (direct_shape.go).
	directShapes *lru[directShapeKey, *arrow.Schema]
	// footers keeps the parsed footers of persisted files (pqfooter.go).
	footers *lru[footerKey, *metadata.FileMetaData]
	// groupStats keeps their row groups' statistics (pqstats.go).
	groupStats *lru[footerKey, *groupStats]
	// typesMu.m keeps the DuckDB types of the scans' column type lists
	// (bindTypes), destroyed by Close.
	typesMu struct {
		sync.Mutex
		m map[string][]duck.LogicalType
	}
	// evalTemplate is a serialized statement time bounds are evaluated
	// with (see evalTimes).
	evalTemplate string

	mu struct {
		sync.Mutex
		idle   []*conn
		active map[*conn]struct{}
		open   int
		closed bool // no query starts any more (Drain or Close)
		shut   bool // Close ran
	}
	queries       atomic.Int64 // queries started
	chunksScanned atomic.Int64 // buffered chunks read by scans
	chunksPruned  atomic.Int64 // buffered chunks skipped by time pruning
	// rowsSelectedOut are rows of chunks read that scans did not emit,
	// as none of them could match the query's string equalities
	// (scan_select.go).
	rowsSelectedOut atomic.Int64
	directScans     atomic.Int64 // queries streamed as direct scans
	directUnprep    atomic.Int64 // of them, streamed without a Prepare (direct_shape.go)
	directFileScans atomic.Int64 // of them, filtered ones that read persisted files (direct_files.go)
	plansReused     atomic.Int64 // queries run on a kept plan (plancache.go)
	dbSwitches      atomic.Int64 // connections made to change database (pickIdle)
	metaAnswers     atomic.Int64 // queries answered from metadata alone (metadirect.go)
	boundsInGo      atomic.Int64 // bounds relative to now() evaluated in Go (nowbounds.go)
	// metaChunks and metaFiles are counted from metadata (metacount.go).
	metaChunks, metaFiles atomic.Int64
	// newestChunks and newestFiles are left out as older than a top-n's
	// rows (newest.go).
	newestChunks, newestFiles atomic.Int64
	// latestChunks and latestFiles are left out as older than every key
	// value's latest row (latest.go).
	latestChunks, latestFiles atomic.Int64
	// latestFileSwaps are files DuckDB was given as their latest rows
	// (latest_file_swap.go).
	latestFileSwaps atomic.Int64
	// latestCombos keeps the combinations of key columns sealed chunks
	// hold (latest_combos.go).
	latestCombos *comboCache
	// deleteFilesRead and deleteFilesSkipped are the persisted files a
	// DELETE by rewrite read whole, or did not (delete_rewrite.go).
	deleteFilesRead, deleteFilesSkipped atomic.Int64
	lastValueUses                       atomic.Int64 // scans fed from a last-value cache
	panics                              atomic.Int64 // panics recovered: queries failed as they started, background steps (panics.go)
	// stopFills ends the goroutine that fills last-value caches;
	// fillsDone is closed when it has returned.
	stopFills context.CancelFunc
	fillsDone chan struct{}
	// scanMem allocates the batches direct scans build; they are released
	// once sent, and reused.
	scanMem *buffer.Recycler

	// pages holds decompressed pages of persisted files (pqpages.go); nil
	// when turned off.
	pages *lru[pqPageKey, *pqPage]
	// pageIndexes holds the decoded page indexes of persisted files'
	// row groups (pqindex.go).
	pageIndexes *lru[pqIndexKey, *rgIndex]
	// fileKeys holds the key values persisted files can hold, for the
	// latest row per key (latest_files.go).
	fileKeys *lru[fileKeysKey, *fileKeySet]
	// fileRows holds persisted files' latest row per key value, for the
	// latest row per key (latest_file_rows.go); fileRowsFlight reads a
	// file's once for concurrent queries; fileRowsRead counts the reads.
	fileRows       *lru[fileKeysKey, *fileRows]
	fileRowsFlight singleflight.Group
	fileRowsRead   atomic.Int64
	// latestWarm reads files' latest rows ahead (latest_file_warm.go):
	// latestWarmed counts the files, stopWarm ends its goroutine, and
	// warmDone is closed when it has returned.
	latestWarm   latestWarm
	latestWarmed atomic.Int64
	stopWarm     context.CancelFunc
	warmDone     chan struct{}

	// cache holds persisted files; nil without an object store.
	cache            *fileCache
	filesScanned     atomic.Int64
	filesPruned      atomic.Int64
	rowGroupsScanned atomic.Int64
	rowGroupsPruned  atomic.Int64
}

// conn is one pooled DuckDB connection.
type conn struct {
	c      duck.Connection
	id     uint64
	schema string // the database unqualified names resolve in now
	// switches counts the changes of schema (Stats.DatabaseSwitches).
	switches *atomic.Int64
	sql      string        // the statement prepared last, for system.queries
	inTx     bool          // in the read-only transaction of the query it runs
	sem      chan struct{} // the slots it holds one of while active
	// beginTx and endTx are BEGIN TRANSACTION READ ONLY and ROLLBACK,
	// prepared on first use: every query runs both, and a prepared one
	// runs in half the time of a parsed one (~40 µs saved per query).
	beginTx, endTx duck.PreparedStatement
	// serialize is SELECT json_serialize_sql($1), prepared on first use
	// (parseSQL).
	serialize duck.PreparedStatement
	// evals are the statements that evaluate the time bounds of queries
	// (evalTimes), by database and bound expressions, prepared on first
	// use: run again, they give now() of the query's transaction.
	evals map[string]duck.PreparedStatement
	// plans are statements prepared for earlier queries, kept for the
	// next query of the same text (plancache.go); plan is the key the
	// statement of the query running now is kept under when it ends
	// well, nil when it is not to be kept.
	plans []plan
	plan  *planKey
	// planSchema is the result schema of the query running now, when
	// known (conn.resultSchemaOf): kept with its plan.
	planSchema *arrow.Schema
	// broken: a panic left the connection in an unknown state; release
	// closes it (panics.go).
	broken bool
}

// maxConnEvals bounds conn.evals; past it the statements are dropped and
// prepared again as used.
const maxConnEvals = 64

// evaluation is the prepared statement of key, prepared from the SQL
// text sql gives if the connection has none yet.
func (c *conn) evaluation(key string, sql func() (string, error)) (duck.PreparedStatement, error) {
	if stmt, ok := c.evals[key]; ok {
		return stmt, nil
	}
	text, err := sql()
	if err != nil {
		return duck.PreparedStatement{}, err
	}
	var stmt duck.PreparedStatement
	if duck.Prepare(c.c, text, &stmt) == duck.StateError {
		err := classify(duck.PrepareError(stmt))
		duck.DestroyPrepare(&stmt)
		return duck.PreparedStatement{}, err
	}
	if len(c.evals) >= maxConnEvals {
		c.dropEvals()
	}
	if c.evals == nil {
		c.evals = map[string]duck.PreparedStatement{}
	}
	c.evals[key] = stmt
	return stmt, nil
}

func (c *conn) dropEvals() {
	for k, stmt := range c.evals {
		duck.DestroyPrepare(&stmt)
		delete(c.evals, k)
	}
}

// close frees the connection's prepared statements and closes it.
func (c *conn) close() {
	duck.DestroyPrepare(&c.beginTx)
	duck.DestroyPrepare(&c.endTx)
	duck.DestroyPrepare(&c.serialize)
	c.dropEvals()
	c.dropPlans()
	duck.Disconnect(&c.c)
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
	if cfg.PageCacheSize == 0 {
		cfg.PageCacheSize = DefaultPageCacheSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{wb: wb, cfg: cfg, log: cfg.Logger, sem: make(chan struct{}, cfg.MaxConcurrent), sysSem: make(chan struct{}, systemSlots),
		procs:        newProcBoost(cfg.ExtraProcs),
		parses:       newLRU[string, *parsed](defaultParseCacheBytes),
		shapes:       newLRU[shapeKey, *shape](defaultShapeCacheEntries),
		boundValues:  newLRU[string, evaluated](defaultBoundValueBytes),
		directShapes: newLRU[directShapeKey, *arrow.Schema](defaultDirectShapeEntries),
		footers:      newLRU[footerKey, *metadata.FileMetaData](defaultFooterCacheBytes),
		groupStats:   newLRU[footerKey, *groupStats](defaultFooterCacheBytes / 4),
		pageIndexes:  newLRU[pqIndexKey, *rgIndex](defaultPageIndexCacheBytes),
		fileKeys:     newLRU[fileKeysKey, *fileKeySet](defaultFileKeysBytes),
		fileRows:     newLRU[fileKeysKey, *fileRows](defaultFileRowsBytes),
		latestCombos: newComboCache(),
		scanMem:      buffer.NewRecycler(wb.Allocator())}
	if cfg.PageCacheSize > 0 {
		e.pages = newLRU[pqPageKey, *pqPage](cfg.PageCacheSize)
	}
	e.typesMu.m = make(map[string][]duck.LogicalType)
	if store := wb.Store(); store != nil {
		if cfg.CacheDir == "" {
			if _, local := inPlace(store, persist.File{Path: "x"}); !local {
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

	if err := e.openDuckDB(); err != nil {
		return nil, err
	}
	rows, err := queryStrings(e.conv, evalTemplateSQL)
	if err != nil || len(rows) != 1 {
		e.closeDuckDB()
		return nil, fmt.Errorf("query: serializing the bounds template: %v", err)
	}
	e.evalTemplate = rows[0][0]
	var fillCtx context.Context
	fillCtx, e.stopFills = context.WithCancel(context.Background())
	e.fillsDone = make(chan struct{})
	go e.runLastValueFills(fillCtx, e.fillsDone)
	var warmCtx context.Context
	warmCtx, e.stopWarm = context.WithCancel(context.Background())
	e.warmDone = make(chan struct{})
	e.latestWarm.hintPath = latestHintPath(cfg.StateDir)
	e.latestWarm.hinted = e.loadLatestHint(e.latestWarm.hintPath)
	e.latestWarm.hintDone = make(chan struct{})
	go e.runLatestWarm(warmCtx, e.warmDone)
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
	if e.mu.shut {
		e.mu.Unlock()
		return nil
	}
	e.mu.shut = true
	e.mu.closed = true
	for c := range e.mu.active {
		duck.Interrupt(c.c)
	}
	e.mu.Unlock()
	e.stopFills()
	<-e.fillsDone
	e.stopWarm()
	<-e.warmDone
	e.saveLatestHint()
	for range cap(e.sem) {
		e.sem <- struct{}{}
	}
	for range cap(e.sysSem) {
		e.sysSem <- struct{}{}
	}
	e.closeParsers()
	e.mu.Lock()
	for _, c := range e.mu.idle {
		c.close()
	}
	e.mu.idle = nil
	e.mu.open = 0
	e.mu.Unlock()
	e.closeDuckDB()
	e.typesMu.Lock()
	for _, types := range e.typesMu.m {
		destroyTypes(types)
	}
	e.typesMu.m = nil
	e.typesMu.Unlock()
	// Every query has given its connection back: no scan allocates now.
	e.scanMem.Close()
	e.procs.close()
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
	// RowsSelectedOut are rows of buffered chunks read that no string
	// equality of their query could match, which scans did not emit.
	RowsSelectedOut int64
	DirectScans     int64 // queries streamed straight from storage (direct.go)
	// DirectUnprepared are the direct scans streamed without preparing
	// them on DuckDB (direct_shape.go).
	DirectUnprepared int64
	// DirectFileScans are the filtered direct scans that read persisted
	// files themselves (direct_files.go).
	DirectFileScans int64
	PlansReused     int64 // queries run on a plan kept from an earlier one (plancache.go)
	// DatabaseSwitches counts pooled connections made to change their
	// current database for a query (slots.go, pickIdle).
	DatabaseSwitches int64
	MetaAnswers      int64 // queries answered from metadata without running DuckDB (metadirect.go)
	BoundsInGo       int64 // time bounds relative to now() evaluated without DuckDB (nowbounds.go)
	LastValueUses    int64 // scans fed from a last-value cache (lastvalue.go)

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
	// The parse and shape caches (parsecache.go): statements found there
	// or not, what they hold now.
	ParseHits, ParseMisses uint64
	ParseEntries           int
	ParseBytes             int64
	ShapeHits, ShapeMisses uint64
	// The page cache (pqpages.go): pages found there or read, what it
	// holds now.
	PageHits, PageMisses uint64
	PageEntries          int
	PageBytes            int64
	// Chunks and files counted from their metadata (metacount.go), not
	// read.
	MetaChunks, MetaFiles int64
	// Chunks and files left out of an ORDER BY time DESC LIMIT n as older
	// than its rows (newest.go).
	NewestChunks, NewestFiles int64
	// Chunks and files left out of a latest row per key (GROUP BY key
	// with max and arg_max of time) as older than every key value's
	// latest row (latest.go).
	LatestChunks, LatestFiles int64
	// LatestFileSwaps are the persisted files DuckDB read as their latest
	// rows per key, not whole (latest_file_swap.go).
	LatestFileSwaps int64
	// LatestFileReads are the persisted files read for their latest row
	// of each key value, and LatestFileRowsBytes what the cache of those
	// rows holds now (latest_file_rows.go).
	LatestFileReads, LatestFileRowsBytes int64
	// LatestFileReadAheads are the files of them read ahead, after a
	// persist, for the tables whose queries needed files
	// (latest_file_warm.go).
	LatestFileReadAheads int64
	// InternalErrors are the panics (bugs) recovered: queries failed as
	// they started, steps of the background work skipped or retried
	// (panics.go).
	InternalErrors int64
	// Persisted files a DELETE by rewrite read whole, and those it did
	// not: outside its condition's time bounds, or without a row it
	// matches (delete_rewrite.go).
	DeleteFilesRead, DeleteFilesSkipped int64
}

// Stats describes the engine now.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{Open: e.mu.open, Active: len(e.mu.active), Idle: len(e.mu.idle), Max: cap(e.sem),
		Queries: e.queries.Load(), ChunksScanned: e.chunksScanned.Load(), ChunksPruned: e.chunksPruned.Load(), RowsSelectedOut: e.rowsSelectedOut.Load(), DirectScans: e.directScans.Load(), DirectUnprepared: e.directUnprep.Load(), DirectFileScans: e.directFileScans.Load(), PlansReused: e.plansReused.Load(), DatabaseSwitches: e.dbSwitches.Load(), MetaAnswers: e.metaAnswers.Load(), BoundsInGo: e.boundsInGo.Load(), LastValueUses: e.lastValueUses.Load(),
		FilesScanned: e.filesScanned.Load(), FilesPruned: e.filesPruned.Load(),
		RowGroupsScanned: e.rowGroupsScanned.Load(), RowGroupsPruned: e.rowGroupsPruned.Load()}
	st.ParseHits, st.ParseMisses, st.ParseEntries, st.ParseBytes = e.parses.stats()
	st.ShapeHits, st.ShapeMisses, _, _ = e.shapes.stats()
	if e.pages != nil {
		st.PageHits, st.PageMisses, st.PageEntries, st.PageBytes = e.pages.stats()
	}
	st.MetaChunks, st.MetaFiles = e.metaChunks.Load(), e.metaFiles.Load()
	st.NewestChunks, st.NewestFiles = e.newestChunks.Load(), e.newestFiles.Load()
	st.LatestChunks, st.LatestFiles = e.latestChunks.Load(), e.latestFiles.Load()
	st.LatestFileSwaps = e.latestFileSwaps.Load()
	st.LatestFileReads, st.LatestFileReadAheads = e.fileRowsRead.Load(), e.latestWarmed.Load()
	_, _, _, st.LatestFileRowsBytes = e.fileRows.stats()
	st.DeleteFilesRead, st.DeleteFilesSkipped = e.deleteFilesRead.Load(), e.deleteFilesSkipped.Load()
	st.InternalErrors = e.panics.Load()
	if c := e.cache; c != nil {
		st.CacheHits, st.CacheFetches, st.CacheEvictions = c.hits.Load(), c.fetches.Load(), c.evictions.Load()
		st.CacheFetchedBytes = c.fetchedBytes.Load()
		if c.entries != nil {
			st.CacheBytes, st.CacheFiles = c.usage()
		}
	}
	return st
}

// Query plans and starts a query. database is the database unqualified
// table names resolve in ("" = none). The reader streams batches as DuckDB
// produces them; releasing it, or cancelling ctx, interrupts the query and
// returns its connection to the pool. Only a single query (SELECT …,
// EXPLAIN of one: see admit.go) is accepted. It is cancelled after
// Config.Timeout.
func (e *Engine) Query(ctx context.Context, sql string, database string) (array.RecordReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.checkDatabase(ctx, database); err != nil {
		return nil, err
	}
	a, err := e.admit(ctx, sql, database)
	if err != nil {
		return nil, updateAsQuery(sql, database, err)
	}
	ctx, cancel := e.withTimeout(ctx, a)
	c, err := e.acquire(ctx, a.systemOnly(), database)
	if err != nil {
		err = causeOf(ctx, err)
		cancel()
		return nil, err
	}
	e.queries.Add(1)
	r, err := e.start(ctx, c, a, database)
	if err != nil {
		e.release(c)
		err = causeOf(ctx, err)
		cancel()
		return nil, err
	}
	return timed(ctx, e.labeled(r, a, database), cancel), nil
}

// updateAsQuery is the error for a statement that Prepare takes as an
// update (INSERT, CREATE, DROP, DELETE: Apron's own grammars) sent to
// Query, which runs queries only (a query ticket, a statement ticket):
// err, admission's refusal, would say the statement is not supported at
// all. Apron's parsers run on this error path only.
func updateAsQuery(sql, database string, err error) error {
	if !errors.Is(err, ErrUnsupportedStatement) {
		return err
	}
	// Only a form the update path accepts gets the hint: CREATE SEQUENCE
	// keeps admission's refusal.
	var what string
	if _, ok, perr := parseDDL(sql, database); ok && perr == nil {
		what = "CREATE or DROP"
	} else if _, ok, perr := parseDelete(sql, database); ok && perr == nil {
		what = "DELETE"
	} else if _, ok, perr := parseInsert(sql, database); ok && perr == nil {
		what = "INSERT"
	} else {
		return err
	}
	return newError(ErrUnsupportedStatement, "%s is not supported as a query, which must return rows: execute it as an update (ADBC ExecuteUpdate, JDBC executeUpdate, Flight SQL CommandStatementUpdate)", what)
}

func (e *Engine) start(ctx context.Context, c *conn, a *admitted, database string) (_ array.RecordReader, err error) {
	defer e.recoverStart(c, &err) // panics.go
	qs, err := e.stateOn(c, a, database)
	if err != nil {
		return nil, err
	}
	if r := e.directUnprepared(ctx, c, a, qs); r != nil {
		return r, nil
	}
	stmt, err := e.prepareStmt(c, a, database, qs)
	if err != nil {
		return nil, err
	}
	if n := duck.NParams(stmt); n > 0 {
		// n is read before the statement is freed.
		duck.DestroyPrepare(&stmt)
		return nil, newError(ErrSyntax, "the query has %d parameters; prepare it and bind them", n)
	}
	if r := e.metaDirect(c, &stmt); r != nil {
		return r, nil
	}
	if r := e.direct(ctx, c, stmt); r != nil {
		return r, nil
	}
	r, err := e.execute(ctx, c, stmt)
	if err != nil {
		return nil, err
	}
	return e.withMeta(c, r), nil
}

// prepareOn prepares the admitted statement a on c with database
// current: the views are synced first, a read-only transaction begun
// (ended when the connection goes back to the pool) and the statement's
// time bounds and databases published for its scans. The caller destroys
// the statement.
func (e *Engine) prepareOn(c *conn, a *admitted, database string) (duck.PreparedStatement, error) {
	qs, err := e.stateOn(c, a, database)
	if err != nil {
		return duck.PreparedStatement{}, err
	}
	return e.prepareStmt(c, a, database, qs)
}

// stateOn readies c for the admitted statement a with database current:
// the views synced, the database set, the statement's query state
// published (prepareOn's first half).
func (e *Engine) stateOn(c *conn, a *admitted, database string) (*queryState, error) {
	if err := e.views.sync(); err != nil {
		return nil, err
	}
	if err := c.use(database); err != nil {
		return nil, err
	}
	// The query's read-only transaction is begun (c.begin) before DuckDB
	// runs anything for it: the evaluation of its time bounds, a Prepare,
	// its execution. A query answered without DuckDB, on a kept plan
	// (metadirect.go, direct.go), needs none: BEGIN and ROLLBACK were a
	// quarter of the server's CPU for a count(*).
	qs := e.prepareState(c, a)
	if qs.boundsErr != nil {
		// A bound that failed to evaluate ('x'::TIMESTAMP) failed the
		// transaction it ran in: the statement gets a new one, so that
		// what its client sees is DuckDB's error for the statement, not
		// "Current transaction is aborted".
		if err := c.end(); err != nil {
			return nil, fmt.Errorf("query: ending the transaction a time bound failed: %w", err)
		}
	}
	c.sql = a.sql
	c.plan, c.planSchema = nil, nil
	return qs, nil
}

// prepareStmt prepares a on c, readied by stateOn (prepareOn's second
// half): a kept plan of the same text if c has one.
func (e *Engine) prepareStmt(c *conn, a *admitted, database string, qs *queryState) (duck.PreparedStatement, error) {
	var stmt duck.PreparedStatement
	if !a.explain {
		k := planKey{sql: a.sql, database: database, catalog: qs.view.Catalog().Version(), views: e.views.synced.Load()}
		c.plan = &k
		if kept, ok := c.takePlan(k); ok {
			e.plansReused.Add(1)
			return kept, nil
		}
	}
	if err := c.begin(); err != nil {
		return stmt, err
	}
	if duck.Prepare(c.c, a.sql, &stmt) == duck.StateError {
		err := classify(duck.PrepareError(stmt))
		duck.DestroyPrepare(&stmt)
		return stmt, err
	}
	switch t := duck.PreparedStatementType(stmt); {
	case t == duck.StatementTypeSelect && !a.explain, t == duck.StatementTypeExplain && a.explain:
	default:
		duck.DestroyPrepare(&stmt)
		return stmt, newError(ErrUnsupportedStatement, "the statement prepared as DuckDB statement type %d, not the query it was admitted as", t)
	}
	return stmt, nil
}

// use makes database the connection's current one.
func (c *conn) use(database string) error {
	if c.schema == database {
		return nil
	}
	var set string
	if database == "" {
		set = "SET search_path = 'apron.main'"
	} else {
		// main keeps Apron's macros (now()) reachable.
		set = "SET search_path = " + quoteLiteral("apron."+quoteIdent(database)+",apron.main")
	}
	if err := exec(c.c, set); err != nil {
		return fmt.Errorf("query: setting database %q: %w", database, err)
	}
	c.schema = database
	if c.switches != nil {
		c.switches.Add(1)
	}
	return nil
}

// begin starts the connection's read-only transaction, if it has none.
// Whatever a statement does, it cannot write to the catalog that holds
// Apron's views and macros: DuckDB refuses writes in a read-only
// transaction. Its now() is the transaction's start, for the statement
// and the evaluation of its time bounds alike.
func (c *conn) begin() error {
	if c.inTx {
		return nil
	}
	if err := execPrepared(c.c, &c.beginTx, "BEGIN TRANSACTION READ ONLY"); err != nil {
		return fmt.Errorf("query: beginning a read-only transaction: %w", err)
	}
	c.inTx = true
	return nil
}

// end ends the connection's transaction, if it has one. If the ROLLBACK
// fails the connection counts as still in it: ending it again is tried
// again (release closes a connection that will not end its transaction).
func (c *conn) end() error {
	if !c.inTx {
		return nil
	}
	if err := execPrepared(c.c, &c.endTx, "ROLLBACK"); err != nil {
		return err
	}
	c.inTx = false
	return nil
}

// execPrepared runs sql through the statement *stmt, preparing it on c
// first if it is not yet.
func execPrepared(c duck.Connection, stmt *duck.PreparedStatement, sql string) error {
	if stmt.Ptr == nil {
		if duck.Prepare(c, sql, stmt) == duck.StateError {
			err := classify(duck.PrepareError(*stmt))
			duck.DestroyPrepare(stmt)
			*stmt = duck.PreparedStatement{}
			return err
		}
	}
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.ExecutePrepared(*stmt, &res) == duck.StateError {
		return classify(duck.ResultError(&res))
	}
	return nil
}

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
