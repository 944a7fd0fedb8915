package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestHealth checks the gRPC health service.
func TestHealth(t *testing.T) {
	srv := startServer(t, t.TempDir())
	checkHealth(t, srv.Addr)
}

// seedMetadata writes db.t (id schema), db.u (id schema) and other.v.
func seedMetadata(t *testing.T, srv *server) {
	t.Helper()
	seed(t, srv)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, srv.Addr, mem)
	rec := jsonRecord(t, mem, oneCol("flag", arrow.FixedWidthTypes.Boolean), `[{"time":1,"flag":true}]`)
	defer rec.Release()
	if _, err := sqlIngest(testCtx(t), c, "other", "v", rec); err != nil {
		t.Fatal(err)
	}
}

// sqlRows runs a Flight SQL metadata command and returns its rows as
// strings, one per row, columns joined by "|" (binary columns left out).
func sqlRows(t testing.TB, c *flightsql.Client, info *flight.FlightInfo, err error) ([]string, []arrow.RecordBatch) {
	t.Helper()
	if err != nil {
		t.Fatalf("GetFlightInfo: %v", err)
	}
	var rows []string
	var recs []arrow.RecordBatch
	for _, ep := range info.Endpoint {
		rdr, err := c.DoGet(testCtx(t), ep.Ticket)
		if err != nil {
			t.Fatalf("DoGet: %v", err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
			for i := 0; i < int(rec.NumRows()); i++ {
				var cols []string
				for j, col := range rec.Columns() {
					if rec.Schema().Field(j).Type.ID() == arrow.BINARY {
						continue
					}
					cols = append(cols, col.ValueStr(i))
				}
				rows = append(rows, strings.Join(cols, "|"))
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	sort.Strings(rows)
	return rows, recs
}

func wantRows(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMetadataFlightSQL covers GetCatalogs, GetDbSchemas, GetTables and
// GetTableTypes.
func TestMetadataFlightSQL(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedMetadata(t, srv)
	for _, when := range []string{"before restart", "after restart"} {
		if when == "after restart" {
			srv = srv.Restart(t)
		}
		c := sqlClient(t, srv.Addr, mem)
		ctx := testCtx(t)
		t.Run(when, func(t *testing.T) {
			info, err := c.GetCatalogs(ctx)
			got, recs := sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetCatalogs", got, "apron")

			info, err = c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetDbSchemas", got, "apron|db", "apron|other")

			pat := "o%"
			info, err = c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: &pat})
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetDbSchemas o%", got, "apron|other")

			info, err = c.GetTableTypes(ctx)
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetTableTypes", got, "TABLE")

			info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{})
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetTables", got, "apron|db|t|TABLE", "apron|db|u|TABLE", "apron|other|v|TABLE")

			tpat, dpat := "_", "d%"
			info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &tpat, DbSchemaFilterPattern: &dpat, TableTypes: []string{"TABLE"}})
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetTables d% _", got, "apron|db|t|TABLE", "apron|db|u|TABLE")

			info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableTypes: []string{"VIEW"}})
			got, recs = sqlRows(t, c, info, err)
			release(recs...)
			wantRows(t, "GetTables of type VIEW", got)

			info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true})
			got, recs = sqlRows(t, c, info, err)
			wantRows(t, "GetTables include_schema", got, "apron|db|t|TABLE", "apron|db|u|TABLE", "apron|other|v|TABLE")
			for _, rec := range recs {
				if rec.NumCols() != 5 || rec.Schema().Field(4).Name != "table_schema" {
					t.Fatalf("GetTables include_schema: schema %s", rec.Schema())
				}
				for i := 0; i < int(rec.NumRows()); i++ {
					db := rec.Column(1).(*array.String).Value(i)
					tbl := rec.Column(2).(*array.String).Value(i)
					sc, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(i), mem)
					if err != nil {
						t.Fatalf("%s.%s: %v", db, tbl, err)
					}
					wantSchema := "(time:timestamp[ns], id:int64, value:float64, tag:utf8)"
					if db == "other" {
						wantSchema = "(time:timestamp[ns], flag:bool)"
					}
					if got := schemaString(sc); got != wantSchema {
						t.Errorf("%s.%s: schema %s, want %s", db, tbl, got, wantSchema)
					}
					for _, f := range sc.Fields() {
						md := flightsql.ColumnMetadata{Data: &f.Metadata}
						cat, _ := md.CatalogName()
						sch, _ := md.SchemaName()
						tn, _ := md.TableName()
						typ, ok := md.TypeName()
						if cat != "apron" || sch != db || tn != tbl || !ok || typ == "" {
							t.Errorf("%s.%s column %s: metadata %v: want catalog apron, schema %s, table %s and a type name", db, tbl, f.Name, f.Metadata, db, tbl)
						}
					}
				}
			}
			release(recs...)
		})
	}
}

// getObjects flattens ADBC GetObjects into sorted paths:
// catalog, catalog.schema, catalog.schema.table:type,
// catalog.schema.table.column#ordinal.
func getObjects(t testing.TB, cn adbc.Connection, depth adbc.ObjectDepth, dbSchema, table *string) []string {
	t.Helper()
	rdr, err := cn.GetObjects(testCtx(t), depth, nil, dbSchema, table, nil, nil)
	if err != nil {
		t.Fatalf("GetObjects(depth %d): %v", depth, err)
	}
	defer rdr.Release()
	type column struct {
		Name    string `json:"column_name"`
		Ordinal *int   `json:"ordinal_position"`
	}
	type tableObj struct {
		Name    string   `json:"table_name"`
		Type    string   `json:"table_type"`
		Columns []column `json:"table_columns"`
	}
	type schemaObj struct {
		Name   string     `json:"db_schema_name"`
		Tables []tableObj `json:"db_schema_tables"`
	}
	type catalogObj struct {
		Name    string      `json:"catalog_name"`
		Schemas []schemaObj `json:"catalog_db_schemas"`
	}
	var out []string
	for rdr.Next() {
		var buf bytes.Buffer
		if err := array.RecordToJSON(rdr.RecordBatch(), &buf); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var c catalogObj
			if err := dec.Decode(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c.Name)
			for _, s := range c.Schemas {
				out = append(out, c.Name+"."+s.Name)
				for _, tb := range s.Tables {
					out = append(out, fmt.Sprintf("%s.%s.%s:%s", c.Name, s.Name, tb.Name, tb.Type))
					for _, col := range tb.Columns {
						ord := -1
						if col.Ordinal != nil {
							ord = *col.Ordinal
						}
						out = append(out, fmt.Sprintf("%s.%s.%s.%s#%d", c.Name, s.Name, tb.Name, col.Name, ord))
					}
				}
			}
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestMetadataADBC covers ADBC GetObjects at every depth, GetTableSchema
// and GetTableTypes.
func TestMetadataADBC(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedMetadata(t, srv)
	cn := adbcConn(t, srv.Addr, mem)

	wantRows(t, "GetObjects catalogs", getObjects(t, cn, adbc.ObjectDepthCatalogs, nil, nil), "apron")
	wantRows(t, "GetObjects db schemas", getObjects(t, cn, adbc.ObjectDepthDBSchemas, nil, nil),
		"apron", "apron.db", "apron.other")
	wantRows(t, "GetObjects tables", getObjects(t, cn, adbc.ObjectDepthTables, nil, nil),
		"apron", "apron.db", "apron.db.t:TABLE", "apron.db.u:TABLE", "apron.other", "apron.other.v:TABLE")
	wantRows(t, "GetObjects columns", getObjects(t, cn, adbc.ObjectDepthColumns, nil, nil),
		"apron", "apron.db",
		"apron.db.t.id#2", "apron.db.t.tag#4", "apron.db.t.time#1", "apron.db.t.value#3", "apron.db.t:TABLE",
		"apron.db.u.id#2", "apron.db.u.tag#4", "apron.db.u.time#1", "apron.db.u.value#3", "apron.db.u:TABLE",
		"apron.other", "apron.other.v.flag#2", "apron.other.v.time#1", "apron.other.v:TABLE")
	other, v := "other", "v"
	wantRows(t, "GetObjects columns of other.v", getObjects(t, cn, adbc.ObjectDepthColumns, &other, &v),
		"apron", "apron.other", "apron.other.v.flag#2", "apron.other.v.time#1", "apron.other.v:TABLE")

	db := "db"
	sc, err := cn.GetTableSchema(testCtx(t), nil, &db, "t")
	if err != nil {
		t.Fatalf("GetTableSchema: %v", err)
	}
	if got := schemaString(sc); got != "(time:timestamp[ns], id:int64, value:float64, tag:utf8)" {
		t.Errorf("GetTableSchema db.t: %s", got)
	}
	_, err = cn.GetTableSchema(testCtx(t), nil, &db, "nosuchtable")
	wantADBC(t, err, adbc.StatusNotFound)

	rdr, err := cn.GetTableTypes(testCtx(t))
	if err != nil {
		t.Fatalf("GetTableTypes: %v", err)
	}
	var types []string
	for rdr.Next() {
		for i := 0; i < int(rdr.RecordBatch().NumRows()); i++ {
			types = append(types, rdr.RecordBatch().Column(0).ValueStr(i))
		}
	}
	rdr.Release()
	wantRows(t, "ADBC GetTableTypes", types, "TABLE")
}

// TestListFlights lists every table as a PATH flight.
func TestListFlights(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seedMetadata(t, srv)
	c := flightClient(t, srv.Addr)
	stream, err := c.ListFlights(testCtx(t), &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		info, err := stream.Recv()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("ListFlights: %v", err)
			}
			break
		}
		d := info.GetFlightDescriptor()
		got = append(got, fmt.Sprintf("%v %s endpoints=%d", d.GetType(), strings.Join(d.GetPath(), "."), len(info.Endpoint)))
	}
	sort.Strings(got)
	sr, err := c.GetSchema(testCtx(t), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"other", "v"}})
	if err != nil {
		t.Fatalf("GetSchema other.v: %v", err)
	}
	sc, err := flight.DeserializeSchema(sr.GetSchema(), memory.DefaultAllocator)
	if err != nil || schemaString(sc) != "(time:timestamp[ns], flag:bool)" {
		t.Errorf("GetSchema other.v: %v %v", sc, err)
	}
	wantRows(t, "ListFlights", got, "PATH db.t endpoints=1", "PATH db.u endpoints=1", "PATH other.v endpoints=1")
}
