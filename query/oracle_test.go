//go:build duckdb_arrow

package query

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestOracle writes generated data through the buffer and into a plain
// DuckDB, runs the same queries on both, and wants identical results.
func TestOracle(t *testing.T) {
	v := newEnv(t, Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db1; CREATE SCHEMA db2;
		CREATE TABLE db1.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE, region VARCHAR, idle BIGINT, temp DOUBLE);
		CREATE TABLE db1.mem (time TIMESTAMP_NS, host VARCHAR, used BIGINT, free BIGINT);
		CREATE TABLE db2.events (time TIMESTAMP_NS, kind VARCHAR, n BIGINT, ok BOOLEAN, note VARCHAR)`)
	both := func(db, table string, cols ...col) {
		rec := batch(v.mem, cols...)
		ref.append(db, table, rec)
		v.write(db, table, rec)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	maybeNull := func(x any) any {
		if rng.IntN(10) == 0 {
			return nil
		}
		return x
	}
	const hosts = 50
	day := int64(24 * 3600 * 1e9)
	start := base - day/2 // the data spans two UTC days: two partitions
	for w := range 12 {
		n := 1000 + rng.IntN(3000)
		times, host, region, usage, idle, temp := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			times[i] = start + rng.Int64N(day) // out of order, some duplicates by chance
			h := rng.IntN(hosts)
			host[i] = fmt.Sprintf("host-%02d", h)
			region[i] = maybeNull([]string{"eu", "us", "ap"}[h%3])
			usage[i] = maybeNull(float64(rng.IntN(10000)) / 100)
			idle[i] = maybeNull(rng.Int64N(1000))
			temp[i] = maybeNull(20 + float64(rng.IntN(400))/10)
		}
		cols := []col{{"time", tsNs, times}, {"host", arrow.BinaryTypes.String, host}, {"usage", arrow.PrimitiveTypes.Float64, usage}}
		if w >= 3 {
			cols = append(cols, col{"region", arrow.BinaryTypes.String, region}, col{"idle", arrow.PrimitiveTypes.Int64, idle})
		}
		if w >= 7 {
			cols = append(cols, col{"temp", arrow.PrimitiveTypes.Float64, temp})
		}
		both("db1", "cpu", cols...)

		times, used, free := make([]any, n/2), make([]any, n/2), make([]any, n/2)
		for i := range n / 2 {
			times[i] = start + int64(w*n/2+i)*1e9
			used[i] = maybeNull(rng.Int64N(1 << 30))
			free[i] = rng.Int64N(1 << 30)
		}
		both("db1", "mem", col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host[:n/2]},
			col{"used", arrow.PrimitiveTypes.Int64, used}, col{"free", arrow.PrimitiveTypes.Int64, free})

		m := 200 + rng.IntN(200)
		times, kind, num, ok, note := make([]any, m), make([]any, m), make([]any, m), make([]any, m), make([]any, m)
		for i := range m {
			times[i] = start + rng.Int64N(day)
			kind[i] = []string{"deploy", "alert", "restart", "o'quote", "ünïcode"}[rng.IntN(5)]
			num[i] = maybeNull(rng.Int64N(100))
			ok[i] = maybeNull(rng.IntN(2) == 0)
			note[i] = maybeNull(strings.Repeat("long note ", rng.IntN(5)))
		}
		ecols := []col{{"time", tsNs, times}, {"kind", arrow.BinaryTypes.String, kind}, {"n", arrow.PrimitiveTypes.Int64, num}, {"ok", arrow.FixedWidthTypes.Boolean, ok}}
		if w%2 == 1 {
			ecols = append(ecols, col{"note", arrow.BinaryTypes.String, note})
		}
		both("db2", "events", ecols...)
	}

	queries := []struct {
		sql     string
		ordered bool
	}{
		{"SELECT count(*), count(usage), count(region), count(idle), count(temp), count(DISTINCT host) FROM db1.cpu", false},
		{"SELECT host, count(*), sum(usage), avg(usage), min(idle), max(idle), avg(temp) FROM db1.cpu GROUP BY host", false},
		{"SELECT region, host, count(*) FROM db1.cpu GROUP BY ALL", false},
		{"SELECT time_bucket(INTERVAL '1 minute', time) AS b, host, count(*), avg(usage) FROM db1.cpu GROUP BY b, host", false},
		{"SELECT date_trunc('hour', time) AS h, count(*), max(usage) FROM db1.cpu GROUP BY h ORDER BY h", true},
		{"SELECT time, host, usage FROM db1.cpu WHERE usage > 90 AND region = 'eu'", false},
		{"SELECT * FROM db1.cpu ORDER BY time, host, usage NULLS FIRST LIMIT 25", false},
		{"SELECT * FROM db1.cpu WHERE temp IS NULL AND idle IS NOT NULL", false},
		{"SELECT host, time, usage, lag(usage) OVER (PARTITION BY host ORDER BY time, usage) FROM db1.cpu", false},
		{"SELECT host, time, sum(idle) OVER (PARTITION BY host ORDER BY time, idle ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM db1.cpu", false},
		{"SELECT host, row_number() OVER (PARTITION BY region ORDER BY usage DESC, time, host) r FROM db1.cpu QUALIFY r <= 3", false},
		{"SELECT a.host, count(*) FROM db1.cpu a JOIN db1.cpu b ON a.host = b.host AND a.time = b.time GROUP BY a.host", false},
		{"SELECT c.host, count(*), sum(m.used) FROM db1.cpu c JOIN db1.mem m ON c.host = m.host AND date_trunc('hour', c.time) = date_trunc('hour', m.time) GROUP BY c.host", false},
		{"SELECT time, used, free FROM db1.mem WHERE time >= TIMESTAMP '2024-03-01 00:00:00' AND time < TIMESTAMP '2024-03-01 06:00:00'", false},
		{"SELECT kind, count(*), count(note), sum(n), bool_or(ok), bool_and(ok) FROM db2.events GROUP BY kind", false},
		{"SELECT * FROM db2.events WHERE kind LIKE 'o%' OR kind = 'ünïcode'", false},
		{"SELECT e.kind, count(*) FROM db2.events e, db1.mem m WHERE date_trunc('minute', e.time) = date_trunc('minute', m.time) GROUP BY e.kind", false},
		{"WITH x AS (SELECT host, avg(usage) u FROM db1.cpu GROUP BY host) SELECT a.host, b.host FROM x a JOIN x b ON a.u < b.u AND a.host < 'host-05' AND b.host < 'host-05'", false},
		{"SELECT host, max(time) - min(time) FROM db1.cpu GROUP BY host", false},
		{"SELECT epoch_ns(time) % 1000000007, host FROM db1.cpu WHERE usage IS NULL", false},
		{"SELECT count(*) FROM (SELECT * FROM db1.cpu UNION ALL SELECT time, host, usage, region, idle, temp FROM db1.cpu WHERE usage < 10)", false},
		{"SELECT host, region FROM db1.cpu EXCEPT SELECT host, 'eu' FROM db1.mem", false},
		{"SELECT quantile_cont(usage, 0.9), median(idle), stddev_samp(usage) FROM db1.cpu", false},
		// String equalities: the scans emit only the rows that can match
		// (scan_select.go). region is NULL in some rows and missing from
		// the first writes' chunks, note from every other write's.
		{"SELECT * FROM db1.cpu WHERE host = 'host-07'", false},
		{"SELECT time, usage, idle FROM db1.cpu WHERE 'host-07' = host AND region = 'us' AND usage > 10", false},
		{"SELECT count(*), sum(usage) FROM db1.cpu WHERE region = 'ap' AND time >= TIMESTAMP '2024-03-01 00:00:00'", false},
		{"SELECT count(*) FROM db1.cpu WHERE host = 'host-07' AND host = 'host-08'", false},
		{"SELECT count(*), count(region) FROM db1.cpu WHERE HOST = 'host-03' AND cpu.Host = 'host-03'", false},
		{"SELECT count(*), sum(usage) FROM db1.cpu WHERE idle = '05'", false}, // compared as numbers
		{"SELECT * FROM db1.cpu WHERE host = 'host-07' OR region = 'eu'", false},
		{"SELECT time, kind, n FROM db2.events WHERE kind = 'o''quote'", false},
		{"SELECT kind, n, ok FROM db2.events WHERE note = 'long note long note '", false},
		{"SELECT h.host, count(*) FROM db1.cpu h WHERE h.host = 'host-11' GROUP BY h.host", false},
	}
	for i, q := range queries {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got, want := v.query(q.sql, ""), ref.query(q.sql)
			if !q.ordered {
				got, want = sorted(got), sorted(want)
			}
			if len(want) == 0 {
				t.Errorf("%s: no rows: the query tests nothing", q.sql)
			}
			equalRows(t, q.sql, got, want)
		})
	}
	if v.e.Stats().RowsSelectedOut == 0 {
		t.Error("no scan left out a row for a string equality: the equality queries test nothing of scan_select.go")
	}
}
