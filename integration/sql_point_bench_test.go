//go:build duckdb_arrow

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkSQLPoint measures the queries dashboards and alerts repeat
// (issue 14): a trivial query (the per-query overhead alone), count(*)
// over the table and over a time range, min/max of time, one series over
// the last 10 minutes, the last row per series, and the newest 100 rows
// (ORDER BY time DESC LIMIT 100). Each op runs every
// query 100 times through Flight SQL (GetFlightInfo + DoGet, as ADBC
// does) and reports p50 and p99. Run with, for example,
//
//	APRON_BENCH_ROWS=5000000 go test -tags duckdb_arrow -run '^$' -bench SQLPoint -benchtime 3x ./integration/
func BenchmarkSQLPoint(b *testing.B) {
	d := makeSQLBenchData(b, false)
	from := d.last - int64(10*time.Minute)
	mid := d.first + (d.last-d.first)/2
	queries := []struct{ name, sql string }{
		{"select1", "SELECT 1"},
		{"count", "SELECT count(*) FROM db.t"},
		{"count-range", "SELECT count(*) FROM db.t WHERE time >= " + tsLiteral(mid)},
		{"min-max-time", "SELECT min(time), max(time) FROM db.t"},
		{"host-10min", "SELECT * FROM db.t WHERE host = 'host-7' AND time >= " + tsLiteral(from)},
		{"last-per-host", "SELECT host, arg_max(usage_user, time), max(time) FROM db.t GROUP BY host"},
		{"newest-100", "SELECT * FROM db.t ORDER BY time DESC LIMIT 100"},
		{"host-newest-10", "SELECT * FROM db.t WHERE host = 'host-7' ORDER BY time DESC LIMIT 10"},
		{"host-1m-avg", "SELECT time_bucket(INTERVAL 1 MINUTE, time) AS m, avg(usage_user) FROM db.t WHERE host = 'host-7' GROUP BY m"},
	}
	for _, q := range queries {
		b.Run(q.name, func(b *testing.B) { benchLatency(b, d.apronAddr, q.sql, 100) })
	}
}

// BenchmarkSQLPointPersisted is BenchmarkSQLPoint's selective queries once
// the table is persisted (one segment, rolled over by a DROP TABLE of
// another table, written as Parquet): one host's last 10 minutes, the same
// text each time and a host drawn per query (a new text: what a dashboard
// of many series sends), one host's 1-minute averages over the day, and
// count(*). The page cache (--page-cache-size) holds the pages the first
// runs read; with APRON_PAGE_CACHE_SIZE=0 in the environment (the server
// inherits it) they are read from the files every time.
//
//	APRON_BENCH_ROWS=10000000 go test -tags duckdb_arrow -run '^$' -bench SQLPointPersisted -benchtime 3x ./integration/
func BenchmarkSQLPointPersisted(b *testing.B) {
	d := makeSQLBenchData(b, false)
	ctx := context.Background()
	c := sqlClient(b, d.apronAddr, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "time", Type: arrow.FixedWidthTypes.Timestamp_ns}}, nil))
	bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(d.last))
	one := bld.NewRecordBatch()
	bld.Release()
	defer one.Release()
	if _, err := sqlIngest(ctx, c, "db", "roll", one); err != nil {
		b.Fatal(err)
	}
	if _, err := c.ExecuteUpdate(ctx, "DROP TABLE db.roll"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for {
		st := parquetFileStats(b, d.apronAddr, "db", "t")
		if st.Rows == int64(d.rows) {
			b.Logf("%d rows persisted in %d files in %s", st.Rows, st.Files, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d rows persisted after 5 minutes", st.Rows, d.rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
	from := tsLiteral(d.last - int64(10*time.Minute))
	queries := []struct {
		name string
		sql  func(i int) string
	}{
		{"host-10min", func(int) string { return "SELECT * FROM db.t WHERE host = 'host-7' AND time >= " + from }},
		{"host-10min-drawn", func(i int) string {
			return fmt.Sprintf("SELECT * FROM db.t WHERE host = 'host-%d' AND time >= %s", (i*37)%sqlBenchHosts, from)
		}},
		{"host-1m-avg", func(int) string {
			return "SELECT time_bucket(INTERVAL 1 MINUTE, time) AS m, avg(usage_user) FROM db.t WHERE host = 'host-7' GROUP BY m"
		}},
		{"count", func(int) string { return "SELECT count(*) FROM db.t" }},
	}
	for _, q := range queries {
		b.Run(q.name, func(b *testing.B) { benchLatencyOf(b, d.apronAddr, q.sql, 100) })
	}
}
