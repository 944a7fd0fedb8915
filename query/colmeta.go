//go:build duckdb_arrow

package query

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/apron-db/apron/catalog"
)

// Result column metadata. A result column that is a table's column as it
// is stored (SELECT host, t.usage, * FROM db.t …, with any WHERE, ORDER
// BY, LIMIT or GROUP BY) carries the Flight SQL column metadata that
// GetTables' table_schema gives that column: ARROW:FLIGHT:SQL:CATALOG_NAME,
// SCHEMA_NAME (the database), TABLE_NAME, TYPE_NAME and the IS_* flags,
// and the table's nullability (time is never null). The JDBC driver turns
// them into ResultSetMetaData (getTableName, getSchemaName), which DBeaver
// uses to navigate from a result to its table. DuckDB's C API does not
// say where a result column comes from: the origin is read off the parse
// tree, and only where it is certain (one Apron table in FROM, no join,
// CTE, set operation or grouping sets, a plain column reference whose
// type is the table column's); anything else carries no such metadata.
// A decimal result column carries its PRECISION and SCALE (the driver
// reads them from the metadata only).
//
// The same metadata is in every schema of the statement: Prepare's
// (GetFlightInfo, a prepared statement's dataset schema) and the batches
// of Query and Run (DoGet). Clients compare them (ADBC refuses an
// endpoint whose schema differs from the FlightInfo's).

// fromTable is the one Apron table a SELECT node reads, with what its
// columns are named by.
type fromTable struct {
	table     *catalog.Table
	qualifier string         // the name columns are qualified with, lower-cased
	byName    map[string]int // lower-cased column name → table column
}

// selectFrom finds the Apron table a SELECT node (parsed by
// json_serialize_sql) reads from, when its FROM is exactly one such table
// with its own column names; db is the current database.
func selectFrom(node map[string]any, db string, cat *catalog.Catalog) (*fromTable, bool) {
	from, _ := node["from_table"].(map[string]any)
	if from["type"] != "BASE_TABLE" || from["sample"] != nil || from["at_clause"] != nil || !empty(from["column_name_alias"]) {
		return nil, false
	}
	catalogName, _ := from["catalog_name"].(string)
	schema, _ := from["schema_name"].(string)
	name, _ := from["table_name"].(string)
	alias, _ := from["alias"].(string)
	if catalogName != "" && !strings.EqualFold(catalogName, Catalog) {
		return nil, false
	}
	if schema == "" {
		schema = db
	}
	t := findTable(cat, schema, name)
	if t == nil {
		return nil, false
	}
	if alias == "" {
		alias = t.Name
	}
	return newFromTable(t, alias)
}

// newFromTable is t read under the name qualifier.
func newFromTable(t *catalog.Table, qualifier string) (*fromTable, bool) {
	// Columns by lower-case name: DuckDB resolves names case-insensitively;
	// a table with two names equal but for case is left to it.
	f := &fromTable{table: t, qualifier: strings.ToLower(qualifier), byName: make(map[string]int, len(t.Columns))}
	for i, c := range t.Columns {
		k := strings.ToLower(c.Name)
		if _, dup := f.byName[k]; dup {
			return nil, false
		}
		f.byName[k] = i
	}
	return f, true
}

// columns are the table columns a select-list item returns: every one for
// a plain *, one for a column reference, -1 for one result column of
// anything else. false when it is not known how many columns the item
// returns (* EXCLUDE, COLUMNS(…)).
func (f *fromTable) columns(e map[string]any) ([]int, bool) {
	switch e["type"] {
	case "STAR":
		rel, _ := e["relation_name"].(string)
		if (rel != "" && strings.ToLower(rel) != f.qualifier) || e["columns"] != false || e["expr"] != nil ||
			!empty(e["exclude_list"]) || !empty(e["replace_list"]) || !empty(e["rename_list"]) ||
			!empty(e["qualified_exclude_list"]) {
			return nil, false
		}
		cols := make([]int, len(f.table.Columns))
		for i := range cols {
			cols[i] = i
		}
		return cols, true
	case "COLUMN_REF":
		// A name of the table's is its column, even where a select-list
		// alias has that name too: DuckDB binds table columns first.
		names, _ := e["column_names"].([]any)
		var col string
		switch len(names) {
		case 1:
			col, _ = names[0].(string)
		case 2:
			rel, _ := names[0].(string)
			if strings.ToLower(rel) != f.qualifier {
				return []int{-1}, true // a struct field, or another name
			}
			col, _ = names[1].(string)
		default:
			return []int{-1}, true
		}
		if i, ok := f.byName[strings.ToLower(col)]; ok {
			return []int{i}, true
		}
	}
	return []int{-1}, true
}

// columnOrigin is the table column a result column is.
type columnOrigin struct {
	table *catalog.Table
	col   int
}

// columnOrigins returns, for each result column of a statement parsed by
// json_serialize_sql, the table column it is, or nil; nil altogether when
// the result columns cannot be told apart. db is the current database.
func columnOrigins(tree map[string]any, db string, cat *catalog.Catalog) []*columnOrigin {
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 {
		return nil
	}
	st, _ := stmts[0].(map[string]any)
	node, _ := st["node"].(map[string]any)
	if node["type"] != "SELECT_NODE" {
		return nil
	}
	// GROUPING SETS, ROLLUP and CUBE make grouped columns null in the
	// rows of the sets without them.
	if sets, _ := node["group_sets"].([]any); len(sets) > 1 {
		return nil
	}
	// A CTE may have the name of the table the FROM names.
	if ctes, _ := node["cte_map"].(map[string]any); ctes == nil || !empty(ctes["map"]) {
		return nil
	}
	from, ok := selectFrom(node, db, cat)
	if !ok {
		return nil
	}
	var out []*columnOrigin
	list, _ := node["select_list"].([]any)
	for _, item := range list {
		e, _ := item.(map[string]any)
		cols, ok := from.columns(e)
		if !ok {
			return nil
		}
		for _, c := range cols {
			if c < 0 {
				out = append(out, nil)
				continue
			}
			out = append(out, &columnOrigin{table: from.table, col: c})
		}
	}
	return out
}

// withColumnMetadata is schema (a result's, as DuckDB types it) with the
// metadata of the columns whose origin is known, where their type is the
// table column's, and of the decimal columns. origins has one entry per
// column, or is ignored. schema itself is returned when nothing changes.
func withColumnMetadata(schema *arrow.Schema, origins []*columnOrigin) *arrow.Schema {
	if len(origins) != schema.NumFields() {
		origins = nil
	}
	var fields []arrow.Field
	for i, f := range schema.Fields() {
		var md arrow.Metadata
		nullable := f.Nullable
		switch {
		case origins != nil && origins[i] != nil:
			o := origins[i]
			stored := o.table.ArrowSchema().Field(o.col)
			if !arrow.TypeEqual(f.Type, stored.Type) {
				continue
			}
			md, nullable = ColumnMetadata(o.table, o.col), stored.Nullable
		case f.Type.ID() == arrow.DECIMAL128 || f.Type.ID() == arrow.DECIMAL256:
			d := f.Type.(arrow.DecimalType)
			md = arrow.NewMetadata([]string{flightsql.PrecisionKey, flightsql.ScaleKey},
				[]string{strconv.Itoa(int(d.GetPrecision())), strconv.Itoa(int(d.GetScale()))})
		default:
			continue
		}
		if fields == nil {
			fields = schema.Fields()
		}
		fields[i].Metadata, fields[i].Nullable = md, nullable
	}
	if fields == nil {
		return schema
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// ColumnMetadata is the Flight SQL metadata of column col of table t, as
// GetTables' table_schema and query results that return the column carry
// it.
func ColumnMetadata(t *catalog.Table, col int) arrow.Metadata {
	return flightsql.NewColumnMetadataBuilder().
		CatalogName(Catalog).SchemaName(t.Database).TableName(t.Name).
		TypeName(SQLTypeName(t.Columns[col].Type)).
		IsCaseSensitive(true).IsReadOnly(false).IsSearchable(true).IsAutoIncrement(false).
		Metadata()
}

// SQLTypeName is the SQL name of a stored type, as DuckDB spells it.
func SQLTypeName(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.INT8:
		return "TINYINT"
	case arrow.INT16:
		return "SMALLINT"
	case arrow.INT32:
		return "INTEGER"
	case arrow.INT64:
		return "BIGINT"
	case arrow.UINT8:
		return "UTINYINT"
	case arrow.UINT16:
		return "USMALLINT"
	case arrow.UINT32:
		return "UINTEGER"
	case arrow.UINT64:
		return "UBIGINT"
	case arrow.FLOAT32:
		return "FLOAT"
	case arrow.FLOAT64:
		return "DOUBLE"
	case arrow.BOOL:
		return "BOOLEAN"
	case arrow.STRING, arrow.LARGE_STRING:
		return "VARCHAR"
	case arrow.BINARY, arrow.LARGE_BINARY:
		return "BLOB"
	case arrow.DATE32, arrow.DATE64:
		return "DATE"
	case arrow.TIMESTAMP:
		ts := dt.(*arrow.TimestampType)
		name := map[arrow.TimeUnit]string{arrow.Second: "TIMESTAMP_S", arrow.Millisecond: "TIMESTAMP_MS",
			arrow.Microsecond: "TIMESTAMP", arrow.Nanosecond: "TIMESTAMP_NS"}[ts.Unit]
		if ts.TimeZone != "" {
			return "TIMESTAMP WITH TIME ZONE"
		}
		return name
	}
	return dt.String()
}

// labelSchema is schema, the result schema of the admitted statement a
// run with database current, with its column metadata.
func (e *Engine) labelSchema(schema *arrow.Schema, a *admitted, database string) *arrow.Schema {
	if a.explain {
		return schema
	}
	return withColumnMetadata(schema, columnOrigins(a.tree, database, e.wb.Catalog()))
}

// labeled gives the batches of r, a reader of the admitted statement a
// run with database current, the column metadata of its result; r itself
// when there is none to give.
func (e *Engine) labeled(r array.RecordReader, a *admitted, database string) array.RecordReader {
	schema := e.labelSchema(r.Schema(), a, database)
	if schema == r.Schema() {
		return r
	}
	l := &labeledReader{RecordReader: r, schema: schema}
	l.refs.Store(1)
	return l
}

// labeledReader is a reader whose batches are given another schema of the
// same columns.
type labeledReader struct {
	array.RecordReader
	refs   atomic.Int64
	schema *arrow.Schema
	cur    arrow.RecordBatch
}

func (l *labeledReader) Schema() *arrow.Schema          { return l.schema }
func (l *labeledReader) RecordBatch() arrow.RecordBatch { return l.cur }
func (l *labeledReader) Record() arrow.RecordBatch      { return l.cur }

func (l *labeledReader) Retain() {
	l.refs.Add(1)
	l.RecordReader.Retain()
}

func (l *labeledReader) Release() {
	if l.refs.Add(-1) == 0 && l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	l.RecordReader.Release()
}

func (l *labeledReader) Next() bool {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	if !l.RecordReader.Next() {
		return false
	}
	rec := l.RecordReader.RecordBatch()
	l.cur = array.NewRecordBatch(l.schema, rec.Columns(), rec.NumRows())
	return true
}
