package output

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// How each column is encoded is chosen once per file, from the first rows
// of its first row group (planSampleRows of them), because pqarrow's
// defaults cost most of an export's CPU on the columns a time series
// result is made of (measured on BenchmarkParquet):
//
//   - A dictionary on a column of mostly distinct values (times, counters,
//     full-precision floats, ids) hashes every value until the dictionary
//     passes its 1 MiB page limit, then is dropped: such columns are
//     written without one. Integers and times are then DELTA_BINARY_PACKED
//     (a time column is about 1 bit a row instead of 8 bytes, and zstd has
//     next to nothing left to do); floats are BYTE_STREAM_SPLIT, whose
//     streams of sign and exponent bytes zstd squeezes where it cannot the
//     interleaved values (BenchmarkParquet/cpu: 15% smaller than PLAIN,
//     for less CPU). pyarrow and DuckDB read both encodings.
//   - Times (timestamps, dates, times of day) are always delta-encoded:
//     even with repeats (many series at each time) the deltas are mostly 0.
//   - A column of repeated values is handed to pqarrow as a dictionary
//     array built here, with a hash table of its own (dictColumn,
//     valueIndex), its indices written as they are (writeDictColumn): for
//     strings (tags), pqarrow would otherwise hash every value through an
//     interface{} (an allocation a value); for floats and 32/64-bit
//     integers, through its slower hash table, taking the statistics of
//     every value.
//
// A column "mostly distinct" has more than half its sampled non-null
// values distinct. Everything else keeps pqarrow's dictionary encoding.
const planSampleRows = 4096

// parquetZstdLevel is zstd's level 1 (klauspost's SpeedFastest): level 3,
// arrow-go's default, took 15% (cpu) to 25% (cli) more CPU on
// BenchmarkParquet for files 0.04% and 3% smaller.
const parquetZstdLevel = 1

// columnPlan is how one column of the file's schema is written.
type columnPlan struct {
	noDict bool // no dictionary: the values are mostly distinct, or times
	// setEnc: enc in place of PLAIN, the encoding of a column without a
	// dictionary (PLAIN is the zero Encoding, so it cannot say so itself).
	setEnc bool
	enc    parquet.Encoding
	dict   *arrow.DictionaryType // non-nil: converted to a dictionary of this type per row group
}

var (
	deltaPlan = columnPlan{noDict: true, setEnc: true, enc: parquet.Encodings.DeltaBinaryPacked}
	floatPlan = columnPlan{noDict: true, setEnc: true, enc: parquet.Encodings.ByteStreamSplit}
)

// planColumns chooses each column's plan from the first rows of recs, the
// file's first row group.
func planColumns(schema *arrow.Schema, recs []arrow.RecordBatch) []columnPlan {
	plans := make([]columnPlan, schema.NumFields())
	for i, f := range schema.Fields() {
		id := f.Type.ID()
		switch {
		case isTimeType(id):
			plans[i] = deltaPlan
		case isIntegerType(id):
			if mostlyDistinct(recs, i) {
				plans[i] = deltaPlan
			} else if id == arrow.INT64 || id == arrow.INT32 {
				plans[i] = columnPlan{dict: dictOf(f.Type)}
			}
		case id == arrow.FLOAT32 || id == arrow.FLOAT64:
			if mostlyDistinct(recs, i) {
				plans[i] = floatPlan
			} else {
				plans[i] = columnPlan{dict: dictOf(f.Type)}
			}
		case dictValueType(f.Type) != nil:
			if mostlyDistinct(recs, i) {
				plans[i] = columnPlan{noDict: true}
			} else {
				plans[i] = columnPlan{dict: dictOf(dictValueType(f.Type))}
			}
		}
	}
	return plans
}

func dictOf(values arrow.DataType) *arrow.DictionaryType {
	return &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: values}
}

func isTimeType(id arrow.Type) bool {
	switch id {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64:
		return true
	}
	return false
}

// isIntegerType: the types Parquet stores as INT32 or INT64, which
// DELTA_BINARY_PACKED encodes (uint64 wraps around, as the format says).
func isIntegerType(id arrow.Type) bool {
	switch id {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// dictValueType is the dictionary value type a column of dt is converted
// to (utf8 or binary: its dictionary is small, so 32-bit offsets do), or
// nil for a type that is not converted.
func dictValueType(dt arrow.DataType) arrow.DataType {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return arrow.BinaryTypes.String
	case arrow.BINARY, arrow.LARGE_BINARY:
		return arrow.BinaryTypes.Binary
	}
	return nil
}

// mostlyDistinct reports whether more than half of the non-null values of
// column col in the first planSampleRows rows of recs are distinct.
func mostlyDistinct(recs []arrow.RecordBatch, col int) bool {
	// The keys of strings share the arrays' memory: the map does not
	// outlive the call.
	seen := make(map[string]struct{}, planSampleRows)
	var key [8]byte
	values := 0
	for _, r := range recs {
		a := r.Column(col)
		str := stringValues(a)
		for i := 0; i < a.Len() && values < planSampleRows; i++ {
			if a.IsNull(i) {
				continue
			}
			values++
			if str != nil {
				seen[str(i)] = struct{}{}
			} else {
				seen[string(fixedValue(a, i, key[:0]))] = struct{}{}
			}
		}
		if values >= planSampleRows {
			break
		}
	}
	return len(seen)*2 > values
}

// stringValues returns the accessor of a utf8 or binary array's values
// (of either offset size) as strings sharing the array's memory, or nil
// for an array of another type.
func stringValues(a arrow.Array) func(int) string {
	switch a := a.(type) {
	case *array.String:
		return a.Value
	case *array.LargeString:
		return a.Value
	case *array.Binary:
		return a.ValueString
	case *array.LargeBinary:
		return a.ValueString
	}
	return nil
}

// fixedValue appends the bits of value i of a numeric array to dst.
func fixedValue(a arrow.Array, i int, dst []byte) []byte {
	var v uint64
	switch a := a.(type) {
	case *array.Int8:
		v = uint64(a.Value(i))
	case *array.Int16:
		v = uint64(a.Value(i))
	case *array.Int32:
		v = uint64(a.Value(i))
	case *array.Int64:
		v = uint64(a.Value(i))
	case *array.Uint8:
		v = uint64(a.Value(i))
	case *array.Uint16:
		v = uint64(a.Value(i))
	case *array.Uint32:
		v = uint64(a.Value(i))
	case *array.Uint64:
		v = a.Value(i)
	case *array.Float32:
		v = uint64(math.Float32bits(a.Value(i)))
	case *array.Float64:
		v = math.Float64bits(a.Value(i))
	}
	for range 8 {
		dst = append(dst, byte(v))
		v >>= 8
	}
	return dst
}

// parquetProps are the properties of the whole file: zstd, statistics,
// dictionary encoding, format 2.6 (so timestamp[ns] stays
// TIMESTAMP(NANOS)), with each column's plan. Row groups are cut by the
// writer itself (parquetRowGroupRows).
func parquetProps(mem memory.Allocator, codec compress.Compression, schema *arrow.Schema, plans []columnPlan) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	opts := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(codec),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(true),
		parquet.WithMaxRowGroupLength(parquetRowGroupRows),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithCreatedBy("apron"),
	}
	if codec == compress.Codecs.Zstd {
		opts = append(opts, parquet.WithCompressionLevel(parquetZstdLevel))
	}
	for i, p := range plans {
		path := parquet.ColumnPath{schema.Field(i).Name}
		if p.noDict {
			opts = append(opts, parquet.WithDictionaryPath(path, false))
		}
		if p.setEnc {
			opts = append(opts, parquet.WithEncodingPath(path, p.enc))
		}
	}
	return parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema())
}
