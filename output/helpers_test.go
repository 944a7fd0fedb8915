package output

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Golden files are rewritten with APRON_UPDATE_GOLDEN=1 (or -update).
var update = flag.Bool("update", os.Getenv("APRON_UPDATE_GOLDEN") == "1", "rewrite testdata/*.golden")

// checkGolden compares got with testdata/name, or rewrites it.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (APRON_UPDATE_GOLDEN=1 writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (APRON_UPDATE_GOLDEN=1 rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// checkedMem returns an allocator that fails the test if anything it
// allocated is still held when the test ends.
func checkedMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// t0 is 2026-01-05 12:00:00 UTC, the time of the first test row.
var t0 = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

// allTypesSchema has a column of every type the server returns, and a few
// more (map, fixed-size binary, float16 is left to its own test).
func allTypesSchema() *arrow.Schema {
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	structType := arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	f := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		f("host", arrow.BinaryTypes.String),
		f("i8", arrow.PrimitiveTypes.Int8),
		f("i16", arrow.PrimitiveTypes.Int16),
		f("i32", arrow.PrimitiveTypes.Int32),
		f("i64", arrow.PrimitiveTypes.Int64),
		f("u8", arrow.PrimitiveTypes.Uint8),
		f("u16", arrow.PrimitiveTypes.Uint16),
		f("u32", arrow.PrimitiveTypes.Uint32),
		f("u64", arrow.PrimitiveTypes.Uint64),
		f("f32", arrow.PrimitiveTypes.Float32),
		f("f64", arrow.PrimitiveTypes.Float64),
		f("ok", arrow.FixedWidthTypes.Boolean),
		f("large", arrow.BinaryTypes.LargeString),
		f("view", arrow.BinaryTypes.StringView),
		f("bin", arrow.BinaryTypes.Binary),
		f("lbin", arrow.BinaryTypes.LargeBinary),
		f("bview", arrow.BinaryTypes.BinaryView),
		f("fsb", &arrow.FixedSizeBinaryType{ByteWidth: 2}),
		f("ts_s", &arrow.TimestampType{Unit: arrow.Second}),
		f("ts_ms_utc", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}),
		f("ts_us_ny", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}),
		f("d32", arrow.FixedWidthTypes.Date32),
		f("d64", arrow.FixedWidthTypes.Date64),
		f("t32", arrow.FixedWidthTypes.Time32ms),
		f("t64", arrow.FixedWidthTypes.Time64ns),
		f("dec", &arrow.Decimal128Type{Precision: 10, Scale: 3}),
		f("dur", arrow.FixedWidthTypes.Duration_ms),
		f("iv", arrow.FixedWidthTypes.MonthDayNanoInterval),
		f("dict", dictType),
		f("list", arrow.ListOf(arrow.PrimitiveTypes.Int64)),
		f("st", structType),
		f("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)),
	}, nil)
}

// row is one test row: a value per column of allTypesSchema, nil = NULL.
type row []any

// allTypesRows are the test rows: typical values, nulls, extremes and
// hostile text, a batch of three and a batch of two.
func allTypesRows() [][]row {
	ts := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	nl := "line1\nline2\x1b[31mred\x1b]0;title\a\t\u202eevil\u0085end"
	long := strings.Repeat("0123456789", 8) + "-the-end"
	return [][]row{{
		{ts(0), "h1", int8(1), int16(2), int32(3), int64(4), uint8(5), uint16(6), uint32(7), uint64(8),
			float32(1.5), 0.1, true, "large", "view", []byte("bin"), []byte{0, 1, 0xff}, []byte("bv\\"), []byte("ab"),
			int64(1767614400), int64(1767614400123), int64(1767614400123456), int32(20458), int64(1767571200000),
			int32(43200123), int64(43200123456789), "1234.567", int64(90061001),
			arrow.MonthDayNanoInterval{Months: 14, Days: 3, Nanoseconds: 4*3600e9 + 5*60e9 + 6e9 + 789e6},
			"east", []any{int64(1), nil, int64(3)}, []any{int64(7), "x,\"y\""}, [][2]any{{"k1", int64(1)}, {"k2", nil}}},
		{ts(time.Second + 100*time.Millisecond), nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil},
		{ts(2*time.Second + 123456789), nl, int8(-128), int16(-32768), int32(-2147483648), int64(-9223372036854775808),
			uint8(255), uint16(65535), uint32(4294967295), uint64(18446744073709551615),
			float32(3.4028235e38), math.Copysign(0, -1), false, "", "", []byte{}, []byte{}, []byte{}, []byte{0x1b, 0x0a},
			int64(-1), int64(-1), int64(-1), int32(-719528), int64(-86400000),
			int32(0), int64(86399999999999), "-0.001", int64(-1500),
			arrow.MonthDayNanoInterval{Months: -1, Days: 0, Nanoseconds: -1},
			"west", []any{}, []any{nil, nil}, [][2]any{}},
	}, {
		{ts(3*time.Second + 120*time.Microsecond), "日本語のホスト名🚀", int8(0), int16(0), int32(0), int64(0),
			uint8(0), uint16(0), uint32(0), uint64(0),
			float32(0), 1e21, true, "naïve café", "ümlaut", []byte("x"), []byte("y"), []byte("z"), []byte("zz"),
			int64(253402300800), int64(0), int64(0), int32(2932897), int64(0),
			int32(86399999), int64(1), "0.000", int64(0),
			arrow.MonthDayNanoInterval{},
			"east", []any{int64(42)}, []any{nil, "日本"}, [][2]any{{"", int64(0)}}},
		{ts(4*time.Second + 500*time.Millisecond), long, int8(127), int16(32767), int32(2147483647), int64(9223372036854775807),
			uint8(1), uint16(1), uint32(1), uint64(1),
			float32(-2.5), 1e-7, false, long, long, []byte(long), []byte("l"), []byte("v"), []byte("\x00\x00"),
			int64(0), int64(1767614400999), int64(1767614400000001), int32(0), int64(86400000),
			int32(1), int64(999), "9999999.999", int64(86400000*2 + 1),
			arrow.MonthDayNanoInterval{Months: 12, Days: 1},
			"west", []any{int64(-1), int64(-2)}, []any{int64(-7), long}, [][2]any{{"k", int64(-1)}}},
	}}
}

// buildBatches builds record batches of schema from rows.
func buildBatches(t testing.TB, mem memory.Allocator, schema *arrow.Schema, batches [][]row) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	for _, rows := range batches {
		b := array.NewRecordBuilder(mem, schema)
		for _, r := range rows {
			if len(r) != schema.NumFields() {
				t.Fatalf("row has %d values, schema %d", len(r), schema.NumFields())
			}
			for i, v := range r {
				appendAny(t, b.Field(i), v)
			}
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// appendAny appends v (nil = null) to b, in the Go type the tests use for
// b's Arrow type.
func appendAny(t testing.TB, b array.Builder, v any) {
	t.Helper()
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(v.(int8))
	case *array.Int16Builder:
		b.Append(v.(int16))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Uint8Builder:
		b.Append(v.(uint8))
	case *array.Uint16Builder:
		b.Append(v.(uint16))
	case *array.Uint32Builder:
		b.Append(v.(uint32))
	case *array.Uint64Builder:
		b.Append(v.(uint64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *array.StringViewBuilder:
		b.Append(v.(string))
	case *array.BinaryViewBuilder:
		b.Append(v.([]byte))
	case *array.BinaryBuilder: // binary and large binary
		b.Append(v.([]byte))
	case *array.FixedSizeBinaryBuilder:
		b.Append(v.([]byte))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(int64)))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(int32)))
	case *array.Date64Builder:
		b.Append(arrow.Date64(v.(int64)))
	case *array.Time32Builder:
		b.Append(arrow.Time32(v.(int32)))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v.(int64)))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(v.(int64)))
	case *array.Decimal128Builder:
		typ := b.Type().(*arrow.Decimal128Type)
		n, err := decimal128.FromString(v.(string), typ.Precision, typ.Scale)
		if err != nil {
			t.Fatal(err)
		}
		b.Append(n)
	case *array.MonthDayNanoIntervalBuilder:
		b.Append(v.(arrow.MonthDayNanoInterval))
	case *array.BinaryDictionaryBuilder:
		if err := b.AppendString(v.(string)); err != nil {
			t.Fatal(err)
		}
	case *array.MapBuilder:
		b.Append(true)
		for _, kv := range v.([][2]any) {
			appendAny(t, b.KeyBuilder(), kv[0])
			appendAny(t, b.ItemBuilder(), kv[1])
		}
	case *array.ListBuilder:
		b.Append(true)
		for _, e := range v.([]any) {
			appendAny(t, b.ValueBuilder(), e)
		}
	case *array.StructBuilder:
		b.Append(true)
		for i, e := range v.([]any) {
			appendAny(t, b.FieldBuilder(i), e)
		}
	default:
		t.Fatalf("appendAny: no case for %T", b)
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct {
	n int
}

var errDiskFull = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.n {
		f.n -= len(p)
		return len(p), nil
	}
	n := f.n
	f.n = 0
	return n, errDiskFull
}

// writeAll writes recs with a new writer of format f and returns the output.
func writeAll(t *testing.T, f Format, schema *arrow.Schema, recs []arrow.RecordBatch, opts Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := New(f, &buf, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		rows += r.NumRows()
	}
	if got := w.Rows(); got != rows {
		t.Errorf("Rows() = %d, want %d", got, rows)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
