package input

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/internal/cputime"
)

const benchRows = 200_000

// drain reads every batch of rd and returns the row count.
func drain(b *testing.B, rd Reader) int64 {
	var n int64
	for {
		bt, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n += bt.Record.NumRows()
		bt.Record.Release()
	}
	if err := rd.Close(); err != nil {
		b.Fatal(err)
	}
	return n
}

// reportRows reports rows/s (wall clock) and cpu-ns/row, the process's CPU
// time per row: on a shared machine the wall clock says more about the
// neighbours than about the code, while CPU time per row (over all cores)
// stays put; 1e9 / cpu-ns/row is the rows/s of one free core.
func reportRows(b *testing.B, rows int64, cpu0 time.Duration) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(rows*int64(b.N)), "cpu-ns/row")
}

// BenchmarkCSV reads a CPU-like CSV (time, host of 200 values, region, six
// float64 columns, an int64 column) with this package and, for
// comparison, with arrow-go's arrow/csv reader given the same schema.
func BenchmarkCSV(b *testing.B) {
	for _, epoch := range []bool{false, true} {
		data := genCPU(benchRows, epoch)
		tname := "rfc3339"
		if epoch {
			tname = "epoch_ns"
		}
		b.Run("input/"+tname, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				rd, err := Open("bench.csv", bytes.NewReader(data), int64(len(data)), Options{Format: CSV, Table: "cpu"})
				if err != nil {
					b.Fatal(err)
				}
				if n := drain(b, rd); n != benchRows {
					b.Fatalf("%d rows", n)
				}
			}
			reportRows(b, benchRows, cpu0)
		})
		b.Run("arrowcsv/"+tname, func(b *testing.B) {
			timeType := arrow.DataType(timestampType)
			if epoch {
				timeType = arrow.PrimitiveTypes.Int64
			}
			fields := []arrow.Field{{Name: "time", Type: timeType}, {Name: "host", Type: arrow.BinaryTypes.String}, {Name: "region", Type: arrow.BinaryTypes.String}}
			for i := range 6 {
				fields = append(fields, arrow.Field{Name: "f" + strconv.Itoa(i), Type: arrow.PrimitiveTypes.Float64, Nullable: true})
			}
			fields = append(fields, arrow.Field{Name: "procs", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
			schema := arrow.NewSchema(fields, nil)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				r := csv.NewReader(bytes.NewReader(data), schema, csv.WithHeader(true), csv.WithChunk(DefaultBatchRows), csv.WithAllocator(memory.DefaultAllocator))
				var n int64
				for r.Next() {
					n += r.RecordBatch().NumRows()
				}
				if r.Err() != nil {
					b.Fatal(r.Err())
				}
				r.Release()
				if n != benchRows {
					b.Fatalf("%d rows", n)
				}
			}
			reportRows(b, benchRows, cpu0)
		})
	}
}

func genJSONL(rows int) []byte {
	var b bytes.Buffer
	for i := range rows {
		fmt.Fprintf(&b, `{"time":%d,"host":"host_%d","region":"us-east-1","usage_user":%d.%02d,"usage_system":%d.5,"procs":%d}`+"\n",
			int64(1700000000+i)*1e9, i%200, i%100, i%97, i%50, i%5000)
	}
	return b.Bytes()
}

func BenchmarkJSONL(b *testing.B) {
	data := genJSONL(benchRows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		rd, err := Open("bench.jsonl", bytes.NewReader(data), int64(len(data)), Options{Format: JSONL, Table: "cpu"})
		if err != nil {
			b.Fatal(err)
		}
		if n := drain(b, rd); n != benchRows {
			b.Fatalf("%d rows", n)
		}
	}
	reportRows(b, benchRows, cpu0)
}

func genLP(rows int) []byte {
	var b bytes.Buffer
	for i := range rows {
		fmt.Fprintf(&b, "cpu,host=host_%d,region=us-east-1 usage_user=%d.%02d,usage_system=%d.5,procs=%di %d\n",
			i%200, i%100, i%97, i%50, i%5000, int64(1700000000+i)*1e9)
	}
	return b.Bytes()
}

func BenchmarkLineProtocol(b *testing.B) {
	data := genLP(benchRows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		rd, err := Open("bench.lp", bytes.NewReader(data), int64(len(data)), Options{Format: LineProtocol})
		if err != nil {
			b.Fatal(err)
		}
		if n := drain(b, rd); n != benchRows {
			b.Fatalf("%d rows", n)
		}
	}
	reportRows(b, benchRows, cpu0)
}
