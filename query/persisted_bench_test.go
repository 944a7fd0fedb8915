//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
)

func envInt(b *testing.B, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q", name, s)
		}
		return n
	}
	return def
}

// usageStore is an engine over a local store, for tables of usageRecord's
// schema (returned) of benchSeries hosts (returned).
func usageStore(b *testing.B) (*storeEnv, *arrow.Schema, []string) {
	store, err := objstore.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	hosts := make([]string, benchSeries)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host-%03d", i)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "usage_system", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	return newStoreEnv(b, store, Config{}), schema, hosts
}

// BenchmarkPersistedQuery groups a table of APRON_BENCH_FILES persisted
// files (default 100: one segment each) of APRON_BENCH_FILE_ROWS rows
// (default 100k), plus 10k buffered rows, through the engine; the
// reference is the same query over the same files with read_parquet in a
// DuckDB of its own.
func BenchmarkPersistedQuery(b *testing.B) {
	files := envInt(b, "APRON_BENCH_FILES", 100)
	per := envInt(b, "APRON_BENCH_FILE_ROWS", 100_000)
	s, schema, hosts := usageStore(b)
	writeSeg := func(seg, n int) (sum float64) {
		rec, sum := usageRecord(s.mem, schema, hosts, base+int64(seg)*int64(time.Minute), 1e5, n, seg*n)
		s.write("db", "t", rec)
		return sum
	}
	for i := range files {
		writeSeg(i, per)
		s.roll()
	}
	extra := writeSeg(files, 10_000) // rolls the last file's segment; stays buffered
	s.waitReleased(b, files)

	paths := s.persistedPaths(b)
	if len(paths) != files {
		b.Fatalf("%d files, want %d", len(paths), files)
	}
	ref := newRefDB(b)
	q := "SELECT host, count(*), avg(usage_user) FROM %s GROUP BY host"
	if s := os.Getenv("APRON_BENCH_SQL"); s != "" {
		q = s // with %s for the table
	}
	apronSQL := fmt.Sprintf(q, "db.t")
	refSQL := fmt.Sprintf(q, "read_parquet(["+strings.Join(paths, ", ")+"])")
	// Same answer, but for the buffered rows.
	got := s.query("SELECT count(*), count(host), sum(usage_user) FROM db.t", "")
	want := ref.query("SELECT count(*) + 10000, count(host) + 10000, sum(usage_user) + " + fmt.Sprint(extra) +
		" FROM read_parquet([" + strings.Join(paths, ", ") + "])")
	equalRows(b, "total", got, want)

	input := files*per + 10_000
	for _, side := range []string{"apron", "reference"} {
		b.Run(side, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				var r array.RecordReader
				var err error
				if side == "apron" {
					r, err = s.e.Query(context.Background(), apronSQL, "")
				} else {
					r, err = ref.reader(refSQL)
				}
				drain(b, r, err)
			}
			b.ReportMetric(float64(input)*float64(b.N)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

// usageRecord is n rows of schema (time, host, usage_user, usage_system)
// from start, step ns apart, over hosts; row i's usage_user is
// ((offset+i) % 1000) / 10, whose sum it returns.
func usageRecord(mem memory.Allocator, schema *arrow.Schema, hosts []string, start, step int64, n, offset int) (arrow.RecordBatch, float64) {
	tb := array.NewTimestampBuilder(mem, tsNs)
	hb := array.NewStringBuilder(mem)
	ub := array.NewFloat64Builder(mem)
	sb := array.NewFloat64Builder(mem)
	var sum float64
	for i := range n {
		tb.Append(arrow.Timestamp(start + int64(i)*step))
		hb.Append(hosts[i%len(hosts)])
		u := float64((offset+i)%1000) / 10
		ub.Append(u)
		sum += u
		sb.Append(float64(i % 77))
	}
	cols := []arrow.Array{tb.NewArray(), hb.NewArray(), ub.NewArray(), sb.NewArray()}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	for _, b := range []array.Builder{tb, hb, ub, sb} {
		b.Release()
	}
	return rec, sum
}
