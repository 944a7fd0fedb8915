package integration

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// TestUnknownAction: an unknown action type is refused naming it and the
// actions the server has (arrow-go's adapter said only "the defined
// request is invalid").
func TestUnknownAction(t *testing.T) {
	s := startServer(t, t.TempDir())
	stream, err := flightClient(t, s.Addr).DoAction(testCtx(t), &flight.Action{Type: "apron.nope"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.InvalidArgument, `"apron.nope"`, "CreatePreparedStatement", "apron.token.create")
}

// TestEmptyCatalogFilter: in Flight SQL a catalog filter of "" means
// "objects without a catalog", of which Apron has none; no filter lists
// Apron's.
func TestEmptyCatalogFilter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := startServer(t, t.TempDir())
	sc := sqlClient(t, s.Addr, mem)
	ctx := testCtx(t)
	rec := idRecord(mem, 0, 1)
	defer rec.Release()
	if _, err := sqlIngest(ctx, sc, "a", "t", rec); err != nil {
		t.Fatal(err)
	}
	empty := ""
	for name, opts := range map[string]*flightsql.GetDBSchemasOpts{"none": {}, "empty": {Catalog: &empty}} {
		info, err := sc.GetDBSchemas(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		n, err := readInfo(ctx, sc, info)
		want := int64(1)
		if name == "empty" {
			want = 0
		}
		if err != nil || n != want {
			t.Errorf("GetDbSchemas, catalog filter %s: %d rows (%v), want %d", name, n, err, want)
		}
	}
	info, err := sc.GetTables(ctx, &flightsql.GetTablesOpts{Catalog: &empty})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readInfo(ctx, sc, info); err != nil || n != 0 {
		t.Errorf("GetTables, catalog \"\": %d rows (%v), want 0", n, err)
	}
}

// TestViewTypes: string_view and dictionary<string_view> columns (what
// polars sends for strings and Categoricals) ingest through ADBC as
// strings, and a string_view parameter binds.
func TestViewTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := startServer(t, t.TempDir())
	ctx := testCtx(t)
	cn := adbcConn(t, s.Addr, mem)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.StringView},
		{Name: "region", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint32, ValueType: arrow.BinaryTypes.StringView}},
	}, nil)
	// arrow-go has no dictionary builder over string_view: the column is
	// made of its parts.
	tb := array.NewTimestampBuilder(mem, sc.Field(0).Type.(*arrow.TimestampType))
	hb := array.NewStringViewBuilder(mem)
	ib := array.NewUint32Builder(mem)
	for i := range 10 {
		tb.Append(arrow.Timestamp(baseTime + int64(i)))
		hb.Append(fmt.Sprintf("host-with-a-long-name-%d", i%3))
		ib.Append(uint32(i % 2))
	}
	vb := array.NewStringViewBuilder(mem)
	vb.AppendValues([]string{"eu", "us"}, nil)
	parts := []arrow.Array{tb.NewArray(), hb.NewArray(), ib.NewArray(), vb.NewArray()}
	for _, b := range []array.Builder{tb, hb, ib, vb} {
		b.Release()
	}
	region := array.NewDictionaryArray(sc.Field(2).Type.(*arrow.DictionaryType), parts[2], parts[3])
	rec := array.NewRecordBatch(sc, []arrow.Array{parts[0], parts[1], region}, 10)
	region.Release()
	for _, p := range parts {
		p.Release()
	}
	defer rec.Release()
	if n, err := adbcIngest(ctx, cn, "v", "t", adbc.OptionValueIngestModeCreateAppend, rec); err != nil || n != 10 {
		t.Fatalf("ingest of view columns: %d rows, %v", n, err)
	}
	st, err := cn.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetSqlQuery("SELECT count(*) FROM v.t WHERE host = $1 AND region = 'us'"); err != nil {
		t.Fatal(err)
	}
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	pb := array.NewStringViewBuilder(mem)
	pb.Append("host-with-a-long-name-1")
	param := pb.NewArray()
	pb.Release()
	params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.BinaryTypes.StringView}}, nil), []arrow.Array{param}, 1)
	param.Release()
	defer params.Release()
	if err := st.Bind(ctx, params); err != nil {
		t.Fatal(err)
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		t.Fatalf("query with a string_view parameter: %v", err)
	}
	defer rdr.Release()
	var got int64
	for rdr.Next() {
		got += rdr.RecordBatch().Column(0).(*array.Int64).Value(0)
	}
	// ids 1, 4, 7 have host ...-1; of them 1 and 7 are odd, so "us".
	if err := rdr.Err(); err != nil || got != 2 {
		t.Fatalf("count: %d, %v; want 2", got, err)
	}
}

// TestTimestampParamExact: timestamp parameters are announced in
// milliseconds (what the JDBC driver binds right), yet a client that binds
// nanoseconds (ADBC) matches to the nanosecond.
func TestTimestampParamExact(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := startServer(t, t.TempDir())
	ctx := testCtx(t)
	cn := adbcConn(t, s.Addr, mem)
	rec := idRecord(mem, 0, 10) // row i at baseTime + i seconds
	defer rec.Release()
	if _, err := adbcIngest(ctx, cn, "ts", "t", adbc.OptionValueIngestModeCreateAppend, rec); err != nil {
		t.Fatal(err)
	}
	st, err := cn.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetSqlQuery("SELECT count(*) FROM ts.t WHERE time = $1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns   int64
		want int64
	}{{baseTime + 3e9, 1}, {baseTime + 3e9 + 1, 0}} {
		tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond})
		tb.Append(arrow.Timestamp(c.ns))
		col := tb.NewArray()
		tb.Release()
		params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "p", Type: col.DataType()}}, nil), []arrow.Array{col}, 1)
		col.Release()
		if err := st.Bind(ctx, params); err != nil {
			t.Fatal(err)
		}
		params.Release()
		rdr, _, err := st.ExecuteQuery(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for rdr.Next() {
			got += rdr.RecordBatch().Column(0).(*array.Int64).Value(0)
		}
		rdr.Release()
		if got != c.want {
			t.Errorf("time = %d ns: %d rows, want %d", c.ns, got, c.want)
		}
	}
}

// TestResultColumnMetadata: a result column that is a table's column
// carries ARROW:FLIGHT:SQL:CATALOG_NAME, SCHEMA_NAME and TABLE_NAME (JDBC
// ResultSetMetaData, DBeaver), and the schema of GetFlightInfo, of a
// prepared statement's dataset and of the DoGet stream are one, metadata
// and nullability included (clients compare them); an ADBC query reads it.
func TestResultColumnMetadata(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the ADBC connections close
	s := startServer(t, t.TempDir())
	sc := sqlClient(t, s.Addr, mem)
	ctx := testCtx(t)
	rec := idRecord(mem, 0, 10)
	defer rec.Release()
	if _, err := sqlIngest(ctx, sc, "md", "t", rec); err != nil {
		t.Fatal(err)
	}
	const sql = "SELECT time, tag AS label, value * 2 AS v2 FROM md.t WHERE id < 5 ORDER BY time"
	check := func(what string, schema *arrow.Schema) {
		t.Helper()
		want := []struct {
			table    string
			nullable bool
		}{{"t", false}, {"t", true}, {"", true}}
		if schema.NumFields() != len(want) {
			t.Fatalf("%s: schema %s", what, schema)
		}
		for i, f := range schema.Fields() {
			md := flightsql.ColumnMetadata{Data: &f.Metadata}
			table, _ := md.TableName()
			db, _ := md.SchemaName()
			cat, _ := md.CatalogName()
			if table != want[i].table || f.Nullable != want[i].nullable ||
				(table != "" && (db != "md" || cat != "apron")) {
				t.Errorf("%s: column %q: catalog %q, schema %q, table %q, nullable %v; want apron.md.%s, nullable %v",
					what, f.Name, cat, db, table, f.Nullable, want[i].table, want[i].nullable)
			}
		}
	}
	// CommandStatementQuery: GetFlightInfo, then DoGet.
	info, err := sc.Execute(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	infoSchema, err := flight.DeserializeSchema(info.Schema, mem)
	if err != nil {
		t.Fatal(err)
	}
	check("GetFlightInfo", infoSchema)
	rdr, err := sc.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	check("DoGet", rdr.Schema())
	if !rdr.Schema().Equal(infoSchema) {
		t.Errorf("DoGet schema %s, GetFlightInfo's %s", rdr.Schema(), infoSchema)
	}
	for rdr.Next() {
		if !rdr.RecordBatch().Schema().Equal(infoSchema) {
			t.Errorf("a batch of schema %s", rdr.RecordBatch().Schema())
		}
	}
	rdr.Release()

	// A prepared statement: its dataset schema, GetFlightInfo, DoGet.
	ps, err := sc.Prepare(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	check("prepared dataset schema", ps.DatasetSchema())
	info, err = ps.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if infoSchema, err = flight.DeserializeSchema(info.Schema, mem); err != nil {
		t.Fatal(err)
	}
	if !infoSchema.Equal(ps.DatasetSchema()) {
		t.Errorf("prepared GetFlightInfo schema %s, dataset schema %s", infoSchema, ps.DatasetSchema())
	}
	if rdr, err = sc.DoGet(ctx, info.Endpoint[0].Ticket); err != nil {
		t.Fatal(err)
	}
	if !rdr.Schema().Equal(infoSchema) {
		t.Errorf("prepared DoGet schema %s, GetFlightInfo's %s", rdr.Schema(), infoSchema)
	}
	rdr.Release()

	// ADBC checks each endpoint's schema against the FlightInfo's.
	rdr2, err := adbcQuery(ctx, adbcConn(t, s.Addr, mem), sql)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for rdr2.Next() {
		rows += rdr2.RecordBatch().NumRows()
	}
	if err := rdr2.Err(); err != nil || rows != 5 {
		t.Errorf("ADBC query: %d rows, %v; want 5", rows, err)
	}
	rdr2.Release()
}
