package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/metadata"
)

// TestGrafanaFlightSQL makes the calls of Grafana's Flight SQL data source
// (influxdata/grafana-flightsql-datasource; Grafana's InfluxDB data source
// in SQL mode is the same code) through arrow-go's Flight SQL client, as
// the data source does: every call with its configured metadata (a bearer
// token, a database header). GetSqlInfo of everything and DoGet of
// endpoint 0 (the config page); GetTables of type "BASE TABLE" and
// GetTables of one table with include_schema (the query builder's table
// and column lists); "select 1" (Save & test); and queries as its macros
// expand them ($__dateBin, $__dateBinAlias, $__timeGroup, $__timeFrom,
// $__timeTo, $__timeRange, $__interval), each a CommandStatementQuery
// whose one endpoint is fetched, its times read as the data source reads
// every timestamp column: as nanoseconds.
func TestGrafanaFlightSQL(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	srv := startAuthServer(t, t.TempDir())
	cn, err := adbcOpen(t, "grpc://"+srv.Addr, bearerOpts(srv.Admin), mem)
	if err != nil {
		t.Fatal(err)
	}
	rec := idRecord(mem, 0, 180) // 03:04:05 to 03:07:04 on 2024-01-02, one row a second
	n, err := adbcIngest(testCtx(t), cn, "grafana", "cpu", "adbc.ingest.mode.create", rec)
	rec.Release()
	if err != nil || n != 180 {
		t.Fatalf("ingest: %d rows, %v", n, err)
	}
	t.Logf("client: arrow-go %s flightsql.Client, making the calls of grafana-flightsql-datasource", moduleVersion("github.com/apache/arrow-go/v18"))

	c := sqlClient(t, srv.Addr, mem)
	ctx := metadata.NewOutgoingContext(testCtx(t), metadata.Pairs("authorization", "Bearer "+srv.Admin, "database", "grafana"))

	// The config page: GetSqlInfo of every info, DoGet of endpoint 0.
	info, err := c.GetSqlInfo(ctx, []flightsql.SqlInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readInfo(ctx, c, &flight.FlightInfo{Endpoint: info.Endpoint[:1]}); err != nil || got < 10 {
		t.Errorf("GetSqlInfo: %d infos, %v", got, err)
	}

	// The table list: GetTables of type BASE TABLE.
	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableTypes: []string{"BASE TABLE"}})
	if err != nil {
		t.Fatal(err)
	}
	tables := grafanaRows(ctx, t, c, info)
	if len(tables) != 1 || tables[0]["db_schema_name"] != "grafana" || tables[0]["table_name"] != "cpu" {
		t.Errorf("GetTables BASE TABLE: %v, want grafana.cpu", tables)
	}

	// The column list: GetTables of the table with its schema.
	name := "cpu"
	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &name, IncludeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	tables = grafanaRows(ctx, t, c, info)
	if len(tables) != 1 {
		t.Fatalf("GetTables with include_schema: %v", tables)
	}
	sc, err := flight.DeserializeSchema([]byte(tables[0]["table_schema"].(string)), mem)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range sc.Fields() {
		cols = append(cols, f.Name+" "+f.Type.String())
	}
	if got, want := fmt.Sprint(cols), "[time timestamp[ns] id int64 value float64 tag utf8]"; got != want {
		t.Errorf("table_schema: %s, want %s", got, want)
	}

	// Save & test.
	if rows := grafanaQuery(ctx, t, c, "select 1"); len(rows) != 1 {
		t.Errorf("select 1: %v", rows)
	}

	// Queries as the macros expand them, over the whole range of the rows.
	const from, to = "2024-01-02T03:04:05Z", "2024-01-02T03:07:04Z"
	at := func(hms string) time.Time {
		tm, err := time.Parse(time.RFC3339, "2024-01-02T"+hms+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cases := []struct {
		name, sql string
		want      string
	}{
		// $__dateBinAlias(time), $__timeFrom(), $__timeTo()
		{"dateBinAlias", "SELECT date_bin(interval '60 second', time, timestamp '1970-01-01T00:00:00Z') as time_binned, count(*) AS n FROM cpu " +
			"WHERE time >= cast('" + from + "' as timestamp) AND time <= cast('" + to + "' as timestamp) GROUP BY 1 ORDER BY 1",
			fmt.Sprint([]any{at("03:04:00"), 55, at("03:05:00"), 60, at("03:06:00"), 60, at("03:07:00"), 5})},
		// $__timeGroup(time, $__interval) of the plugin's newer versions, $__timeRange(time)
		{"timeGroup", "SELECT date_bin(interval '120 second', time, timestamp '1970-01-01T00:00:00Z') AS time, avg(value) AS value FROM grafana.cpu " +
			"WHERE time >= '" + from + "' AND time <= '" + to + "' GROUP BY 1 ORDER BY 1",
			fmt.Sprint([]any{at("03:04:00"), 28.5, at("03:06:00"), 73.5})},
		// $__timeGroupAlias(time, minute) of its older versions
		{"timeGroupAlias_minute", "SELECT datepart('minute', time) as time_minute,datepart('hour', time) as time_hour,datepart('day', time) as time_day," +
			"datepart('month', time) as time_month,datepart('year', time) as time_year, count(*) AS n FROM cpu GROUP BY ALL ORDER BY 1",
			fmt.Sprint([]any{4, 3, 2, 1, 2024, 55, 5, 3, 2, 1, 2024, 60, 6, 3, 2, 1, 2024, 60, 7, 3, 2, 1, 2024, 5})},
		// $__interval, in a table panel
		{"interval", "SELECT max(time) - min(time) < interval '60 second' AS short, min(time) AS first FROM cpu WHERE time >= cast('2024-01-02T03:06:10Z' as timestamp)",
			fmt.Sprint([]any{true, at("03:06:10")})},
		// the raw times
		{"table", "SELECT time, tag FROM cpu ORDER BY time DESC LIMIT 2", fmt.Sprint([]any{at("03:07:04"), "tag4", at("03:07:03"), "tag3"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []any
			for _, row := range grafanaQuery(ctx, t, c, tc.sql) {
				got = append(got, row...)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("%s\n got %v\nwant %s", tc.sql, got, tc.want)
			}
		})
	}
}

// grafanaQuery runs sql as the data source does (GetFlightInfo of a
// CommandStatementQuery; it refuses anything but one endpoint, then DoGet
// of it) and returns its rows: timestamps read as nanoseconds, whatever
// their unit, integers as int, floats, strings and booleans as they are.
func grafanaQuery(ctx context.Context, t *testing.T, c *flightsql.Client, sql string) [][]any {
	t.Helper()
	info, err := c.Execute(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(info.Endpoint) != 1 {
		t.Fatalf("%s: %d endpoints; the data source takes one", sql, len(info.Endpoint))
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatalf("%s: DoGet: %v", sql, err)
	}
	defer rdr.Release()
	var rows [][]any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]any, rec.NumCols())
			for j, col := range rec.Columns() {
				switch col := col.(type) {
				case *array.Timestamp:
					row[j] = col.Value(i).ToTime(arrow.Nanosecond).UTC()
				case *array.Int64:
					row[j] = int(col.Value(i))
				case *array.Int32:
					row[j] = int(col.Value(i))
				default:
					row[j] = col.GetOneForMarshal(i)
				}
			}
			rows = append(rows, row)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rows
}

// grafanaRows reads endpoint 0 of a metadata FlightInfo into rows by
// column name (binary as string).
func grafanaRows(ctx context.Context, t *testing.T, c *flightsql.Client, info *flight.FlightInfo) []map[string]any {
	t.Helper()
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var rows []map[string]any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := map[string]any{}
			for j, f := range rec.Schema().Fields() {
				switch col := rec.Column(j).(type) {
				case *array.Binary:
					row[f.Name] = string(col.Value(i))
				default:
					row[f.Name] = col.GetOneForMarshal(i)
				}
			}
			rows = append(rows, row)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
