//go:build duckdb_arrow

package query

import (
	"context"
	"testing"
)

// BenchmarkManySeries: queries of one series, and of how many there
// are, over APRON_BENCH_ROWS buffered rows (default 2M) of 100,000
// series, each chunk with a dictionary of its own (searched by series
// id: scan_select.go, latest_series.go).
func BenchmarkManySeries(b *testing.B) {
	n := benchRows(b)
	v := newEnv(b, Config{})
	lastValueBenchRows(b, v, "cpu", n, 100_000)
	for _, c := range []struct{ name, sql string }{
		{"rows", "SELECT time, usage FROM db.cpu WHERE host = 'host-000007'"},
		{"newest", "SELECT time, usage FROM db.cpu WHERE host = 'host-000007' ORDER BY time DESC LIMIT 1"},
		{"count", "SELECT count(*) FROM db.cpu WHERE host = 'host-000007'"},
		{"series", "SELECT count(DISTINCT host) FROM db.cpu"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r, err := v.e.Query(context.Background(), c.sql, "")
				drain(b, r, err)
			}
		})
	}
}
