//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchRows is APRON_BENCH_ROWS, default 2M.
func benchRows(b *testing.B) int {
	if s := os.Getenv("APRON_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("APRON_BENCH_ROWS=%q", s)
		}
		return n
	}
	return 2_000_000
}

const benchSeries = 100

// benchHosts are the series' host names: host-000 to host-099.
var benchHosts = func() []string {
	h := make([]string, benchSeries)
	for i := range h {
		h[i] = fmt.Sprintf("host-%03d", i)
	}
	return h
}()

// benchEnv writes n rows of db.cpu (time 1 ms apart, host among 100 series,
// usage, idle) through the buffer and into a reference DuckDB table.
func benchEnv(b *testing.B, n int) (*env, *refDB, int64) {
	v := newEnv(b, Config{})
	ref := newRefDB(b)
	ref.exec("CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE, idle BIGINT)")
	const per = 100_000
	for off := 0; off < n; off += per {
		rec := cpuBenchBatch(v.mem, off, min(per, n-off))
		ref.append("db", "cpu", rec)
		v.write("db", "cpu", rec)
	}
	return v, ref, base + int64(n-1)*1e6
}

// cpuBenchBatch is rows off to off+m of benchEnv's table db.cpu.
func cpuBenchBatch(mem memory.Allocator, off, m int) arrow.RecordBatch {
	tb := array.NewTimestampBuilder(mem, tsNs)
	hb := array.NewStringBuilder(mem)
	ub := array.NewFloat64Builder(mem)
	ib := array.NewInt64Builder(mem)
	defer func() {
		tb.Release()
		hb.Release()
		ub.Release()
		ib.Release()
	}()
	for i := off; i < off+m; i++ {
		tb.Append(arrow.Timestamp(base + int64(i)*1e6))
		hb.Append(benchHosts[i%benchSeries])
		ub.Append(float64(i%1000) / 10)
		ib.Append(int64(i % 777))
	}
	cols := []arrow.Array{tb.NewArray(), hb.NewArray(), ub.NewArray(), ib.NewArray()}
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "idle", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, cols, int64(m))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// drain reads r to the end and returns rows and bytes of Arrow buffers.
func drain(b *testing.B, r array.RecordReader, err error) (rows, bytes int64) {
	if err != nil {
		b.Fatal(err)
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		rows += rec.NumRows()
		for _, c := range rec.Columns() {
			for _, buf := range c.Data().Buffers() {
				if buf != nil {
					bytes += int64(buf.Len())
				}
			}
		}
	}
	if err := r.Err(); err != nil {
		b.Fatal(err)
	}
	return rows, bytes
}

// runBench runs sql on the engine and on the reference. rows/s counts
// result rows, or input rows when input > 0.
func runBench(b *testing.B, v *env, ref *refDB, sql string, input int) {
	for _, side := range []string{"apron", "reference"} {
		b.Run(side, func(b *testing.B) {
			var rows, bytes int64
			start := time.Now()
			for b.Loop() {
				var r array.RecordReader
				var err error
				if side == "apron" {
					r, err = v.e.Query(context.Background(), sql, "")
				} else {
					r, err = ref.reader(sql)
				}
				n, m := drain(b, r, err)
				rows += n
				bytes += m
				if input > 0 {
					rows += int64(input) - n
				}
			}
			s := time.Since(start).Seconds()
			b.ReportMetric(float64(rows)/s, "rows/s")
			b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
		})
	}
}

func BenchmarkScan(b *testing.B) {
	v, ref, _ := benchEnv(b, benchRows(b))
	runBench(b, v, ref, "SELECT * FROM db.cpu", 0)
}

func BenchmarkAggregate(b *testing.B) {
	n := benchRows(b)
	v, ref, _ := benchEnv(b, n)
	runBench(b, v, ref, "SELECT host, time_bucket(INTERVAL '1 minute', time) AS minute, count(*), avg(usage) FROM db.cpu GROUP BY ALL", n)
}

// BenchmarkLastFiveMinutes reads one series over the last 5 minutes: time
// pruning skips the chunks outside.
func BenchmarkLastFiveMinutes(b *testing.B) {
	v, ref, last := benchEnv(b, benchRows(b))
	from := time.Unix(0, last-5*60*1e9).UTC().Format("2006-01-02 15:04:05.000000000")
	runBench(b, v, ref, fmt.Sprintf("SELECT count(*), avg(usage) FROM db.cpu WHERE host = 'host-007' AND time >= TIMESTAMP_NS '%s'", from), 0)
}
