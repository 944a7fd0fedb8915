package flightsvc

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/metadata"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// CatalogName is the one Flight SQL catalog; its db schemas are Apron's
// databases.
const CatalogName = "apron"

// Version is the server version reported through GetSqlInfo.
var Version = "0.1.0-dev"

// SQLServer is the Flight SQL side of the service.
type SQLServer struct {
	flightsql.BaseServer
	wb  *buffer.WriteBuffer
	log *slog.Logger
	mem memory.Allocator
}

// NewSQLServer returns the Flight SQL server over a write buffer.
func NewSQLServer(wb *buffer.WriteBuffer, log *slog.Logger) (*SQLServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &SQLServer{wb: wb, log: log, mem: wb.Allocator()}
	s.Alloc = s.mem
	infos := map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        "Apron",
		flightsql.SqlInfoFlightSqlServerVersion:                     Version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                "18.8.0",
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         false,
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(flightsql.SqlTransactionNone),
		flightsql.SqlInfoFlightSqlServerCancel:                      false,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
	}
	for id, v := range infos {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return nil, fmt.Errorf("flightsvc: registering sql info %d: %w", id, err)
		}
	}
	return s, nil
}

// DoPutCommandStatementIngest is ADBC's bulk ingest (adbc_ingest).
func (s *SQLServer) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	db, opts, err := ingestTarget(ctx, cmd)
	if err != nil {
		return 0, statusOf(err)
	}
	n, err := s.ingest(ctx, db, cmd.GetTable(), opts, rdr, nil)
	return n, statusOf(err)
}

// ingestTarget reads the database and the table definition options of an
// ingest command.
func ingestTarget(ctx context.Context, cmd flightsql.StatementIngest) (string, catalog.WriteOptions, error) {
	var opts catalog.WriteOptions
	if c := cmd.GetCatalog(); c != "" && c != CatalogName {
		return "", opts, fmt.Errorf("%w: catalog %q does not exist; the only catalog is %q", errNotFound, c, CatalogName)
	}
	if cmd.GetTemporary() {
		return "", opts, fmt.Errorf("%w: temporary tables are not supported", errUnsupported)
	}
	if len(cmd.GetTransactionId()) > 0 {
		return "", opts, fmt.Errorf("%w: transactions are not supported; ingest without a transaction id", errUnsupported)
	}
	if cmd.GetTable() == "" {
		return "", opts, fmt.Errorf("%w: no table named: set the ingest target table", errInvalidRequest)
	}
	db := cmd.GetSchema()
	if db == "" {
		db = databaseHeader(ctx)
	}
	if db == "" {
		return "", opts, fmt.Errorf("%w: no database named: set the ingest target db schema (ADBC option adbc.ingest.target_db_schema) or send a %q header", errInvalidRequest, "database")
	}
	tdo := cmd.GetTableDefinitionOptions()
	switch tdo.GetIfNotExist() {
	case flightsql.TableDefinitionOptionsTableNotExistOptionUnspecified, flightsql.TableDefinitionOptionsTableNotExistOptionCreate:
		opts.IfNotExists = catalog.CreateTable
	case flightsql.TableDefinitionOptionsTableNotExistOptionFail:
		opts.IfNotExists = catalog.FailIfNotExists
	default:
		return "", opts, fmt.Errorf("%w: unknown if_not_exist option %d", errInvalidRequest, tdo.GetIfNotExist())
	}
	switch tdo.GetIfExists() {
	case flightsql.TableDefinitionOptionsTableExistsOptionUnspecified, flightsql.TableDefinitionOptionsTableExistsOptionFail:
		opts.IfExists = catalog.FailIfExists
	case flightsql.TableDefinitionOptionsTableExistsOptionAppend:
		opts.IfExists = catalog.AppendIfExists
	case flightsql.TableDefinitionOptionsTableExistsOptionReplace:
		return "", opts, fmt.Errorf("%w: if_exists REPLACE (ADBC ingest mode replace) is not supported yet; use append or create_append", errUnsupported)
	default:
		return "", opts, fmt.Errorf("%w: unknown if_exists option %d", errInvalidRequest, tdo.GetIfExists())
	}
	return db, opts, nil
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

// ingest writes every batch of a stream into db.table. opts apply to the
// first batch; later ones append to the table it created or found. ack, if
// not nil, is called after each durable batch. It returns the rows durably
// written, also when it fails part way.
func (s *SQLServer) ingest(ctx context.Context, db, table string, opts catalog.WriteOptions, rdr flight.MessageReader, ack func(buffer.WriteResult, int64) error) (int64, error) {
	var total int64
	batches := 0
	write := func(rec arrow.RecordBatch) error {
		res, err := s.wb.Write(ctx, db, table, rec, opts)
		if err != nil {
			return fmt.Errorf("database %q table %q: batch %d rejected, %d rows of this stream written before it: %w",
				db, table, batches+1, total, err)
		}
		batches++
		total += res.Rows
		opts.IfExists = catalog.AppendIfExists
		if ack != nil {
			return ack(res, total)
		}
		return nil
	}
	for rdr.Next() {
		if err := write(rdr.RecordBatch()); err != nil {
			return total, err
		}
	}
	if err := rdr.Err(); err != nil {
		return total, fmt.Errorf("%w: database %q table %q: reading the stream after %d rows: %w", errInvalidRequest, db, table, total, err)
	}
	if batches == 0 {
		// No batch: the stream still defines the table (ADBC create mode
		// with no rows).
		sc := rdr.Schema()
		if sc == nil {
			return 0, fmt.Errorf("%w: the stream has no schema", errInvalidRequest)
		}
		rec := array.NewRecordBatch(sc, emptyColumns(s.mem, sc), 0)
		defer rec.Release()
		if err := write(rec); err != nil {
			return total, err
		}
	}
	return total, nil
}

func emptyColumns(mem memory.Allocator, sc *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return cols
}
