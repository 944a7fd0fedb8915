//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
)

// An INSERT is not run by DuckDB, whose views over the buffer take no
// writes: its source (VALUES … or a query) is run as a query, cast to the
// table's column types, and the rows go through the buffer's write path —
// validated, WAL-durable, acknowledged — exactly as an ingest would.

type insertPlan struct {
	db, table string
	columns   []string // as written; nil: the table's columns in order
	source    string   // VALUES … / SELECT …
	castSQL   string   // the source cast to the table's types, set by planInsert
	// targets are the columns the source's columns go to, in order, with
	// their stored types (nil for a column not in the table yet); set by
	// planInsert.
	targets []arrow.DataType
}

var insertHead = regexp.MustCompile(`(?is)^\s*insert\s+into\s+`)

// parseInsert recognizes INSERT INTO <table> [(<columns>)] <source>. ok is
// false for any other statement.
func parseInsert(sql, database string) (p *insertPlan, ok bool, err error) {
	m := insertHead.FindStringIndex(sql)
	if m == nil {
		return nil, false, nil
	}
	bad := func(why string) (*insertPlan, bool, error) {
		return nil, true, newError(ErrSyntax, "INSERT: %s; the form supported is INSERT INTO [db.]table [(column, …)] VALUES (…), … or INSERT INTO [db.]table [(column, …)] SELECT …", why)
	}
	p = &insertPlan{}
	var rest, why string
	if p.db, p.table, rest, why = leadingTable(sql[m[1]:], database, "INSERT INTO"); why != "" {
		return bad(why)
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if strings.HasPrefix(rest, "(") && !startsQuery(rest[1:]) {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " \t\r\n")
			id, r, ok := identifier(rest)
			if !ok {
				return bad("expected a column name in the column list")
			}
			p.columns = append(p.columns, id)
			rest = strings.TrimLeft(r, " \t\r\n")
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
				continue
			}
			if strings.HasPrefix(rest, ")") {
				rest = rest[1:]
				break
			}
			return bad("expected , or ) in the column list")
		}
	}
	p.source = strings.TrimRight(strings.TrimSpace(rest), "; \t\r\n")
	if !startsQuery(p.source) {
		return bad("expected VALUES or a SELECT after the table")
	}
	return p, true, nil
}

// leadingTable reads the [[catalog.]db.]table name at the start of s
// (after the keywords what), with database the current one; why says
// what is wrong, if anything.
func leadingTable(s, database, what string) (db, table, rest, why string) {
	rest = s
	var parts []string
	for {
		id, r, ok := identifier(rest)
		if !ok {
			return "", "", "", "expected a table name after " + what
		}
		parts = append(parts, id)
		rest = r
		if !strings.HasPrefix(rest, ".") {
			break
		}
		rest = rest[1:]
	}
	switch len(parts) {
	case 1:
		if database == "" {
			return "", "", "", fmt.Sprintf("table %q has no database: write db.table, or set a current database", parts[0])
		}
		return database, parts[0], rest, ""
	case 2:
		return parts[0], parts[1], rest, ""
	case 3:
		if !strings.EqualFold(parts[0], "apron") && !strings.EqualFold(parts[0], "memory") {
			return "", "", "", fmt.Sprintf("catalog %q does not exist; the only catalog is apron", parts[0])
		}
		return parts[1], parts[2], rest, ""
	}
	return "", "", "", "a table name has at most three parts, catalog.database.table"
}

var queryStart = regexp.MustCompile(`(?is)^\s*\(?\s*(values|select|with|from)\b`)

func startsQuery(s string) bool { return queryStart.MatchString(s) }

var bareIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*`)

// identifier reads a bare or "quoted" identifier at the start of s.
func identifier(s string) (id, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] == '"' {
				if i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				return b.String(), s[i+1:], b.Len() > 0
			}
			b.WriteByte(s[i])
		}
		return "", s, false
	}
	m := bareIdent.FindString(s)
	return m, s[len(m):], m != ""
}

// planInsert checks the insert against the table and writes the query that
// casts its source to the table's types. stmt is the prepared source.
func (e *Engine) planInsert(p *insertPlan, stmt duck.PreparedStatement) error {
	t, ok := e.wb.Catalog().Table(p.db, p.table)
	if !ok {
		return newError(ErrNotFound, "INSERT into table %q of database %q: the table does not exist (a first ingest creates it)", p.table, p.db)
	}
	n := int(duck.PreparedStatementColumnCount(stmt))
	names := p.columns
	if names == nil {
		if n > len(t.Columns) {
			return newError(ErrSyntax, "INSERT into %q.%q: %d values per row, the table has %d columns", p.db, p.table, n, len(t.Columns))
		}
		for _, c := range t.Columns[:n] {
			names = append(names, c.Name)
		}
	} else if n != len(names) {
		if duck.NParams(stmt) == 0 {
			return newError(ErrSyntax, "INSERT into %q.%q: %d columns named, %d values per row", p.db, p.table, len(names), n)
		}
		// With parameters of types not known yet, DuckDB may not know the
		// source's columns before the values are bound: trust the list,
		// and let a wrong count fail when the insert runs.
		n = len(names)
	}
	aliases := make([]string, n)
	sel := make([]string, n)
	p.targets = make([]arrow.DataType, n)
	for i, name := range names {
		aliases[i] = fmt.Sprintf("c%d", i+1)
		expr := aliases[i]
		if c, _, ok := t.Column(name); ok {
			p.targets[i] = c.Type
			if typ, ok := duckTypeName(c.Type); ok {
				expr = fmt.Sprintf("CAST(%s AS %s)", aliases[i], typ)
			}
		}
		sel[i] = expr + " AS " + quoteIdent(name)
	}
	p.castSQL = fmt.Sprintf("SELECT %s FROM (%s) AS __apron_insert(%s)", strings.Join(sel, ", "), p.source, strings.Join(aliases, ", "))
	return nil
}

// typeInsertParams gives the parameters DuckDB could not type (a bare
// "?" in VALUES (?, ?, ?) has no type until bound) the type of the column
// they are inserted into, so that clients that build parameter vectors
// from the announced types (the Flight SQL JDBC driver: a null-typed one
// takes no value) can bind them. tree is the source's parse
// (json_serialize_sql).
func typeInsertParams(params *arrow.Schema, untyped []bool, tree map[string]any, p *insertPlan) *arrow.Schema {
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 || params.NumFields() == 0 {
		return params
	}
	node, _ := stmts[0].(map[string]any)["node"].(map[string]any)
	from, _ := node["from_table"].(map[string]any)
	if from["type"] != "EXPRESSION_LIST" {
		return params
	}
	fields := params.Fields()
	// DuckDB's own types (a parameter inside an expression) stay; the ones
	// it could not infer (announced as strings by paramSchema) get the
	// column's.
	typed := make([]bool, len(fields))
	for i := range fields {
		typed[i] = i >= len(untyped) || !untyped[i]
	}
	rows, _ := from["values"].([]any)
	for _, r := range rows {
		exprs, _ := r.([]any)
		for j, x := range exprs {
			e, _ := x.(map[string]any)
			id, _ := e["identifier"].(string)
			var k int
			if e["class"] != "PARAMETER" || j >= len(p.targets) || p.targets[j] == nil {
				continue
			}
			if _, err := fmt.Sscanf(id, "%d", &k); err != nil || k < 1 || k > len(fields) {
				continue
			}
			if !typed[k-1] {
				fields[k-1].Type = p.targets[j]
				typed[k-1] = true
			}
		}
	}
	return arrow.NewSchema(announcedParams(fields), nil)
}

// duckTypeName is the DuckDB type whose Arrow form is dt, as the write path
// wants it.
func duckTypeName(dt arrow.DataType) (string, bool) {
	switch dt.ID() {
	case arrow.INT8:
		return "TINYINT", true
	case arrow.INT16:
		return "SMALLINT", true
	case arrow.INT32:
		return "INTEGER", true
	case arrow.INT64:
		return "BIGINT", true
	case arrow.UINT8:
		return "UTINYINT", true
	case arrow.UINT16:
		return "USMALLINT", true
	case arrow.UINT32:
		return "UINTEGER", true
	case arrow.UINT64:
		return "UBIGINT", true
	case arrow.FLOAT32:
		return "FLOAT", true
	case arrow.FLOAT64:
		return "DOUBLE", true
	case arrow.BOOL:
		return "BOOLEAN", true
	case arrow.STRING:
		return "VARCHAR", true
	case arrow.BINARY:
		return "BLOB", true
	case arrow.DATE32:
		return "DATE", true
	case arrow.TIMESTAMP:
		ts := dt.(*arrow.TimestampType)
		if ts.TimeZone != "" {
			return "", false
		}
		return map[arrow.TimeUnit]string{arrow.Second: "TIMESTAMP_S", arrow.Millisecond: "TIMESTAMP_MS",
			arrow.Microsecond: "TIMESTAMP", arrow.Nanosecond: "TIMESTAMP_NS"}[ts.Unit], true
	}
	return "", false
}

// Exec runs a KindInsert statement (once per row of params, if any) and
// returns the rows written. The rows go through the same validated,
// WAL-durable write path as ingest; rows written before a failure stay,
// and the error says how many.
func (e *Engine) Exec(ctx context.Context, st *Statement, params arrow.RecordBatch) (int64, error) {
	if st.Kind == KindDelete {
		if params != nil && params.NumRows() > 0 {
			return 0, newError(ErrSyntax, "a DELETE takes no parameters")
		}
		return e.execDelete(ctx, st)
	}
	if st.Kind == KindDDL {
		if params != nil && params.NumRows() > 0 {
			return 0, newError(ErrSyntax, "a DDL statement takes no parameters")
		}
		return 0, e.execDDL(ctx, st)
	}
	if st.Kind != KindInsert || st.insert == nil {
		return 0, newError(ErrUnsupportedStatement, "only INSERT, DELETE, CREATE and DROP are executed as updates; run queries as queries")
	}
	p := st.insert
	if err := auth.FromContext(ctx).Write(p.db); err != nil {
		return 0, err
	}
	rdr, err := e.run(ctx, p.castSQL, st.Database, st.Params.NumFields(), params)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	opts := catalog.WriteOptions{IfNotExists: catalog.FailIfNotExists, IfExists: catalog.AppendIfExists}
	var written int64
	for rdr.Next() {
		res, err := e.wb.Write(ctx, p.db, p.table, rdr.RecordBatch(), opts)
		if err != nil {
			return written, fmt.Errorf("INSERT into %q.%q: %d rows written before this error: %w", p.db, p.table, written, err)
		}
		written += res.Rows
	}
	if err := rdr.Err(); err != nil {
		return written, fmt.Errorf("INSERT into %q.%q: %d rows written before this error: %w", p.db, p.table, written, err)
	}
	return written, nil
}
