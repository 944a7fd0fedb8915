//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestGrafanaSQL: the SQL Grafana's Flight SQL data source writes for its
// macros runs: date_bin (Apron's macro; a TIMESTAMP_NS, as Grafana reads
// every timestamp as nanoseconds) with and without an origin, datepart,
// and RFC 3339 times cast to a timestamp or compared with time as
// strings.
func TestGrafanaSQL(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 180, 2, base) // 12:00:00 to 12:02:59, one row a second
	ts := func(s string) string {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(tm.UnixNano())
	}
	cases := []struct {
		name, sql string
		want      []string
	}{
		{"date_bin", "SELECT date_bin(interval '60 second', time, timestamp '1970-01-01T00:00:00Z') AS time, count(*) FROM cpu GROUP BY 1 ORDER BY 1",
			[]string{ts("2024-03-01T12:00:00Z") + "|60", ts("2024-03-01T12:01:00Z") + "|60", ts("2024-03-01T12:02:00Z") + "|60"}},
		{"date_bin_origin", "SELECT date_bin(interval '60 second', time, timestamp '2024-03-01T12:00:30Z') AS b, count(*) FROM cpu GROUP BY 1 ORDER BY 1 LIMIT 1",
			[]string{ts("2024-03-01T11:59:30Z") + "|30"}},
		{"date_bin_no_origin", "SELECT DISTINCT date_bin(interval '1 hour', time) FROM cpu", []string{ts("2024-03-01T12:00:00Z")}},
		{"datepart", "SELECT datepart('minute', time), datepart('hour', time), datepart('day', time), datepart('month', time), datepart('year', time), count(*) FROM cpu GROUP BY ALL ORDER BY 1",
			[]string{"0|12|1|3|2024|60", "1|12|1|3|2024|60", "2|12|1|3|2024|60"}},
		{"time_from_to", "SELECT count(*) FROM cpu WHERE time >= cast('2024-03-01T12:01:00Z' as timestamp) AND time < cast('2024-03-01T12:02:00Z' as timestamp)",
			[]string{"60"}},
		{"time_filter", "SELECT count(*) FROM cpu WHERE time >= '2024-03-01T12:00:10Z' AND time <= '2024-03-01T12:00:19Z'", []string{"10"}},
		{"time_filter_offset", "SELECT count(*) FROM cpu WHERE time >= '2024-03-01T13:00:10+01:00' AND time <= '2024-03-01T07:00:19-05:00'", []string{"10"}},
		// DuckDB's cast of a string to a TIMESTAMP drops its UTC offset
		// (to a TIMESTAMP_NS or TIMESTAMPTZ it applies it): Grafana's
		// $__timeFrom, formatted in the Grafana server's zone, is right
		// only when that zone is UTC. The README says so; this case sees
		// DuckDB change.
		{"cast_drops_the_offset", "SELECT cast('2024-03-01T13:00:00+01:00' as timestamp) = TIMESTAMP '2024-03-01 13:00:00', cast('2024-03-01T13:00:00+01:00' as timestamptz) = TIMESTAMPTZ '2024-03-01 12:00:00Z'",
			[]string{"true|true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, schema, err := collect(v.e.Query(context.Background(), c.sql, "db"))
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, c.name, rows, c.want)
			if f := schema.Field(0); f.Type.ID() == arrow.TIMESTAMP && f.Type.(*arrow.TimestampType).Unit != arrow.Nanosecond {
				t.Errorf("column %q is %s, want nanoseconds", f.Name, f.Type)
			}
		})
	}
}
