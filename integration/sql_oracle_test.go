//go:build duckdb_arrow

package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ocol is one generated column: values are int64 (times in ns, integers),
// float64, string, bool or nil (null).
type ocol struct {
	name string
	typ  arrow.DataType // the canonical type: what the reference gets
	vals []any
}

// buildOracleBatch builds a batch of cols. wire overrides the Arrow type a
// column is sent with (a timestamp of another unit or zone, a dictionary or
// large string): Apron must normalize it to the canonical type.
func buildOracleBatch(mem memory.Allocator, cols []ocol, wire map[string]arrow.DataType) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		typ := c.typ
		if w, ok := wire[c.name]; ok {
			typ = w
		}
		fields[i] = arrow.Field{Name: c.name, Type: typ, Nullable: c.name != "time"}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, c := range cols {
		fb := b.Field(i)
		for _, v := range c.vals {
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.TimestampBuilder:
				ns := v.(int64)
				switch fields[i].Type.(*arrow.TimestampType).Unit {
				case arrow.Microsecond:
					if ns%1000 != 0 {
						panic("time not a whole microsecond")
					}
					ns /= 1000
				case arrow.Millisecond, arrow.Second:
					panic("unit not generated")
				}
				fb.Append(arrow.Timestamp(ns))
			case *array.Int64Builder:
				fb.Append(v.(int64))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.LargeStringBuilder:
				fb.Append(v.(string))
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString(v.(string)); err != nil {
					panic(err)
				}
			case *array.BooleanBuilder:
				fb.Append(v.(bool))
			default:
				panic(fmt.Sprintf("no builder case for %T", fb))
			}
		}
	}
	return b.NewRecordBatch()
}

// oracleData is the generated data set: per table, the batches in the
// order they are written.
type oracleBatch struct {
	db, table string
	cols      []ocol
	wire      map[string]arrow.DataType
	viaADBC   bool // else plain Flight DoPut (in two slices)
}

const oracleHosts, oracleRegions = 50, 3

var oracleStart = time.Date(2024, 5, 1, 7, 0, 0, 0, time.UTC).UnixNano()

// genOracleData generates the batches of metrics.cpu (a schema that grows
// and leaves columns out), metrics.mem (half its times exactly those of cpu
// rows of the same host, a quarter one nanosecond later) and events.log,
// with nulls, over two days, every time distinct within its table. It
// returns the sorted cpu times too.
func genOracleData() ([]oracleBatch, []int64) {
	rng := rand.New(rand.NewPCG(20240501, 42))
	const day = int64(24 * time.Hour)
	used := map[int64]bool{}
	uniqueTime := func(align int64) int64 {
		for {
			t := oracleStart + rng.Int64N(2*day)
			t -= t % align
			if !used[t] {
				used[t] = true
				return t
			}
		}
	}
	maybeNull := func(pct int, v any) any {
		if rng.IntN(100) < pct {
			return nil
		}
		return v
	}
	regions := []string{"eu", "us", "ap"}
	notes := []string{"ok", "it's fine", "ünïcode ✓", "", "a|b", "long " + strings.Repeat("x", 40)}
	tsUS := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	tsNY := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}
	dictStr := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	str, f64, i64 := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int64

	var out []oracleBatch
	var cpuTimes []int64
	for w := range 14 {
		n := 700 + rng.IntN(1100)
		align := int64(1)
		var wire map[string]arrow.DataType
		switch w % 4 {
		case 1:
			align = 1000
			wire = map[string]arrow.DataType{"time": tsUS}
		case 2:
			wire = map[string]arrow.DataType{"time": tsNY, "region": arrow.BinaryTypes.LargeString}
		case 3:
			wire = map[string]arrow.DataType{"host": dictStr}
		}
		times, host, region, uu, us, idle, temp, note := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			t := uniqueTime(align)
			cpuTimes = append(cpuTimes, t)
			times[i] = t
			host[i] = fmt.Sprintf("host-%02d", rng.IntN(oracleHosts))
			region[i] = maybeNull(2, regions[rng.IntN(oracleRegions)])
			uu[i] = maybeNull(8, float64(rng.IntN(1_000_000))/10_000)
			us[i] = maybeNull(8, rng.Float64()*50)
			idle[i] = maybeNull(10, rng.Int64N(1000))
			temp[i] = maybeNull(15, 15+float64(rng.IntN(600))/10)
			note[i] = maybeNull(40, notes[rng.IntN(len(notes))])
		}
		cols := []ocol{{"time", tsNs, times}, {"host", str, host}, {"region", str, region}, {"usage_user", f64, uu}}
		if w%5 != 4 { // every fifth batch leaves usage_system out
			cols = append(cols, ocol{"usage_system", f64, us})
		}
		if w >= 4 { // the schema grows
			cols = append(cols, ocol{"idle", i64, idle})
		}
		if w >= 8 {
			cols = append(cols, ocol{"temp", f64, temp}, ocol{"note", str, note})
		}
		if w == 2 || w == 6 || w == 11 { // columns in another order
			slices.Reverse(cols[1:])
		}
		out = append(out, oracleBatch{"metrics", "cpu", cols, wire, w%2 == 0})

		// mem: half at the exact time of a cpu row of this batch (same
		// host), a quarter a nanosecond later, a quarter elsewhere.
		m := n / 2
		mt, mh, mu, mf, mo := make([]any, m), make([]any, m), make([]any, m), make([]any, m), make([]any, m)
		for i := range m {
			j := rng.IntN(n)
			switch {
			case i%4 < 2:
				mt[i], mh[i] = times[j], host[j]
			case i%4 == 2 && !used[times[j].(int64)+1]:
				used[times[j].(int64)+1] = true
				mt[i], mh[i] = times[j].(int64)+1, host[j]
			default:
				mt[i], mh[i] = uniqueTime(1), fmt.Sprintf("host-%02d", rng.IntN(oracleHosts))
			}
			mu[i] = maybeNull(10, rng.Int64N(1<<34))
			mf[i] = rng.Int64N(1 << 34)
			mo[i] = maybeNull(10, rng.IntN(3) > 0)
		}
		// Exact-time rows may repeat a time: keep the first.
		seen := map[int64]bool{}
		var keep []int
		for i := range m {
			if !seen[mt[i].(int64)] {
				seen[mt[i].(int64)] = true
				keep = append(keep, i)
			}
		}
		pick := func(v []any) []any {
			o := make([]any, len(keep))
			for k, i := range keep {
				o[k] = v[i]
			}
			return o
		}
		out = append(out, oracleBatch{"metrics", "mem", []ocol{{"time", tsNs, pick(mt)}, {"host", str, pick(mh)},
			{"used", i64, pick(mu)}, {"free", i64, pick(mf)}, {"ok", arrow.FixedWidthTypes.Boolean, pick(mo)}}, nil, w%2 == 1})

		if w%2 == 0 {
			k := 200 + rng.IntN(200)
			et, ek, en, em := make([]any, k), make([]any, k), make([]any, k), make([]any, k)
			for i := range k {
				et[i] = uniqueTime(1)
				ek[i] = []string{"deploy", "alert", "restart", "o'quote", "ünïcode"}[rng.IntN(5)]
				en[i] = maybeNull(20, rng.Int64N(100))
				em[i] = maybeNull(30, notes[rng.IntN(len(notes))])
			}
			ecols := []ocol{{"time", tsNs, et}, {"kind", str, ek}, {"n", i64, en}}
			if w%4 == 2 {
				ecols = append(ecols, ocol{"msg", str, em})
			}
			out = append(out, oracleBatch{"events", "log", ecols, nil, w%4 == 0})
		}
	}
	slices.Sort(cpuTimes)
	return out, cpuTimes
}

func tsLiteral(ns int64) string {
	return "TIMESTAMP_NS '" + time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000") + "'"
}

// TestSQLOracle writes generated data to Apron (ADBC bulk ingest and plain
// Flight DoPut, times in several units and zones, strings as dictionaries
// and large strings, a schema that grows) and into an in-process DuckDB
// (the reference, in canonical form), runs the same queries through ADBC
// and on the reference, and wants identical results and result schemas.
func TestSQLOracle(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir(), "--wal-sync", "none")
	cn := adbcConn(t, srv.Addr, mem)
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)

	ref := newRefDuck(t)
	ref.exec(`CREATE SCHEMA metrics; CREATE SCHEMA events;
		CREATE TABLE metrics.cpu (time TIMESTAMP_NS, host VARCHAR, region VARCHAR, usage_user DOUBLE, usage_system DOUBLE, idle BIGINT, temp DOUBLE, note VARCHAR);
		CREATE TABLE metrics.mem (time TIMESTAMP_NS, host VARCHAR, used BIGINT, free BIGINT, ok BOOLEAN);
		CREATE TABLE events.log (time TIMESTAMP_NS, kind VARCHAR, n BIGINT, msg VARCHAR)`)

	batches, cpuTimes := genOracleData()
	for i, ob := range batches {
		canon := buildOracleBatch(mem, ob.cols, nil)
		ref.append(ob.db, ob.table, canon)
		canon.Release()
		wire := buildOracleBatch(mem, ob.cols, ob.wire)
		n := wire.NumRows()
		if ob.viaADBC {
			got, err := adbcIngest(ctx, cn, ob.db, ob.table, adbc.OptionValueIngestModeCreateAppend, wire)
			if err != nil || got != n {
				t.Fatalf("batch %d: ADBC ingest into %s.%s (%s): %d rows, %v", i, ob.db, ob.table, wire.Schema(), got, err)
			}
		} else {
			a, b := wire.NewSlice(0, n/3), wire.NewSlice(n/3, n)
			md, err := flightPut(ctx, fc, []string{ob.db, ob.table}, mem, a, b)
			a.Release()
			b.Release()
			if err != nil || len(md) != 2 || md[1].GetTotalRowsWritten() != n {
				t.Fatalf("batch %d: DoPut into %s.%s (%s): %v, %v", i, ob.db, ob.table, wire.Schema(), md, err)
			}
		}
		wire.Release()
	}

	day2 := time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC).UnixNano()
	t1, t2 := cpuTimes[len(cpuTimes)/3], cpuTimes[len(cpuTimes)/3+700]
	queries := []struct {
		sql     string
		ordered bool // a total ORDER BY: compare in order
	}{
		{"SELECT * FROM metrics.cpu", false},
		{"SELECT * FROM metrics.mem", false},
		{"SELECT * FROM events.log", false},
		{`SELECT count(*), count(region), count(usage_user), count(usage_system), count(idle), count(temp), count(note),
			count(DISTINCT host), count(DISTINCT host || '/' || region), min(time), max(time) FROM metrics.cpu`, false},
		{`SELECT host, region, count(*), sum(usage_user), avg(usage_system), min(idle), max(idle), sum(idle), avg(temp),
			min(time), max(time) FROM metrics.cpu GROUP BY host, region`, false},
		// A tag's values, and the latest row of some hosts: picked in Go.
		{"SELECT DISTINCT region FROM metrics.cpu ORDER BY region NULLS FIRST", true},
		{"SELECT DISTINCT host FROM metrics.cpu WHERE time < " + tsLiteral(day2), false},
		{"SELECT count(DISTINCT host) AS hosts FROM metrics.cpu", false},
		{"SELECT count(DISTINCT region) FROM metrics.cpu WHERE time < " + tsLiteral(day2), false},
		{`SELECT host, max(time), arg_max(usage_user, time) FROM metrics.cpu WHERE host IN ('host-01', 'host-03', 'nope')
			GROUP BY host ORDER BY host`, true},
		{`SELECT time_bucket(INTERVAL '5 minutes', time) AS b, region, count(*), avg(usage_user), max(usage_system)
			FROM metrics.cpu GROUP BY ALL`, false},
		{`SELECT date_trunc('hour', time) AS h, count(*), sum(idle), count(DISTINCT host), avg(temp)
			FROM metrics.cpu GROUP BY h ORDER BY h`, true},
		{`SELECT host, time, usage_user, lag(usage_user) OVER (PARTITION BY host ORDER BY time) AS prev,
			usage_user - lag(usage_user, 2) OVER (PARTITION BY host ORDER BY time) AS d2 FROM metrics.cpu WHERE region = 'eu'`, false},
		{`SELECT host, time, row_number() OVER (PARTITION BY host ORDER BY time) AS rn FROM metrics.cpu QUALIFY rn % 50 = 1`, false},
		{`SELECT host, region, time, avg(usage_user) OVER (PARTITION BY host, region ORDER BY time ROWS BETWEEN 4 PRECEDING AND CURRENT ROW) AS mavg,
			sum(idle) OVER (PARTITION BY host ORDER BY time RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW) AS hsum
			FROM metrics.cpu WHERE time < ` + tsLiteral(day2), false},
		{`SELECT c.host, count(*), sum(m.used), avg(c.usage_user), count(m.ok) FROM metrics.cpu c JOIN metrics.mem m
			ON c.time = m.time AND c.host = m.host GROUP BY c.host`, false},
		{`SELECT count(*), count(DISTINCT a.host) FROM metrics.cpu a JOIN metrics.cpu b ON a.time = b.time`, false},
		{`SELECT c.time, m.time, c.host FROM metrics.cpu c JOIN metrics.mem m ON epoch_ns(m.time) = epoch_ns(c.time) + 1`, false},
		{`SELECT time, host, usage_user, idle FROM metrics.cpu WHERE time >= ` + tsLiteral(t1) + ` AND time < ` + tsLiteral(t2) +
			` AND host IN ('host-03', 'host-17', 'host-41')`, false},
		{`SELECT region, count(*), avg(usage_user), min(time), max(time) FROM metrics.cpu WHERE time BETWEEN ` +
			tsLiteral(day2-3*int64(time.Hour)) + ` AND ` + tsLiteral(day2+3*int64(time.Hour)+1) + ` AND region <> 'us' GROUP BY region`, false},
		{`SELECT * FROM metrics.cpu ORDER BY time DESC LIMIT 20`, true},
		{`SELECT host, time, usage_user FROM metrics.cpu WHERE usage_user IS NOT NULL ORDER BY usage_user DESC, time LIMIT 15`, true},
		{`WITH h AS (SELECT host, date_trunc('hour', time) AS hr, avg(usage_user) AS u, count(*) AS n FROM metrics.cpu GROUP BY ALL)
			SELECT a.host, a.hr, a.u - b.u, a.n + b.n FROM h a JOIN h b ON a.host = b.host AND a.hr = b.hr + INTERVAL 1 HOUR`, false},
		{`SELECT src, count(*), sum(idle), count(DISTINCT time) FROM (SELECT 'a' AS src, idle, time FROM metrics.cpu WHERE region = 'eu'
			UNION ALL SELECT 'b', idle, time FROM metrics.cpu WHERE idle > 500 UNION ALL SELECT 'c', idle, time FROM metrics.cpu) GROUP BY src`, false},
		{`SELECT * FROM metrics.cpu WHERE usage_system IS NULL AND idle IS NOT NULL AND temp IS NULL`, false},
		{`SELECT kind, count(*), count(msg), sum(n), avg(n), min(time), max(time) FROM events.log GROUP BY kind`, false},
		{`SELECT e.kind, count(*), count(DISTINCT c.host) FROM events.log e JOIN metrics.cpu c
			ON date_trunc('minute', e.time) = date_trunc('minute', c.time) GROUP BY e.kind`, false},
		{`SELECT host, time_bucket(INTERVAL '5 minutes', time) AS b, sum(used), count(used), bool_or(ok), bool_and(ok)
			FROM metrics.mem GROUP BY ALL HAVING count(*) > 1`, false},
		{`SELECT epoch_ns(time) % 1000003 AS r, host, note FROM metrics.cpu WHERE usage_user IS NULL`, false},
		{`SELECT host, max(time) - min(time) AS span, arg_max(usage_user, time), arg_min(note, time) FROM metrics.cpu GROUP BY host`, false},
		{`SELECT count(*), sum(idle) FROM metrics.cpu WHERE time > (SELECT max(time) FROM metrics.mem) - INTERVAL 6 HOUR`, false},
		{`SELECT region, quantile_disc(usage_user, 0.9), median(idle), stddev_samp(usage_system) FROM metrics.cpu GROUP BY region`, false},
	}
	for i, q := range queries {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rdr, err := adbcQuery(ctx, cn, q.sql)
			if err != nil {
				t.Fatalf("apron: %s: %v", q.sql, err)
			}
			gotSchema, got, err := canonResult(rdr)
			if err != nil {
				t.Fatalf("apron: %s: reading: %v", q.sql, err)
			}
			rr, err := ref.query(q.sql)
			if err != nil {
				t.Fatal(err)
			}
			wantSchema, want, err := canonResult(rr)
			if err != nil {
				t.Fatalf("reference: %s: reading: %v", q.sql, err)
			}
			t.Logf("%d rows", len(want))
			if len(want) == 0 {
				t.Errorf("%s: no rows on the reference: the query tests nothing", q.sql)
			}
			if gotSchema != wantSchema {
				t.Errorf("%s:\nresult schema %s\n    reference %s", q.sql, gotSchema, wantSchema)
			}
			if !q.ordered {
				sortRows(got)
				sortRows(want)
			}
			if len(got) != len(want) {
				t.Errorf("%s: %d rows, reference %d\n got: %.5v\nwant: %.5v", q.sql, len(got), len(want), got, want)
				return
			}
			for k := range got {
				if !sameRow(got[k], want[k]) {
					t.Errorf("%s: row %d = %q, reference %q", q.sql, k, got[k].String(), want[k].String())
					return
				}
			}
		})
	}
}
