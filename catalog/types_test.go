package catalog

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestLogicalType(t *testing.T) {
	dict := func(idx, val arrow.DataType) arrow.DataType {
		return &arrow.DictionaryType{IndexType: idx, ValueType: val}
	}
	paris := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}
	cases := []struct {
		name string
		in   arrow.DataType
		want arrow.DataType // nil: unsupported
	}{
		{"int8", arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int8},
		{"int16", arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int16},
		{"int32", arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32},
		{"int64", arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64},
		{"uint8", arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint8},
		{"uint16", arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint16},
		{"uint32", arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint32},
		{"uint64", arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Uint64},
		{"float32", arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float32},
		{"float64", arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float64},
		{"bool", arrow.FixedWidthTypes.Boolean, arrow.FixedWidthTypes.Boolean},
		{"utf8", arrow.BinaryTypes.String, arrow.BinaryTypes.String},
		{"large_utf8", arrow.BinaryTypes.LargeString, arrow.BinaryTypes.String},
		{"dictionary_int8_utf8", dict(arrow.PrimitiveTypes.Int8, arrow.BinaryTypes.String), arrow.BinaryTypes.String},
		{"dictionary_uint64_large_utf8", dict(arrow.PrimitiveTypes.Uint64, arrow.BinaryTypes.LargeString), arrow.BinaryTypes.String},
		{"binary", arrow.BinaryTypes.Binary, arrow.BinaryTypes.Binary},
		{"large_binary", arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.Binary},
		{"timestamp_ns", tsNs, tsNs},
		{"timestamp_us_paris", paris, paris},
		{"date32", arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date32},
		{"date64", arrow.FixedWidthTypes.Date64, arrow.FixedWidthTypes.Date64},

		{"nil", nil, nil},
		{"null", arrow.Null, nil},
		{"float16", arrow.FixedWidthTypes.Float16, nil},
		{"decimal128", &arrow.Decimal128Type{Precision: 5, Scale: 1}, nil},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int64), nil},
		{"struct", arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}), nil},
		{"map", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), nil},
		{"interval", arrow.FixedWidthTypes.DayTimeInterval, nil},
		{"duration", arrow.FixedWidthTypes.Duration_s, nil},
		{"time32", arrow.FixedWidthTypes.Time32s, nil},
		{"time64", arrow.FixedWidthTypes.Time64us, nil},
		{"fixed_size_binary", &arrow.FixedSizeBinaryType{ByteWidth: 16}, nil},
		{"string_view", arrow.BinaryTypes.StringView, nil},
		{"dictionary_float_index", dict(arrow.PrimitiveTypes.Float32, arrow.BinaryTypes.String), nil},
		{"dictionary_int_values", dict(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LogicalType(tc.in)
			if ok != (tc.want != nil) {
				t.Fatalf("LogicalType(%v) ok = %v, want %v", tc.in, ok, tc.want != nil)
			}
			if ok && !arrow.TypeEqual(got, tc.want) {
				t.Fatalf("LogicalType(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestQuoteNameTruncates(t *testing.T) {
	long := string(make([]byte, 1000))
	if got := quoteName(long); len(got) > 300 {
		t.Fatalf("quoteName of 1000 bytes gave %d bytes", len(got))
	}
	if got := quoteName("cpu"); got != `"cpu"` {
		t.Fatalf("quoteName(cpu) = %s", got)
	}
}

func TestLimits(t *testing.T) {
	if d := DefaultLimits(); d != (Limits{MaxDatabases: 100, MaxTables: 4000, MaxColumnsPerTable: 500}) {
		t.Fatalf("DefaultLimits = %+v", d)
	}
	if got := New(Limits{MaxTables: 7}).Limits(); got != (Limits{MaxDatabases: 100, MaxTables: 7, MaxColumnsPerTable: 500}) {
		t.Fatalf("zero fields not defaulted: %+v", got)
	}
	if err := (Limits{MaxColumnsPerTable: -1}).Validate(); err == nil {
		t.Fatal("negative limit accepted")
	} else if want := "--max-columns-per-table"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}
