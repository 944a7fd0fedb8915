package output

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/internal/cputime"
)

// cliSchema is the table of integration's BenchmarkCLI: time, two tags,
// four float fields and a counter.
func cliSchema() *arrow.Schema {
	f := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	return arrow.NewSchema([]arrow.Field{
		f("time", &arrow.TimestampType{Unit: arrow.Nanosecond}),
		f("host", arrow.BinaryTypes.String),
		f("region", arrow.BinaryTypes.String),
		f("usage_user", arrow.PrimitiveTypes.Float64),
		f("usage_system", arrow.PrimitiveTypes.Float64),
		f("usage_idle", arrow.PrimitiveTypes.Float64),
		f("load", arrow.PrimitiveTypes.Float64),
		f("requests", arrow.PrimitiveTypes.Int64),
	}, nil)
}

// cliBatches are n rows of BenchmarkCLI's table in batches of batchRows:
// a time every µs, 1000 hosts and 5 regions in turn, fields of few
// distinct values, a counter.
func cliBatches(mem memory.Allocator, n, batchRows int) []arrow.RecordBatch {
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	b := array.NewRecordBuilder(mem, cliSchema())
	defer b.Release()
	var out []arrow.RecordBatch
	for start := 0; start < n; start += batchRows {
		for i := start; i < min(n, start+batchRows); i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1000))
			b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(i%1000))
			b.Field(2).(*array.StringBuilder).Append(regions[i%len(regions)])
			b.Field(3).(*array.Float64Builder).Append(float64(i%100) / 3)
			b.Field(4).(*array.Float64Builder).Append(float64(i%50) / 7)
			b.Field(5).(*array.Float64Builder).Append(float64(i%10) * 1.5)
			b.Field(6).(*array.Float64Builder).Append(float64(i%7) / 2)
			b.Field(7).(*array.Int64Builder).Append(int64(i))
		}
		out = append(out, b.NewRecordBatch())
	}
	return out
}

// BenchmarkParquet writes 1Mi rows as Parquet to a counter: "cpu" is
// BenchmarkWrite's (random full-precision floats, 64Ki-row batches: the
// worst case for dictionaries and codecs), "cli" BenchmarkCLI's table in
// the ~8Ki-row batches of the server's ~2 MiB Flight messages.
func BenchmarkParquet(b *testing.B) {
	const rows = 1 << 20
	mem := memory.DefaultAllocator
	cpu, cli := cpuBatches(mem, rows, 64<<10), cliBatches(mem, rows, 8<<10)
	defer releaseAll(cpu)
	defer releaseAll(cli)
	for _, data := range []struct {
		name   string
		schema *arrow.Schema
		recs   []arrow.RecordBatch
	}{
		{"cpu", cpuSchema(), cpu},
		{"cli", cliSchema(), cli},
	} {
		b.Run(data.name, func(b *testing.B) {
			var bytes countWriter
			cpu0 := cputime.Process()
			for b.Loop() {
				bytes = 0
				w, err := New(Parquet, &bytes, data.schema, Options{Mem: mem})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range data.recs {
					if err := w.Write(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, rows, cpu0)
			b.ReportMetric(float64(bytes)/rows, "B/row")
		})
	}
}
