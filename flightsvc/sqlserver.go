package flightsvc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/query"
)

// CatalogName is the one Flight SQL catalog; its db schemas are Apron's
// databases.
const CatalogName = "apron"

// Version is the server version reported through GetSqlInfo.
var Version = "0.1.0-dev"

// Config configures a SQLServer. Flags of `apron serve` map onto it in
// cmd/apron only.
type Config struct {
	Logger *slog.Logger
	// QueryIdleTimeout cancels a query whose client has taken no result
	// batch for that long (--query-idle-timeout), freeing its slot of
	// --max-concurrent-queries; 0 never does.
	QueryIdleTimeout time.Duration
	// Auth checks the tokens of calls; nil runs without authentication
	// (--without-auth): every call may do everything.
	Auth *auth.Verifier
	// Registerer takes the service's metrics; nil: none.
	Registerer prometheus.Registerer
	// SlowQueryThreshold is the duration past which a call (a query, an
	// ingest stream, any RPC) is logged at info as a slow request, with
	// its request id, SQL and rows (--slow-query-threshold). 0 means
	// DefaultSlowQueryThreshold; negative: no call is slow. Every call is
	// logged at debug, and a failed one at info or above, whatever this is.
	SlowQueryThreshold time.Duration
}

// DefaultQueryIdleTimeout is the QueryIdleTimeout `apron serve` starts
// with.
const DefaultQueryIdleTimeout = time.Minute

// SQLServer is the Flight SQL side of the service.
type SQLServer struct {
	flightsql.BaseServer
	wb   *buffer.WriteBuffer
	eng  *query.Engine
	log  *slog.Logger
	mem  memory.Allocator
	idle time.Duration

	sessions *sessionStore
	prepared *preparedStore
	running  *runningQueries
	schemas  *schemaEncodings // the encodings of result schemas, kept: schemacache.go
	auth     *authenticator
	calls    *callObserver  // the first interceptor: request ids, the log line and metrics of every call
	metrics  *rpcMetrics    // nil without a Registerer
	verifier *auth.Verifier // nil: authentication off
	closed   chan struct{}  // closed by Close
}

// NewSQLServer returns the Flight SQL server over a write buffer and the
// query engine that reads it.
func NewSQLServer(wb *buffer.WriteBuffer, eng *query.Engine, cfg Config) (*SQLServer, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.QueryIdleTimeout < 0 {
		return nil, fmt.Errorf("flightsvc: query idle timeout %s is negative (--query-idle-timeout)", cfg.QueryIdleTimeout)
	}
	s := &SQLServer{wb: wb, eng: eng, log: log, mem: wb.Allocator(), idle: cfg.QueryIdleTimeout,
		sessions: newSessionStore(log), prepared: newPreparedStore(), running: newRunningQueries(), closed: make(chan struct{})}
	s.schemas = newSchemaEncodings(s.mem)
	s.auth = newAuthenticator(cfg.Auth, s.sessions, log, cfg.Registerer)
	m, err := newRPCMetrics(cfg.Registerer, s.prepared)
	if err != nil {
		return nil, fmt.Errorf("flightsvc: registering metrics: %w", err)
	}
	s.metrics = m
	s.calls = newCallObserver(log, cfg.SlowQueryThreshold, m)
	s.verifier = cfg.Auth
	s.Alloc = s.mem
	for id, v := range s.sqlInfo() {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return nil, fmt.Errorf("flightsvc: registering sql info %d: %w", id, err)
		}
	}
	return s, nil
}

// Close releases the parameters bound to open prepared statements (and
// unregisters the gauge that counts them).
func (s *SQLServer) Close() {
	s.metrics.unregister()
	s.prepared.closeAll()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// DoPutCommandStatementIngest is ADBC's bulk ingest (adbc_ingest).
func (s *SQLServer) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	db, opts, replace, err := ingestTarget(ctx, cmd)
	if err != nil {
		return 0, statusOf(err)
	}
	if replace {
		n, err := s.replace(ctx, db, cmd.GetTable(), opts.IfNotExists, rdr)
		return n, statusOf(err)
	}
	n, err := s.ingest(ctx, db, cmd.GetTable(), opts, rdr)
	return n, statusOf(err)
}

// ingestTarget reads the database and the table definition options of an
// ingest command; replace is if_exists REPLACE (opts.IfNotExists still
// says what to do without a table).
func ingestTarget(ctx context.Context, cmd flightsql.StatementIngest) (db string, opts catalog.WriteOptions, replace bool, err error) {
	if c := cmd.GetCatalog(); c != "" && c != CatalogName {
		return "", opts, false, fmt.Errorf("%w: catalog %q does not exist; the only catalog is %q", errNotFound, c, CatalogName)
	}
	if cmd.GetTemporary() {
		return "", opts, false, fmt.Errorf("%w: temporary tables are not supported", errUnsupported)
	}
	if len(cmd.GetTransactionId()) > 0 {
		return "", opts, false, fmt.Errorf("%w: transactions are not supported; ingest without a transaction id", errUnsupported)
	}
	if cmd.GetTable() == "" {
		return "", opts, false, fmt.Errorf("%w: no table named: set the ingest target table", errInvalidRequest)
	}
	db = cmd.GetSchema()
	if db == "" {
		db = currentDatabase(ctx)
	}
	if db == "" {
		return "", opts, false, fmt.Errorf("%w: no database named: set the ingest target db schema (ADBC option adbc.ingest.target_db_schema), send a %q header or set the session option %q", errInvalidRequest, "database", sessionSchema)
	}
	tdo := cmd.GetTableDefinitionOptions()
	switch tdo.GetIfNotExist() {
	case flightsql.TableDefinitionOptionsTableNotExistOptionUnspecified, flightsql.TableDefinitionOptionsTableNotExistOptionCreate:
		opts.IfNotExists = catalog.CreateTable
	case flightsql.TableDefinitionOptionsTableNotExistOptionFail:
		opts.IfNotExists = catalog.FailIfNotExists
	default:
		return "", opts, false, fmt.Errorf("%w: unknown if_not_exist option %d", errInvalidRequest, tdo.GetIfNotExist())
	}
	switch tdo.GetIfExists() {
	case flightsql.TableDefinitionOptionsTableExistsOptionUnspecified, flightsql.TableDefinitionOptionsTableExistsOptionFail:
		opts.IfExists = catalog.FailIfExists
	case flightsql.TableDefinitionOptionsTableExistsOptionAppend:
		opts.IfExists = catalog.AppendIfExists
	case flightsql.TableDefinitionOptionsTableExistsOptionReplace:
		replace = true
	default:
		return "", opts, false, fmt.Errorf("%w: unknown if_exists option %d", errInvalidRequest, tdo.GetIfExists())
	}
	return db, opts, replace, nil
}

func emptyColumns(mem memory.Allocator, sc *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return cols
}
