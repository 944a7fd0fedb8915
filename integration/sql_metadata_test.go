package integration

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestSQLInfo checks GetSqlInfo through ADBC GetInfo and the Flight SQL
// client, GetXdbcTypeInfo, and the key commands.
func TestSQLInfo(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seedSQL(t, srv.Addr, 3)
	cn := adbcConn(t, srv.Addr, mem)
	ctx := testCtx(t)

	t.Run("adbc GetInfo", func(t *testing.T) {
		rdr, err := cn.GetInfo(ctx, []adbc.InfoCode{adbc.InfoVendorName, adbc.InfoVendorVersion, adbc.InfoVendorArrowVersion,
			adbc.InfoVendorSql, adbc.InfoVendorSubstrait})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		var buf bytes.Buffer
		for rdr.Next() {
			if err := array.RecordToJSON(rdr.RecordBatch(), &buf); err != nil {
				t.Fatal(err)
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		got := buf.String()
		for _, want := range []string{`"Apron"`, `"18.`} {
			if !strings.Contains(got, want) {
				t.Errorf("GetInfo does not contain %s:\n%s", want, got)
			}
		}
		// vendor_sql (code 3) is true, vendor_substrait (4) and read only (5) false.
		for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
			switch {
			case strings.Contains(line, `"info_name":3,`) && !strings.Contains(line, "true"):
				t.Errorf("vendor_sql is not true: %s", line)
			case strings.Contains(line, `"info_name":4,`) && !strings.Contains(line, "false"):
				t.Errorf("vendor_substrait is not false: %s", line)
			}
		}
	})

	c := sqlClient(t, srv.Addr, mem)
	t.Run("GetSqlInfo", func(t *testing.T) {
		info, err := c.GetSqlInfo(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		got := map[flightsql.SqlInfo]string{}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			names := rec.Column(0).(*array.Uint32)
			vals := rec.Column(1).(*array.DenseUnion)
			for i := 0; i < int(rec.NumRows()); i++ {
				child := vals.Field(vals.ChildID(i))
				got[flightsql.SqlInfo(names.Value(i))] = child.ValueStr(int(vals.ValueOffset(i)))
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		want := map[flightsql.SqlInfo]string{
			flightsql.SqlInfoFlightSqlServerName:        "Apron",
			flightsql.SqlInfoFlightSqlServerSql:         "true",
			flightsql.SqlInfoFlightSqlServerSubstrait:   "false",
			flightsql.SqlInfoFlightSqlServerReadOnly:    "false",
			flightsql.SqlInfoFlightSqlServerCancel:      "true",
			flightsql.SqlInfoFlightSqlServerTransaction: "0",
			flightsql.SqlInfoIdentifierQuoteChar:        `"`,
			flightsql.SqlInfoCatalogTerm:                "catalog",
			flightsql.SqlInfoSchemaTerm:                 "schema",
			flightsql.SqlInfoTransactionsSupported:      "false",
			flightsql.SqlInfoMaxTableNameLen:            "255",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("sql info %v = %q, want %q", k, got[k], v)
			}
		}
		for _, k := range []flightsql.SqlInfo{flightsql.SqlInfoKeywords, flightsql.SqlInfoNumericFunctions,
			flightsql.SqlInfoStringFunctions, flightsql.SqlInfoDateTimeFunctions, flightsql.SqlInfoSystemFunctions} {
			if len(got[k]) < 10 {
				t.Errorf("sql info %v = %q, want a list", k, got[k])
			}
		}
		if !strings.Contains(got[flightsql.SqlInfoKeywords], "SELECT") || !strings.Contains(got[flightsql.SqlInfoNumericFunctions], "sqrt") ||
			!strings.Contains(got[flightsql.SqlInfoDateTimeFunctions], "date_trunc") {
			t.Errorf("keywords %s\nnumeric %s\ndatetime %s", got[flightsql.SqlInfoKeywords],
				got[flightsql.SqlInfoNumericFunctions], got[flightsql.SqlInfoDateTimeFunctions])
		}
	})

	t.Run("GetXdbcTypeInfo", func(t *testing.T) {
		info, err := c.GetXdbcTypeInfo(ctx, nil)
		rows, recs := sqlRows(t, c, info, err)
		defer release(recs...)
		if len(recs) == 0 || !recs[0].Schema().Equal(schema_ref.XdbcTypeInfo) {
			t.Fatalf("GetXdbcTypeInfo schema: %v", recs)
		}
		joined := strings.Join(rows, "\n")
		for _, name := range []string{"BIGINT|-5", "DOUBLE|8", "VARCHAR|12", "TIMESTAMP_NS|93", "BOOLEAN|16", "BLOB|-3"} {
			if !strings.Contains(joined, name) {
				t.Errorf("GetXdbcTypeInfo has no %s:\n%s", name, joined)
			}
		}
		dt := int32(93)
		info, err = c.GetXdbcTypeInfo(ctx, &dt)
		rows, recs2 := sqlRows(t, c, info, err)
		defer release(recs2...)
		for _, r := range rows {
			if !strings.Contains(r, "|93|") {
				t.Errorf("GetXdbcTypeInfo(93) answered %s", r)
			}
		}
		if len(rows) != 4 {
			t.Errorf("GetXdbcTypeInfo(93): %d rows, want 4 timestamps", len(rows))
		}
	})

	t.Run("keys", func(t *testing.T) {
		db := sqlDB
		ref := flightsql.TableRef{DBSchema: &db, Table: "cpu"}
		type keysCall struct {
			name   string
			schema *arrow.Schema
			call   func() (*flight.FlightInfo, error)
		}
		for _, k := range []keysCall{
			{"primary", schema_ref.PrimaryKeys, func() (*flight.FlightInfo, error) { return c.GetPrimaryKeys(ctx, ref) }},
			{"exported", schema_ref.ExportedKeys, func() (*flight.FlightInfo, error) { return c.GetExportedKeys(ctx, ref) }},
			{"imported", schema_ref.ImportedKeys, func() (*flight.FlightInfo, error) { return c.GetImportedKeys(ctx, ref) }},
			{"cross", schema_ref.CrossReference, func() (*flight.FlightInfo, error) {
				return c.GetCrossReference(ctx, ref, ref)
			}},
		} {
			info, err := k.call()
			if err != nil {
				t.Errorf("%s keys: %v", k.name, err)
				continue
			}
			sc, err := flight.DeserializeSchema(info.GetSchema(), mem)
			if err != nil || !sc.Equal(k.schema) {
				t.Errorf("%s keys FlightInfo schema %v (%v), want %s", k.name, sc, err, k.schema)
			}
			rows, recs := sqlRows(t, c, info, nil)
			if len(rows) != 0 {
				t.Errorf("%s keys: %v, want none", k.name, rows)
			}
			for _, r := range recs {
				if !r.Schema().Equal(k.schema) {
					t.Errorf("%s keys DoGet schema %s", k.name, r.Schema())
				}
			}
			release(recs...)
		}
	})

	t.Run("GetObjects and GetTableSchema", func(t *testing.T) {
		for depth, want := range map[adbc.ObjectDepth]string{
			adbc.ObjectDepthCatalogs:  "apron",
			adbc.ObjectDepthDBSchemas: "apron,apron.sqldb",
			adbc.ObjectDepthTables:    "apron,apron.sqldb,apron.sqldb.cpu:TABLE",
			adbc.ObjectDepthAll: "apron,apron.sqldb,apron.sqldb.cpu.id#2,apron.sqldb.cpu.tag#4,apron.sqldb.cpu.time#1," +
				"apron.sqldb.cpu.value#3,apron.sqldb.cpu:TABLE",
		} {
			if got := strings.Join(getObjects(t, cn, depth, nil, nil), ","); got != want {
				t.Errorf("GetObjects depth %d = %s, want %s", depth, got, want)
			}
		}
		db := sqlDB
		sc, err := cn.GetTableSchema(ctx, nil, &db, "cpu")
		if err != nil {
			t.Fatal(err)
		}
		if got := schemaString(sc); got != schemaString(idSchema) {
			t.Errorf("GetTableSchema = %s, want %s", got, schemaString(idSchema))
		}
	})
}
