package integration

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// BenchmarkCLI compares the apron CLI with the raw protocol on the same
// rows (benchSchema, 8 columns), in the same run, as issue 12 asks:
//
//   - write: `apron write` of a CSV and of a Parquet file of the rows
//     against the bulk ingest of the same rows as prebuilt Arrow batches
//     (BenchmarkBulkIngest's client); targets Parquet ≥ 0.8, CSV ≥ 0.5
//     of it;
//   - query: `apron query --format parquet` of every row to a file
//     against a Flight SQL DoGet that reads the batches and drops them;
//     target ≥ 0.8.
//
// APRON_BENCH_CLI_ROWS sets the rows (default 10M: a ~1 GB CSV).
//
//	go test -tags duckdb_arrow -run '^$' -bench BenchmarkCLI -benchtime 1x ./integration/
func BenchmarkCLI(b *testing.B) {
	rows := 10_000_000
	if v := os.Getenv("APRON_BENCH_CLI_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	const batchRows = 65536
	mem := memory.DefaultAllocator
	var recs []arrow.RecordBatch
	for start := 0; start < rows; start += batchRows {
		recs = append(recs, benchBatch(mem, start, min(batchRows, rows-start)))
	}
	defer release(recs...)
	dir := b.TempDir()
	csvPath, pqPath := filepath.Join(dir, "cpu.csv"), filepath.Join(dir, "cpu.parquet")
	writeBenchCSV(b, csvPath, recs)
	writeBenchParquet(b, pqPath, recs)
	csvSize, pqSize := fileSize(b, csvPath), fileSize(b, pqPath)
	b.Logf("%d rows: CSV %.0f MB, Parquet %.0f MB", rows, float64(csvSize)/1e6, float64(pqSize)/1e6)

	s := startServer(b, b.TempDir(), benchServerArgs("--buffer-mem-limit", "16GiB")...)
	rate := func(b *testing.B, start time.Time, n int) {
		secs := time.Since(start).Seconds()
		b.ReportMetric(float64(n)/secs, "rows/s")
		b.ReportMetric(secs, "s")
	}
	table := 0
	next := func() string { table++; return "t" + strconv.Itoa(table) }

	b.Run("write/raw-ingest", func(b *testing.B) {
		c := sqlClient(b, s.Addr, nil)
		defer c.Close()
		for range b.N {
			start := time.Now()
			n, err := sqlIngest(context.Background(), c, "bench", next(), recs...)
			if err != nil || n != int64(rows) {
				b.Fatalf("ingest: %d rows, %v", n, err)
			}
			rate(b, start, rows)
		}
	})
	for _, in := range []struct{ name, path string }{{"write/cli-parquet", pqPath}, {"write/cli-csv", csvPath}} {
		b.Run(in.name, func(b *testing.B) {
			for range b.N {
				start := time.Now()
				mustApron(b, "", "write", "--host", s.Addr, "--db", "bench", "--table", next(), "--progress", "none", in.path)
				rate(b, start, rows)
			}
		})
	}
	b.Run("query/raw-doget", func(b *testing.B) {
		c := sqlClient(b, s.Addr, nil)
		defer c.Close()
		for range b.N {
			start := time.Now()
			ctx := context.Background()
			info, err := c.Execute(ctx, "SELECT * FROM bench.t1")
			if err != nil {
				b.Fatal(err)
			}
			var n int64
			for _, ep := range info.Endpoint {
				rdr, err := c.DoGet(ctx, ep.Ticket)
				if err != nil {
					b.Fatal(err)
				}
				for rdr.Next() {
					n += rdr.RecordBatch().NumRows()
				}
				rdr.Release()
			}
			if n != int64(rows) {
				b.Fatalf("read %d rows, want %d", n, rows)
			}
			rate(b, start, rows)
		}
	})
	b.Run("query/cli-parquet", func(b *testing.B) {
		out := filepath.Join(b.TempDir(), "out.parquet")
		for range b.N {
			start := time.Now()
			mustApron(b, "", "query", "--host", s.Addr, "--format", "parquet", "--output", out, "SELECT * FROM bench.t1")
			rate(b, start, rows)
		}
	})
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// writeBenchCSV writes recs as CSV with a header, times in RFC 3339.
func writeBenchCSV(b *testing.B, path string, recs []arrow.RecordBatch) {
	fh, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	w.WriteString("time,host,region,usage_user,usage_system,usage_idle,load,requests\n")
	var line []byte
	for _, r := range recs {
		ts := r.Column(0).(*array.Timestamp)
		host, region := r.Column(1).(*array.String), r.Column(2).(*array.String)
		for i := range int(r.NumRows()) {
			line = line[:0]
			line = time.Unix(0, int64(ts.Value(i))).UTC().AppendFormat(line, time.RFC3339Nano)
			line = append(line, ',')
			line = append(line, host.Value(i)...)
			line = append(line, ',')
			line = append(line, region.Value(i)...)
			for c := 3; c < 7; c++ {
				line = append(line, ',')
				line = strconv.AppendFloat(line, r.Column(c).(*array.Float64).Value(i), 'g', -1, 64)
			}
			line = append(line, ',')
			line = strconv.AppendInt(line, r.Column(7).(*array.Int64).Value(i), 10)
			line = append(line, '\n')
			w.Write(line)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fh.Close()
}

// writeBenchParquet writes recs as Parquet, zstd, row groups of 1M rows.
func writeBenchParquet(b *testing.B, path string, recs []arrow.RecordBatch) {
	fh, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(1<<20))
	w, err := pqarrow.NewFileWriter(benchSchema, fh, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteBuffered(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
