//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

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

// BenchmarkPersistedQuery groups a table of APRON_BENCH_FILES persisted
// files (default 100: one segment each) of APRON_BENCH_FILE_ROWS rows
// (default 100k), plus 10k buffered rows, through the engine; the
// reference is the same query over the same files with read_parquet in a
// DuckDB of its own.
func BenchmarkPersistedQuery(b *testing.B) {
	files := envInt(b, "APRON_BENCH_FILES", 100)
	per := envInt(b, "APRON_BENCH_FILE_ROWS", 100_000)
	store, err := objstore.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := newStoreEnv(b, store, Config{})
	hosts := make([]string, benchSeries)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host-%03d", i)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "usage_system", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	writeSeg := func(seg, n int) (sum float64) {
		tb := array.NewTimestampBuilder(s.mem, tsNs)
		hb := array.NewStringBuilder(s.mem)
		ub := array.NewFloat64Builder(s.mem)
		sb := array.NewFloat64Builder(s.mem)
		start := base + int64(seg)*int64(time.Minute)
		for i := range n {
			tb.Append(arrow.Timestamp(start + int64(i)*1e5))
			hb.Append(hosts[i%benchSeries])
			ub.Append(float64((seg*n+i)%1000) / 10)
			sum += float64((seg*n+i)%1000) / 10
			sb.Append(float64(i % 77))
		}
		cols := []arrow.Array{tb.NewArray(), hb.NewArray(), ub.NewArray(), sb.NewArray()}
		rec := array.NewRecordBatch(schema, cols, int64(n))
		for _, c := range cols {
			c.Release()
		}
		tb.Release()
		hb.Release()
		ub.Release()
		sb.Release()
		s.write("db", "t", rec)
		return sum
	}
	for i := range files {
		writeSeg(i, per)
		s.roll()
	}
	extra := writeSeg(files, 10_000) // rolls the last file's segment; stays buffered
	s.waitReleased(b, files)

	var paths []string
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			u, err := url.Parse(f.URI)
			if err != nil {
				b.Fatal(err)
			}
			paths = append(paths, quoteLiteral(u.Path))
		}
	}
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
