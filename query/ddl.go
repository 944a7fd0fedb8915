//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
)

// DDL is never run by DuckDB, whose views over the buffer hold no tables
// of their own: a statement of one of these forms is parsed here, whole,
// and carried out on the catalog through the write buffer (durable before
// it returns, buffer/ddl.go):
//
//	CREATE SCHEMA [IF NOT EXISTS] db
//	CREATE TABLE [IF NOT EXISTS] [[apron.]db.]table (column type [NULL], …)
//	DROP TABLE [IF EXISTS] [[apron.]db.]table
//	DROP SCHEMA [IF EXISTS] db [CASCADE | RESTRICT]
//	CREATE / DROP LAST VALUE CACHE … (lastvalue_ddl.go)
//
// The grammar is an allow-list: a statement that is not exactly one of
// these, token by token, is refused (or, if it does not start with CREATE
// or DROP, goes to the SELECT admission, which refuses everything DuckDB
// does not parse as a query). Column types are DuckDB's: each type's
// words are checked to be type words only (names, numbers, parentheses,
// commas) and DuckDB resolves them, by preparing CAST(NULL AS <type>),
// to the type Apron stores.

type ddlOp int

const (
	ddlCreateSchema ddlOp = iota + 1
	ddlCreateTable
	ddlDropTable
	ddlDropSchema
	ddlCreateLastValue // lastvalue_ddl.go
	ddlDropLastValue
)

type ddlPlan struct {
	op        ddlOp
	db, table string
	ifFlag    bool // IF NOT EXISTS / IF EXISTS
	cascade   bool
	columns   []ddlColumn // CREATE TABLE, as written
	lvc       *lastValueDDL
}

type ddlColumn struct {
	name    string
	typ     string // the type's words, rejoined
	notNull bool
}

const ddlForms = "CREATE SCHEMA [IF NOT EXISTS] db; CREATE TABLE [IF NOT EXISTS] [db.]table (column type, …); DROP TABLE [IF EXISTS] [db.]table; DROP SCHEMA [IF EXISTS] db [CASCADE]; " + lastValueForms

// parseDDL recognizes the DDL forms. ok is false when sql does not start
// with CREATE or DROP.
func parseDDL(sql, database string) (p *ddlPlan, ok bool, err error) {
	toks, err := ddlTokens(sql)
	if err != nil || len(toks) == 0 || !(toks[0].isWord("CREATE") || toks[0].isWord("DROP")) {
		// Not DDL (or not lexable as such): the SELECT admission decides,
		// with DuckDB's parser and its message.
		return nil, false, nil
	}
	s := &ddlScanner{toks: toks}
	p = &ddlPlan{}
	bad := func(format string, args ...any) (*ddlPlan, bool, error) {
		return nil, true, newError(ErrSyntax, "%s; the DDL Apron runs: %s", fmt.Sprintf(format, args...), ddlForms)
	}
	create := s.word("CREATE")
	if !create {
		s.word("DROP")
	}
	switch {
	case s.word("LAST"):
		return parseLastValueDDL(s, create, database)
	case s.word("SCHEMA"):
		p.op = map[bool]ddlOp{true: ddlCreateSchema, false: ddlDropSchema}[create]
	case s.word("TABLE"):
		p.op = map[bool]ddlOp{true: ddlCreateTable, false: ddlDropTable}[create]
	default:
		what := "end of statement"
		if t, ok := s.peek(); ok {
			what = t.text
		}
		return bad("%s %s is not supported", map[bool]string{true: "CREATE", false: "DROP"}[create], what)
	}
	if s.word("IF") {
		if create && !s.word("NOT") {
			return bad("expected IF NOT EXISTS")
		}
		if !s.word("EXISTS") {
			return bad("expected EXISTS after IF")
		}
		p.ifFlag = true
	}
	names, ok := s.qualifiedName()
	if !ok {
		return bad("expected a name")
	}
	if p.op == ddlCreateSchema || p.op == ddlDropSchema {
		switch len(names) {
		case 1:
			p.db = names[0]
		case 2:
			if !strings.EqualFold(names[0], Catalog) {
				return bad("catalog %q does not exist; the only catalog is %s", names[0], Catalog)
			}
			p.db = names[1]
		default:
			return bad("a schema name has at most two parts, catalog.schema")
		}
	} else {
		var msg string
		if p.db, p.table, msg = tableName(names, database); msg != "" {
			return bad("%s", msg)
		}
	}
	if strings.EqualFold(p.db, SystemSchema) {
		return nil, true, newError(ErrSyntax, "the %s schema is Apron's own and cannot be created or changed", SystemSchema)
	}
	switch p.op {
	case ddlDropSchema:
		if s.word("CASCADE") {
			p.cascade = true
		} else {
			s.word("RESTRICT")
		}
	case ddlCreateTable:
		if s.word("AS") {
			return bad("CREATE TABLE … AS SELECT is not supported: create the table, then INSERT INTO … SELECT")
		}
		cols, msg := s.columnDefs()
		if msg != "" {
			return bad("%s", msg)
		}
		p.columns = cols
	}
	s.symbol(";")
	if t, ok := s.peek(); ok {
		return bad("unexpected %q", t.text)
	}
	return p, true, nil
}

// prepareDDL resolves a CREATE TABLE's column types with DuckDB, on a
// parser connection, and checks the caller may run the statement.
func (e *Engine) prepareDDL(ctx context.Context, p *ddlPlan) ([]catalog.ColumnDef, error) {
	who := auth.FromContext(ctx)
	if p.op == ddlDropSchema {
		if err := who.RequireAdmin("DROP SCHEMA"); err != nil {
			return nil, err
		}
	} else if err := who.Write(p.db); err != nil {
		return nil, err
	}
	if p.op != ddlCreateTable {
		return nil, nil
	}
	pc, err := e.parser()
	if err != nil {
		return nil, err
	}
	defer e.putParser(pc)
	defs := make([]catalog.ColumnDef, 0, len(p.columns))
	for _, c := range p.columns {
		dt, err := resolveColumnType(pc.c, c.typ)
		if err != nil {
			return nil, newError(ErrSyntax, "CREATE TABLE %q.%q column %q: %v", p.db, p.table, c.name, err)
		}
		if c.notNull && c.name != catalog.TimeColumn {
			return nil, newError(ErrSyntax, "CREATE TABLE %q.%q column %q: NOT NULL is not supported: Apron's columns (but time) are nullable", p.db, p.table, c.name)
		}
		if ts, ok := dt.(*arrow.TimestampType); ok && c.name == catalog.TimeColumn && ts.TimeZone == "" {
			// time is stored in nanoseconds whatever unit it is declared
			// in (TIMESTAMP is microseconds in DuckDB); writes of any unit
			// are converted, as they are for any table.
			dt = &arrow.TimestampType{Unit: arrow.Nanosecond}
		}
		defs = append(defs, catalog.ColumnDef{Name: c.name, Type: dt})
	}
	return defs, nil
}

// resolveColumnType asks DuckDB which type typ names (words checked by
// ddlTokens: no literal, operator or quote reaches DuckDB), and maps it
// to the type Apron stores.
func resolveColumnType(pc duck.Connection, typ string) (arrow.DataType, error) {
	var stmt duck.PreparedStatement
	defer duck.DestroyPrepare(&stmt)
	if duck.Prepare(pc, "SELECT CAST(NULL AS "+typ+")", &stmt) == duck.StateError {
		return nil, fmt.Errorf("type %s: %s", typ, duck.PrepareError(stmt))
	}
	lt := duck.PreparedStatementColumnLogicalType(stmt, 0)
	defer duck.DestroyLogicalType(&lt)
	if dt, ok := arrowTypeOf(duck.GetTypeId(lt)); ok {
		return dt, nil
	}
	return nil, fmt.Errorf("type %s is not one Apron stores; use BOOLEAN, TINYINT…BIGINT, UTINYINT…UBIGINT, FLOAT, DOUBLE, VARCHAR, BLOB, DATE, TIMESTAMP (_S, _MS, _NS) or TIMESTAMPTZ", typ)
}

// arrowTypeOf maps a DuckDB type to the Arrow type Apron stores for it.
func arrowTypeOf(id duck.Type) (arrow.DataType, bool) {
	switch id {
	case duck.TypeBoolean:
		return arrow.FixedWidthTypes.Boolean, true
	case duck.TypeTinyInt:
		return arrow.PrimitiveTypes.Int8, true
	case duck.TypeSmallInt:
		return arrow.PrimitiveTypes.Int16, true
	case duck.TypeInteger:
		return arrow.PrimitiveTypes.Int32, true
	case duck.TypeBigInt:
		return arrow.PrimitiveTypes.Int64, true
	case duck.TypeUTinyInt:
		return arrow.PrimitiveTypes.Uint8, true
	case duck.TypeUSmallInt:
		return arrow.PrimitiveTypes.Uint16, true
	case duck.TypeUInteger:
		return arrow.PrimitiveTypes.Uint32, true
	case duck.TypeUBigInt:
		return arrow.PrimitiveTypes.Uint64, true
	case duck.TypeFloat:
		return arrow.PrimitiveTypes.Float32, true
	case duck.TypeDouble:
		return arrow.PrimitiveTypes.Float64, true
	case duck.TypeVarchar:
		return arrow.BinaryTypes.String, true
	case duck.TypeBlob:
		return arrow.BinaryTypes.Binary, true
	case duck.TypeDate:
		return arrow.FixedWidthTypes.Date32, true
	case duck.TypeTimestampS:
		return &arrow.TimestampType{Unit: arrow.Second}, true
	case duck.TypeTimestampMS:
		return &arrow.TimestampType{Unit: arrow.Millisecond}, true
	case duck.TypeTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}, true
	case duck.TypeTimestampNS:
		return &arrow.TimestampType{Unit: arrow.Nanosecond}, true
	case duck.TypeTimestampTZ:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true
	}
	return nil, false
}

// execDDL carries out a prepared DDL statement.
func (e *Engine) execDDL(ctx context.Context, st *Statement) error {
	p := st.ddl
	cols, err := e.prepareDDL(ctx, p)
	if err != nil {
		return err
	}
	switch p.op {
	case ddlCreateSchema:
		_, err = e.wb.CreateDatabase(p.db, p.ifFlag)
	case ddlCreateTable:
		_, err = e.wb.CreateTable(p.db, p.table, cols, p.ifFlag)
	case ddlDropTable:
		_, err = e.wb.DropTable(p.db, p.table, p.ifFlag)
	case ddlDropSchema:
		_, err = e.wb.DropDatabase(p.db, p.cascade, p.ifFlag)
	case ddlCreateLastValue, ddlDropLastValue:
		err = e.execLastValueDDL(p)
	}
	if err != nil {
		return err
	}
	// The next query sees the change at once.
	return e.views.sync()
}

// tableName resolves a table name of one to three parts ([catalog.]
// [database.]table) with database current; msg says what is wrong with it,
// if anything.
func tableName(names []string, database string) (db, table, msg string) {
	switch len(names) {
	case 1:
		if database == "" {
			return "", "", fmt.Sprintf("table %q has no database: write db.table, or set a current database", names[0])
		}
		return database, names[0], ""
	case 2:
		return names[0], names[1], ""
	case 3:
		if !strings.EqualFold(names[0], Catalog) {
			return "", "", fmt.Sprintf("catalog %q does not exist; the only catalog is %s", names[0], Catalog)
		}
		return names[1], names[2], ""
	}
	return "", "", "a table name has at most three parts, catalog.database.table"
}
