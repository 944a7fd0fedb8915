//go:build duckdb_arrow

package integration

import (
	"testing"
	"time"
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
