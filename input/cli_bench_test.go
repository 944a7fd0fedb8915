package input

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/internal/cputime"
)

// cliRows is integration's BenchmarkCLI table (time, two tags, four
// computed floats, a counter) as a record batch of n rows.
func cliRows(n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "region", Type: arrow.BinaryTypes.String},
		{Name: "usage_user", Type: arrow.PrimitiveTypes.Float64},
		{Name: "usage_system", Type: arrow.PrimitiveTypes.Float64},
		{Name: "usage_idle", Type: arrow.PrimitiveTypes.Float64},
		{Name: "load", Type: arrow.PrimitiveTypes.Float64},
		{Name: "requests", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range n {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1000))
		b.Field(1).(*array.StringBuilder).Append("host-" + strconv.Itoa(i%1000))
		b.Field(2).(*array.StringBuilder).Append(regions[i%len(regions)])
		b.Field(3).(*array.Float64Builder).Append(float64(i%100) / 3)
		b.Field(4).(*array.Float64Builder).Append(float64(i%50) / 7)
		b.Field(5).(*array.Float64Builder).Append(float64(i%10) * 1.5)
		b.Field(6).(*array.Float64Builder).Append(float64(i%7) / 2)
		b.Field(7).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// cliCSV is rec as BenchmarkCLI writes its CSV: RFC 3339 times with
// nanoseconds, floats in their shortest form (up to 17 digits).
func cliCSV(rec arrow.RecordBatch) []byte {
	var buf bytes.Buffer
	buf.WriteString("time,host,region,usage_user,usage_system,usage_idle,load,requests\n")
	ts := rec.Column(0).(*array.Timestamp)
	host, region := rec.Column(1).(*array.String), rec.Column(2).(*array.String)
	var line []byte
	for i := range int(rec.NumRows()) {
		line = time.Unix(0, int64(ts.Value(i))).UTC().AppendFormat(line[:0], time.RFC3339Nano)
		line = append(append(append(append(line, ','), host.Value(i)...), ','), region.Value(i)...)
		for c := 3; c < 7; c++ {
			line = strconv.AppendFloat(append(line, ','), rec.Column(c).(*array.Float64).Value(i), 'g', -1, 64)
		}
		line = strconv.AppendInt(append(line, ','), rec.Column(7).(*array.Int64).Value(i), 10)
		buf.Write(append(line, '\n'))
	}
	return buf.Bytes()
}

// cliParquet is rec as BenchmarkCLI writes its Parquet file: pqarrow's
// defaults, zstd, row groups of 1Mi rows.
func cliParquet(b *testing.B, rec arrow.RecordBatch) []byte {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(1<<20))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkCLIFiles reads BenchmarkCLI's CSV and Parquet files (1Mi rows)
// into batches, as `apron write` does before sending them.
func BenchmarkCLIFiles(b *testing.B) {
	const rows = 1 << 20
	rec := cliRows(rows)
	defer rec.Release()
	for _, f := range []struct {
		name   string
		format Format
		data   []byte
	}{
		{"csv", CSV, cliCSV(rec)},
		{"parquet", Parquet, cliParquet(b, rec)},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			cpu0 := cputime.Process()
			for b.Loop() {
				rd, err := Open("bench."+f.name, bytes.NewReader(f.data), int64(len(f.data)), Options{Format: f.format, Table: "cpu"})
				if err != nil {
					b.Fatal(err)
				}
				if n := drain(b, rd); n != rows {
					b.Fatalf("%d rows", n)
				}
			}
			reportRows(b, rows, cpu0)
		})
	}
}
