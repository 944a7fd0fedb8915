//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
)

// ErrUnsupportedStatement is wrapped by the error for a statement other than
// a query (SELECT, EXPLAIN …) or INSERT INTO … VALUES / SELECT.
var ErrUnsupportedStatement = errors.New("unsupported statement")

// StatementKind says what a statement does.
type StatementKind int

const (
	// KindQuery returns rows (SELECT, EXPLAIN, VALUES, WITH …).
	KindQuery StatementKind = iota
	// KindInsert writes rows into a table through the buffer's write path.
	KindInsert
	// KindDDL creates or drops a table or a database (ddl.go).
	KindDDL
	// KindDelete deletes rows of a table (delete.go).
	KindDelete
)

// IsUpdate says whether the statement runs as an update (Exec): it
// returns a count, not rows.
func (st *Statement) IsUpdate() bool { return st.Kind != KindQuery }

// Statement is a prepared statement: checked, with the schema of its
// result and of its parameters, but not run. It holds no connection, so a
// client may keep it as long as it likes.
type Statement struct {
	SQL      string
	Database string // the current database it was prepared in ("" = none)
	Kind     StatementKind
	// Schema is the result's schema; a KindInsert has no columns.
	Schema *arrow.Schema
	// Params is the schema of the parameters ($1, $2 … or ?), in order;
	// no fields when there are none.
	Params *arrow.Schema
	// Databases are the databases the statement reads or writes, as the
	// catalog names them ("system" for the system tables), sorted: no
	// table of any other is reachable when it runs.
	Databases []string

	insert *insertPlan // KindInsert
	ddl    *ddlPlan    // KindDDL
	del    *deletePlan // KindDelete
	// untypedResult: DuckDB types the result only once the parameters
	// are bound (see BoundSchema).
	untypedResult bool
}

var emptySchema = arrow.NewSchema(nil, nil)

// Prepare checks sql and returns its result and parameter schemas without
// running it.
func (e *Engine) Prepare(ctx context.Context, sql, database string) (_ *Statement, err error) {
	if err := e.checkDatabase(ctx, database); err != nil {
		return nil, err
	}
	st := &Statement{SQL: sql, Database: database, Kind: KindQuery}
	if len(sql) > maxSQLBytes {
		// Before any of Apron's own parsers (DDL, DELETE, INSERT) reads it.
		return nil, newError(ErrSyntax, "the statement is %d bytes; at most %d are accepted", len(sql), maxSQLBytes)
	}
	if p, ok, err := parseDDL(sql, database); err != nil {
		return nil, err
	} else if ok {
		// Checked now (types, permission), so that a bad statement fails
		// at prepare as any other; carried out by Exec.
		if _, err := e.prepareDDL(ctx, p); err != nil {
			return nil, err
		}
		st.Kind, st.ddl = KindDDL, p
		st.Schema, st.Params = emptySchema, emptySchema
		st.Databases = []string{p.db}
		return st, nil
	}
	if p, ok, err := parseDelete(sql, database); err != nil {
		return nil, err
	} else if ok {
		a, _, err := e.prepareDelete(ctx, p, database)
		if err != nil {
			return nil, err
		}
		st.Kind, st.del = KindDelete, p
		st.Schema, st.Params = emptySchema, emptySchema
		st.Databases = withDatabase(a.databases, p.db)
		return st, nil
	}
	source := sql
	if ins, ok, err := parseInsert(sql, database); err != nil {
		return nil, err
	} else if ok {
		st.Kind, st.insert = KindInsert, ins
		source = ins.source
	}
	version := e.wb.Catalog().Version()
	a, err := e.admit(ctx, source, database)
	if err != nil {
		return nil, err
	}
	key := shapeKey{sql: source, database: database, version: version}
	var shared shapeKey // of the statements that differ from it only in WHERE
	if st.Kind == KindQuery {
		if sh, ok := e.shapes.get(key); ok {
			st.Databases = a.databases
			st.Schema, st.Params, st.untypedResult = sh.schema, sh.params, sh.untypedResult
			return st, nil
		}
		if k := whereFreeShape(a); k != "" {
			shared = shapeKey{sql: k, database: database, version: version}
			if sh, ok := e.shapes.get(shared); ok {
				e.shapes.put(key, sh, 1)
				st.Databases = a.databases
				st.Schema, st.Params, st.untypedResult = sh.schema, sh.params, sh.untypedResult
				return st, nil
			}
		}
	}
	c, err := e.acquire(ctx, a.systemOnly(), database)
	if err != nil {
		return nil, err
	}
	defer e.release(c)
	stmt, err := e.prepareOn(c, a, database)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Kept for the query that follows (DoGet runs what GetFlightInfo
		// prepared): plancache.go.
		if err == nil {
			c.keepPlan(&stmt)
		}
		duck.DestroyPrepare(&stmt)
	}()
	st.Databases = a.databases
	var opts duck.ArrowOptions
	duck.ConnectionGetArrowOptions(c.c, &opts)
	defer duck.DestroyArrowOptions(&opts)
	var untyped []bool
	if st.Params, untyped, err = paramSchema(opts, stmt); err != nil {
		return nil, err
	}
	if st.Kind == KindInsert {
		if err := a.who.Write(st.insert.db); err != nil {
			return nil, err
		}
		st.Databases = withDatabase(st.Databases, st.insert.db)
		st.Schema = emptySchema
		if err := e.planInsert(st.insert, stmt); err != nil {
			return nil, err
		}
		st.Params = typeInsertParams(st.Params, untyped, a.tree, st.insert)
		return st, nil
	}
	if st.Schema, err = resultSchema(opts, stmt); err != nil {
		return nil, err
	}
	st.Schema = e.labelSchema(st.Schema, a, database)
	st.untypedResult = untypedResult(stmt)
	sh := &shape{schema: st.Schema, params: st.Params, untypedResult: st.untypedResult}
	e.shapes.put(key, sh, 1)
	if shared.sql != "" && st.Params.NumFields() == 0 {
		e.shapes.put(shared, sh, 1)
	}
	return st, nil
}

// withDatabase adds db to the sorted list dbs.
func withDatabase(dbs []string, db string) []string {
	for _, d := range dbs {
		if strings.EqualFold(d, db) {
			return dbs
		}
	}
	dbs = append(slices.Clone(dbs), db)
	slices.Sort(dbs)
	return dbs
}

// resultSchema is the Arrow schema of a prepared statement's result.
func resultSchema(opts duck.ArrowOptions, stmt duck.PreparedStatement) (*arrow.Schema, error) {
	n := int(duck.PreparedStatementColumnCount(stmt))
	names := make([]string, n)
	types := make([]duck.LogicalType, n)
	for i := range n {
		names[i] = duck.PreparedStatementColumnName(stmt, duck.IdxT(i))
		types[i] = duck.PreparedStatementColumnLogicalType(stmt, duck.IdxT(i))
		if id := duck.GetTypeId(types[i]); id == duck.TypeInvalid || id == duck.TypeAny {
			// A column whose type comes from an untyped parameter
			// (SELECT ? AS v) is unknown until bound: announced as a
			// string, what such a parameter is announced as too.
			duck.DestroyLogicalType(&types[i])
			types[i] = duck.CreateLogicalType(duck.TypeVarchar)
		}
	}
	schema, ed := duck.NewArrowSchema(opts, types, names)
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	if err := errorData(ed); err != nil {
		return nil, fmt.Errorf("%w: result schema: %w", ErrExecution, err)
	}
	return schema, nil
}

// checkDatabase refuses a current database that does not exist, and,
// before looking, one the caller may neither read nor write.
func (e *Engine) checkDatabase(ctx context.Context, database string) error {
	if database == "" {
		return nil
	}
	// A token with no permission on the database learns nothing of it,
	// not even whether it exists: refused as it would be if it did.
	if who := auth.FromContext(ctx); !who.CanRead(database) && !who.CanWrite(database) {
		return who.Read(database)
	}
	if _, ok := e.wb.Catalog().Database(database); !ok {
		return newError(ErrNotFound, "database %q not found", database)
	}
	return nil
}

// paramSchema describes a prepared statement's parameters. A parameter
// whose type DuckDB cannot infer (SELECT $1) is announced as a string:
// clients that build parameter vectors from the announced types (the
// Flight SQL JDBC driver) cannot put a value in a null-typed one; any
// value of any type still binds (bind.go).
func paramSchema(opts duck.ArrowOptions, stmt duck.PreparedStatement) (*arrow.Schema, []bool, error) {
	n := int(duck.NParams(stmt))
	fields := make([]arrow.Field, n)
	untyped := make([]bool, n)
	for i := range n {
		name := duck.ParameterName(stmt, duck.IdxT(i+1))
		if name == "" {
			name = fmt.Sprint(i + 1)
		}
		fields[i] = arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
		untyped[i] = true
		lt := duck.ParamLogicalType(stmt, duck.IdxT(i+1))
		if duck.GetTypeId(lt) != duck.TypeInvalid && duck.GetTypeId(lt) != duck.TypeAny {
			sc, ed := duck.NewArrowSchema(opts, []duck.LogicalType{lt}, []string{name})
			if errorData(ed) == nil && sc != nil && sc.NumFields() == 1 {
				fields[i].Type, untyped[i] = sc.Field(0).Type, false
			}
		}
		duck.DestroyLogicalType(&lt)
	}
	return arrow.NewSchema(announcedParams(fields), nil), untyped, nil
}

// announcedParams are the parameter types announced to clients: as
// DuckDB (or the INSERT's target columns) typed them, but timestamps in
// milliseconds, with a zone (UTC if they had none), and times of day in
// milliseconds. The Flight SQL JDBC driver's setTimestamp writes
// milliseconds into whatever timestamp vector it is given, unscaled (a
// driver bug: 12:00:00.123 bound as timestamp[ns] arrives as 00:29:27 of
// 1970), and binds a timestamp[ms] parameter right. Clients that bind
// their own vectors (ADBC) send any unit, nanoseconds included, and the
// server converts it exactly (bind.go).
func announcedParams(fields []arrow.Field) []arrow.Field {
	for i, f := range fields {
		if ts, ok := f.Type.(*arrow.TimestampType); ok {
			zone := ts.TimeZone
			if zone == "" {
				// Apron's times are UTC. Without a zone the driver binds the
				// wall-clock time of the JVM's zone (JDBC's rule for a
				// TIMESTAMP column), hours off in a JVM not on UTC; with
				// one it binds the instant.
				zone = "UTC"
			}
			fields[i].Type = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: zone}
		}
		if _, ok := f.Type.(*arrow.Time64Type); ok {
			// The driver's setTime writes milliseconds unscaled too
			// (12:30:00 bound as time64[us] arrived as 00:00:45).
			fields[i].Type = arrow.FixedWidthTypes.Time32ms
		}
	}
	return fields
}

// Run runs a KindQuery statement. params, if not nil, binds the
// statement's parameters by position: each row of params is one execution,
// and the results of all rows are streamed one after the other. It is
// cancelled after Config.Timeout.
func (e *Engine) Run(ctx context.Context, st *Statement, params arrow.RecordBatch) (array.RecordReader, error) {
	if st.Kind != KindQuery {
		return nil, newError(ErrUnsupportedStatement, "an INSERT returns no rows: execute it as an update")
	}
	return e.run(ctx, st.SQL, st.Database, st.Params.NumFields(), params)
}

// run starts sql once per row of params (once if it has no parameters),
// all rows within Config.Timeout.
func (e *Engine) run(ctx context.Context, sql, database string, nparams int, params arrow.RecordBatch) (array.RecordReader, error) {
	if nparams > 0 && (params == nil || params.NumRows() == 0) {
		return nil, newError(ErrSyntax, "the statement has %d parameters and none are bound", nparams)
	}
	if err := validateParams(params); err != nil {
		return nil, err
	}
	if err := e.checkDatabase(ctx, database); err != nil {
		return nil, err
	}
	a, err := e.admit(ctx, sql, database)
	if err != nil {
		return nil, err
	}
	return e.runAdmitted(ctx, a, database, nparams, params)
}

// runAdmitted runs the admitted statement a, once per row of params when
// it has parameters (nparams).
func (e *Engine) runAdmitted(ctx context.Context, a *admitted, database string, nparams int, params arrow.RecordBatch) (array.RecordReader, error) {
	ctx, cancel := e.withTimeout(ctx, a)
	first, err := e.runRow(ctx, a, database, params, 0)
	if err != nil {
		err = causeOf(ctx, err)
		cancel()
		return nil, err
	}
	if nparams == 0 || params.NumRows() == 1 {
		return timed(ctx, e.labeled(first, a, database), cancel), nil
	}
	params.Retain()
	rows := &rowsReader{e: e, ctx: ctx, a: a, database: database, params: params, schema: first.Schema(), cur: first, refs: 1}
	return timed(ctx, e.labeled(rows, a, database), cancel), nil
}

// runRow starts the admitted statement a with its parameters bound to row
// of params (if any).
func (e *Engine) runRow(ctx context.Context, a *admitted, database string, params arrow.RecordBatch, row int) (array.RecordReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := e.acquire(ctx, a.systemOnly(), database)
	if err != nil {
		return nil, err
	}
	e.queries.Add(1)
	if params == nil {
		// Without parameters a prepared query runs as its text does
		// (Query), answered without a DuckDB Prepare where it can be
		// (directUnprepared): ADBC Python and JDBC prepare every
		// statement, and a one-series query of a new text through them
		// was prepared in DuckDB at every DoGet (2.25 ms on the server
		// against ~0.7 for the same text as a ticket).
		r, err := e.start(ctx, c, a, database)
		if err != nil {
			e.release(c)
			return nil, err
		}
		return r, nil
	}
	stmt, err := e.prepareOn(c, a, database)
	if err != nil {
		e.release(c)
		return nil, err
	}
	if n := int(duck.NParams(stmt)); n > 0 {
		if err := bindRow(stmt, n, params, row); err != nil {
			duck.DestroyPrepare(&stmt)
			e.release(c)
			return nil, err
		}
	}
	r, err := e.execute(ctx, c, stmt)
	if err != nil {
		// execute destroyed stmt; the connection is still ours.
		e.release(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return e.withMeta(c, r), nil
}

// rowsReader streams the results of one execution per parameter row, each
// started when the one before has ended.
type rowsReader struct {
	e        *Engine
	ctx      context.Context
	a        *admitted
	database string
	params   arrow.RecordBatch
	schema   *arrow.Schema
	cur      array.RecordReader
	row      int
	err      error
	refs     int
}

func (r *rowsReader) Retain()               { r.refs++ }
func (r *rowsReader) Schema() *arrow.Schema { return r.schema }
func (r *rowsReader) Err() error            { return r.err }

func (r *rowsReader) Release() {
	if r.refs--; r.refs > 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
	}
	r.params.Release()
}

func (r *rowsReader) Next() bool {
	for r.err == nil && r.cur != nil {
		if r.cur.Next() {
			return true
		}
		if r.err = r.cur.Err(); r.err != nil {
			return false
		}
		if r.row+1 >= int(r.params.NumRows()) {
			return false
		}
		r.cur.Release()
		r.row++
		next, err := r.e.runRow(r.ctx, r.a, r.database, r.params, r.row)
		if err != nil {
			r.cur, r.err = nil, err
			return false
		}
		if !r.schema.Equal(next.Schema()) {
			next.Release()
			r.cur, r.err = nil, newError(ErrExecution, "parameter row %d gives a result of another schema", r.row)
			return false
		}
		r.cur = next
	}
	return false
}

func (r *rowsReader) RecordBatch() arrow.RecordBatch {
	if r.cur == nil {
		return nil
	}
	return r.cur.RecordBatch()
}

func (r *rowsReader) Record() arrow.RecordBatch { return r.RecordBatch() }
