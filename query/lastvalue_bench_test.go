//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apron-db/apron/objstore"
)

// BenchmarkLastValue: the last row per series (arg_max per host of every
// column, GROUP BY host) over APRON_BENCH_ROWS buffered rows (default
// 2M) of 1,000 and of 100,000 series, answered from the table's
// last-value cache ("cache") and, in the same run over the same rows,
// by DuckDB over the whole table ("table": the same query as a
// subquery, which the cache does not answer) and over the chunks of the
// same rows in a table without a cache that the latest row per key
// leaves it ("latest": latest.go). Run with -count to interleave.
func BenchmarkLastValue(b *testing.B) {
	const sql = "SELECT host, arg_max(usage, time), arg_max(idle, time), max(time) FROM db.cpu GROUP BY host"
	for _, series := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("series=%d", series), func(b *testing.B) {
			n := benchRows(b)
			v := newEnv(b, Config{})
			lastValueBenchRows(b, v, "cpu", n, series)
			lastValueBenchRows(b, v, "nocache", n, series)
			if err := v.exec("CREATE LAST VALUE CACHE ON db.cpu"); err != nil {
				b.Fatal(err)
			}
			v.waitReady("db", "cpu")
			for _, side := range []string{"cache", "table", "latest"} {
				b.Run(side, func(b *testing.B) {
					q := sql
					switch side {
					case "table":
						q = lvOracle(sql)
					case "latest":
						q = strings.Replace(sql, "db.cpu", "db.nocache", 1)
					}
					uses := v.e.Stats().LastValueUses
					for b.Loop() {
						r, err := v.e.Query(context.Background(), q, "")
						rows, _ := drain(b, r, err)
						if rows != int64(series) {
							b.Fatalf("%d rows, want %d", rows, series)
						}
					}
					if used := v.e.Stats().LastValueUses > uses; used != (side == "cache") {
						b.Fatalf("%s: cache used %v", side, used)
					}
				})
			}
		})
	}
}

// BenchmarkLatestPersisted: BenchmarkLastValue's query over a table
// without a cache whose APRON_BENCH_ROWS rows (default 2M) of 1,000 and
// of 100,000 series are persisted whole, nothing buffered (the latest
// row per key of latest_direct.go, from the files' latest rows): "first"
// is a first query, which reads the file for its latest rows
// (latest_file_rows.go), "next" a later one, and "duckdb" the same query
// as a subquery, which DuckDB answers over the file. Run with -count to
// interleave.
func BenchmarkLatestPersisted(b *testing.B) {
	const sql = "SELECT host, arg_max(usage, time), arg_max(idle, time), max(time) FROM db.cpu GROUP BY host"
	for _, series := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("series=%d", series), func(b *testing.B) {
			s := newStoreEnv(b, objstore.NewMemory(), Config{})
			lastValueBenchRows(b, s.env, "cpu", benchRows(b), series)
			s.roll()
			s.waitReleased(b, 1)
			for _, side := range []string{"first", "next", "duckdb"} {
				b.Run(side, func(b *testing.B) {
					q := sql
					if side == "duckdb" {
						q = lvOracle(sql)
					}
					direct := s.e.Stats().DirectScans
					for b.Loop() {
						if side == "first" {
							s.e.fileRows = newLRU[fileKeysKey, *fileRows](defaultFileRowsBytes)
						}
						r, err := s.e.Query(context.Background(), q, "")
						rows, _ := drain(b, r, err)
						if rows != int64(series) {
							b.Fatalf("%d rows, want %d", rows, series)
						}
					}
					if got := s.e.Stats().DirectScans > direct; got != (side != "duckdb") {
						b.Fatalf("%s: answered without DuckDB: %v", side, got)
					}
				})
			}
		})
	}
}

// lastValueBenchRows writes n rows of db.table (time, host of series,
// usage, idle), 1 ms apart, in 100k-row batches.
func lastValueBenchRows(b *testing.B, v *env, table string, n, series int) {
	names := make([]string, series)
	for i := range names {
		names[i] = fmt.Sprintf("host-%06d", i)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "idle", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	for off := 0; off < n; off += 100_000 {
		m := min(100_000, n-off)
		rb := array.NewRecordBuilder(v.mem, schema)
		for i := off; i < off+m; i++ {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1e6))
			rb.Field(1).(*array.StringBuilder).Append(names[i%series])
			rb.Field(2).(*array.Float64Builder).Append(float64(i%1000) / 10)
			rb.Field(3).(*array.Int64Builder).Append(int64(i % 777))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		v.write("db", table, rec)
	}
}

// BenchmarkLatestTwoTags: the latest row per (host, region) over
// APRON_BENCH_ROWS buffered rows (default 2M) of 200 hosts, each in one
// of 5 regions (as the peer benchmark's table), without a cache: each
// query pruned (latest_multi.go) and, in the same run, as a subquery,
// which is not ("duckdb"). "pairs" and "region" (the latest row per
// host of one region) are picked without DuckDB
// (latest_multi_direct.go); "ordered" (ORDER BY max(time)) is answered
// by DuckDB over the chunks kept.
func BenchmarkLatestTwoTags(b *testing.B) {
	n := benchRows(b)
	v := newEnv(b, Config{})
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	for off := 0; off < n; off += 100_000 {
		rb := array.NewRecordBuilder(v.mem, schema)
		for i := off; i < min(n, off+100_000); i++ {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1e6))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host-%d", i%200))
			rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("region-%d", i%200%5))
			rb.Field(3).(*array.Float64Builder).Append(float64(i % 1000))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		v.write("db", "cpu", rec)
	}
	for _, c := range []struct {
		name, sql string
		rows      int64
	}{
		{"pairs", "SELECT host, region, arg_max(usage, time), max(time) FROM db.cpu GROUP BY host, region", 200},
		{"ordered", "SELECT host, region, arg_max(usage, time), max(time) AS t FROM db.cpu GROUP BY host, region ORDER BY t", 200},
		{"region", "SELECT host, arg_max(usage, time), max(time) FROM db.cpu WHERE region = 'region-1' GROUP BY host", 40},
	} {
		for _, side := range []string{"pruned", "duckdb"} {
			b.Run(c.name+"/"+side, func(b *testing.B) {
				q := c.sql
				if side == "duckdb" {
					q = lvOracle(q)
				}
				before := v.e.Stats().LatestChunks
				for b.Loop() {
					r, err := v.e.Query(context.Background(), q, "")
					if rows, _ := drain(b, r, err); rows != c.rows {
						b.Fatalf("%d rows, want %d", rows, c.rows)
					}
				}
				if pruned := v.e.Stats().LatestChunks > before; pruned != (side == "pruned") {
					b.Fatalf("%s: chunks left out: %v", side, pruned)
				}
			})
		}
	}
}
