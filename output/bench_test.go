package output

import (
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/apron-db/apron/internal/cputime"
)

// cpuSchema is the shape of a typical query result: a time, a host and
// the cpu measurement's fields.
func cpuSchema() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.String},
	}
	for _, name := range []string{"usage_user", "usage_system", "usage_idle", "usage_iowait", "usage_irq", "usage_steal"} {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: "count", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	return arrow.NewSchema(fields, nil)
}

// cpuBatches builds n rows of cpuSchema in batches of batchRows, with
// realistic values: a time every 10 s, 100 hosts, percentages with full
// float64 precision, counters.
func cpuBatches(mem memory.Allocator, n, batchRows int) []arrow.RecordBatch {
	schema := cpuSchema()
	rng := rand.New(rand.NewPCG(1, 2))
	hosts := make([]string, 100)
	for i := range hosts {
		hosts[i] = "host-" + strconv.Itoa(i)
	}
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for start := 0; start < n; start += batchRows {
		rows := min(batchRows, n-start)
		ts := b.Field(0).(*array.TimestampBuilder)
		host := b.Field(1).(*array.StringBuilder)
		ts.Reserve(rows)
		host.Reserve(rows)
		for i := start; i < start+rows; i++ {
			ts.UnsafeAppend(arrow.Timestamp(t0.Add(time.Duration(i/100) * 10 * time.Second).UnixNano()))
			host.Append(hosts[i%100])
		}
		for f := 2; f < 8; f++ {
			fb := b.Field(f).(*array.Float64Builder)
			fb.Reserve(rows)
			for range rows {
				fb.UnsafeAppend(rng.Float64() * 100)
			}
		}
		cb := b.Field(8).(*array.Int64Builder)
		cb.Reserve(rows)
		for i := start; i < start+rows; i++ {
			cb.UnsafeAppend(int64(i))
		}
		out = append(out, b.NewRecordBatch())
	}
	return out
}

// BenchmarkWrite writes 1Mi rows of cpuSchema, in batches of 64Ki rows as
// a Flight stream delivers them, to io.Discard, in each format.
func BenchmarkWrite(b *testing.B) {
	const rows = 1 << 20
	recs := cpuBatches(memory.DefaultAllocator, rows, 64<<10)
	defer releaseAll(recs)
	for _, f := range Formats {
		b.Run(string(f), func(b *testing.B) {
			var bytes countWriter
			cpu0 := cputime.Process()
			for b.Loop() {
				bytes = 0
				w, err := New(f, &bytes, cpuSchema(), Options{Width: 120})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
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

// reportRows reports rows/s (wall clock) and cpu-ns/row, the process's CPU
// time per row over all cores: on a shared machine the wall clock says more
// about the neighbours than about the code, while CPU time per row stays
// put. ns/op is dropped: an op is the whole result.
func reportRows(b *testing.B, rows int, cpu0 time.Duration) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(rows*b.N), "cpu-ns/row")
	b.ReportMetric(0, "ns/op")
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)

// BenchmarkParquetCodec is the measurement behind parquetCodec.
func BenchmarkParquetCodec(b *testing.B) {
	const rows = 1 << 20
	recs := cpuBatches(memory.DefaultAllocator, rows, 64<<10)
	defer releaseAll(recs)
	for _, codec := range []compress.Compression{compress.Codecs.Zstd, compress.Codecs.Snappy} {
		b.Run(codec.String(), func(b *testing.B) {
			var bytes countWriter
			cpu0 := cputime.Process()
			for b.Loop() {
				bytes = 0
				w, err := newParquetWriterCodec(&bytes, cpuSchema(), Options{Mem: memory.DefaultAllocator}, codec)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
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
