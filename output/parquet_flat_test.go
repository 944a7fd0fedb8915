package output

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// flatSchemaOf is schema without its nested columns: what the flat
// encoder (parallel columns, dictionaries built here) writes.
func flatSchemaOf(schema *arrow.Schema) (*arrow.Schema, []int) {
	var fields []arrow.Field
	var idx []int
	for i, f := range schema.Fields() {
		if flatSchema(arrow.NewSchema([]arrow.Field{f}, nil)) {
			fields = append(fields, f)
			idx = append(idx, i)
		}
	}
	return arrow.NewSchema(fields, nil), idx
}

func project(recs []arrow.RecordBatch, schema *arrow.Schema, idx []int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for _, r := range recs {
		cols := make([]arrow.Array, len(idx))
		for i, c := range idx {
			cols[i] = r.Column(c)
		}
		out = append(out, array.NewRecordBatch(schema, cols, r.NumRows()))
	}
	return out
}

// TestParquetFlatRoundTrip: the columns of every type, without the nested
// ones (so the flat encoder writes them), read back as written, the file
// schema the same as the nested path's.
func TestParquetFlatRoundTrip(t *testing.T) {
	mem := checkedMem(t)
	all := allTypesSchema()
	recsAll := buildBatches(t, mem, all, allTypesRows())
	defer releaseAll(recsAll)
	sch, idx := flatSchemaOf(all)
	if len(idx) >= all.NumFields() || !flatSchema(sch) {
		t.Fatalf("flat projection has %d of %d columns", len(idx), all.NumFields())
	}
	recs := project(recsAll, sch, idx)
	defer releaseAll(recs)
	out := writeAll(t, Parquet, sch, recs, Options{Mem: mem})
	tbl := readParquet(t, out)
	defer tbl.Release()
	full := readParquet(t, writeAll(t, Parquet, all, recsAll, Options{Mem: mem}))
	defer full.Release()
	for i, f := range sch.Fields() {
		sameValues(t, f.Name, column0(recs, i), tbl.Column(i).Data())
		if got, want := tbl.Schema().Field(i).Type, full.Schema().Field(idx[i]).Type; !arrow.TypeEqual(got, want) {
			t.Errorf("%s reads back as %s, %s from the nested path", f.Name, got, want)
		}
	}
}

// planRows are n rows of each kind of column the plan tells apart, in
// batches of uneven sizes: times, unique and repeated integers, random
// and repeated floats, strings repeated (with nulls) and unique, a
// string column whose dictionary outgrows maxDictBytes after the sampled
// rows, and an all-null column; nested adds a list column, for pqarrow's
// FileWriter to write them all.
func planRows(t *testing.T, mem memory.Allocator, n int, nested bool) (*arrow.Schema, []arrow.RecordBatch) {
	f := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	fields := []arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		f("host", arrow.BinaryTypes.String),
		f("id", arrow.BinaryTypes.LargeString),
		f("grows", arrow.BinaryTypes.Binary),
		f("seq", arrow.PrimitiveTypes.Int64),
		f("code", arrow.PrimitiveTypes.Int32),
		f("u", arrow.PrimitiveTypes.Uint64),
		f("rnd", arrow.PrimitiveTypes.Float64),
		f("lvl", arrow.PrimitiveTypes.Float32),
		f("none", arrow.PrimitiveTypes.Float64),
	}
	if nested {
		fields = append(fields, f("list", arrow.ListOf(arrow.PrimitiveTypes.Int64)))
	}
	schema := arrow.NewSchema(fields, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	var recs []arrow.RecordBatch
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for start, size := 0, 1; start < n; start, size = start+size, size*3+1 {
		for i := start; i < min(n, start+size); i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1767614400e9 + int64(i/3)*1e9))
			if i%7 == 3 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host-%d", i%13))
			}
			b.Field(2).(*array.LargeStringBuilder).Append(fmt.Sprintf("id-%08d", i))
			if i < planSampleRows {
				b.Field(3).(*array.BinaryBuilder).Append([]byte("same"))
			} else {
				b.Field(3).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("%040d", i)))
			}
			b.Field(4).(*array.Int64Builder).Append(int64(i) * 1000)
			b.Field(5).(*array.Int32Builder).Append(int32([]int{200, 404, 500}[i%3]))
			b.Field(6).(*array.Uint64Builder).Append(rng.Uint64())
			b.Field(7).(*array.Float64Builder).Append(rng.Float64())
			b.Field(8).(*array.Float32Builder).Append(float32(i%4) / 2)
			b.Field(9).AppendNull()
			if nested {
				lb := b.Field(10).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{int64(i), -1}, nil)
			}
		}
		recs = append(recs, b.NewRecordBatch())
	}
	return schema, recs
}

// TestParquetRowGroups: a result of several row groups (cut inside
// batches) reads back as written, each column in the encoding planned for
// it, with exact statistics on the dictionary-built strings.
func TestParquetRowGroups(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(map[bool]string{false: "flat", true: "nested"}[nested], func(t *testing.T) { testRowGroups(t, nested) })
	}
}

func testRowGroups(t *testing.T, nested bool) {
	mem := checkedMem(t)
	const n, groupRows = 60_000, 25_000
	schema, recs := planRows(t, mem, n, nested)
	defer releaseAll(recs)
	if flatSchema(schema) == nested {
		t.Fatalf("nested %v, yet flatSchema says %v", nested, flatSchema(schema))
	}
	var buf bytes.Buffer
	w, err := New(Parquet, &buf, schema, Options{Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	w.(*parquetWriter).groupRows = groupRows
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tbl := readParquet(t, buf.Bytes())
	defer tbl.Release()
	if tbl.NumRows() != n {
		t.Fatalf("%d rows read back, want %d", tbl.NumRows(), n)
	}
	for i, f := range schema.Fields() {
		sameValues(t, f.Name, column0(recs, i), tbl.Column(i).Data())
	}

	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if got := pf.NumRowGroups(); got != 3 {
		t.Errorf("%d row groups, want 3", got)
	}
	want := map[string]parquet.Encoding{
		"time": parquet.Encodings.DeltaBinaryPacked,
		"host": parquet.Encodings.RLEDict,
		"id":   parquet.Encodings.Plain,
		"seq":  parquet.Encodings.DeltaBinaryPacked,
		"code": parquet.Encodings.RLEDict,
		"u":    parquet.Encodings.DeltaBinaryPacked,
		"rnd":  parquet.Encodings.ByteStreamSplit,
		"lvl":  parquet.Encodings.RLEDict,
	}
	for g := range pf.NumRowGroups() {
		rg := pf.MetaData().RowGroup(g)
		for i, f := range schema.Fields() {
			cc, err := rg.ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if enc, ok := want[f.Name]; ok && !hasEncoding(cc, enc) {
				t.Errorf("row group %d, %s: encodings %v, want %s", g, f.Name, cc.Encodings(), enc)
			}
			if f.Name == "host" {
				st, err := cc.Statistics()
				if err != nil || st == nil {
					t.Fatalf("host statistics: %v", err)
				}
				bs := st.(*metadata.ByteArrayStatistics)
				if lo, hi := string(bs.Min()), string(bs.Max()); lo != "host-0" || hi != "host-9" || bs.NullCount() == 0 {
					t.Errorf("row group %d host statistics: min %q max %q nulls %d", g, lo, hi, bs.NullCount())
				}
			}
		}
	}
}

func hasEncoding(cc *metadata.ColumnChunkMetaData, enc parquet.Encoding) bool {
	for _, e := range cc.Encodings() {
		if e == enc {
			return true
		}
	}
	return false
}

// TestParquetFlatWriterFails: TestWriterFails for the flat encoder.
func TestParquetFlatWriterFails(t *testing.T) {
	schema, recs := planRows(t, memory.NewGoAllocator(), 20_000, false)
	defer releaseAll(recs)
	size := len(writeAll(t, Parquet, schema, recs, Options{}))
	for _, n := range []int{0, 3, 100, 5000, 70000, size - 1} {
		t.Run(itoa(n), func(t *testing.T) {
			mem := checkedMem(t)
			w, err := New(Parquet, &failWriter{n: n}, schema, Options{Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			w.(*parquetWriter).groupRows = 7000
			var errs []error
			for _, r := range recs {
				errs = append(errs, w.Write(r))
			}
			errs = append(errs, w.Close())
			if err := errors.Join(errs...); !errors.Is(err, errDiskFull) {
				t.Fatalf("errors %v, want one wrapping %v", err, errDiskFull)
			}
		})
	}
}

// flatReadersScript checks the file of TestParquetRowGroups's rows with
// pyarrow and, when it is installed, DuckDB.
const flatReadersScript = `
import sys, pyarrow.parquet as pq, pyarrow.compute as pc
path, n = sys.argv[1], int(sys.argv[2])
t = pq.read_table(path)
assert t.num_rows == n, t.num_rows
assert str(t.schema.field("time").type) == "timestamp[ns]", t.schema.field("time").type
assert str(t.schema.field("id").type) == "large_string", t.schema.field("id").type
assert pc.sum(t.column("seq")).as_py() == 1000 * n * (n - 1) // 2
assert t.column("host").null_count == len([i for i in range(n) if i % 7 == 3])
assert t.column("id")[n - 1].as_py() == "id-%08d" % (n - 1)
assert t.column("none").null_count == n
try:
    import duckdb
except ImportError:
    print("ok (no duckdb)")
    sys.exit(0)
r = duckdb.sql(f"select count(*), typeof(any_value(time)), sum(seq), count(distinct host), max(id), sum(code), count(none) from read_parquet('{path}')").fetchall()
want = [(n, "TIMESTAMP_NS", 1000 * n * (n - 1) // 2, 13, "id-%08d" % (n - 1), sum([200, 404, 500][i % 3] for i in range(n)), 0)]
assert r == want, (r, want)
r = duckdb.sql(f"select sum(rnd), max(u) from read_parquet('{path}')").fetchall()
s = duckdb.sql("select sum(rnd), max(u) from t").fetchall()
assert abs(r[0][0] - s[0][0]) < 1e-6 and r[0][1] == s[0][1], (r, s)
print("ok")
`

// TestParquetFlatPython: pyarrow (and DuckDB, if the Python has it) read
// a file of several row groups in every encoding the plan chooses.
// APRON_TEST_PYTHON names a Python with pyarrow.
func TestParquetFlatPython(t *testing.T) {
	python := os.Getenv("APRON_TEST_PYTHON")
	if python == "" {
		t.Skip("APRON_TEST_PYTHON is not set")
	}
	const n = 60_000
	schema, recs := planRows(t, memory.NewGoAllocator(), n, false)
	defer releaseAll(recs)
	var buf bytes.Buffer
	w, err := New(Parquet, &buf, schema, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.(*parquetWriter).groupRows = 25_000
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flat.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(python, "-c", flatReadersScript, path, itoa(n)).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "ok") {
		t.Fatalf("%v\n%s", err, got)
	}
	t.Logf("%s", got)
}

// TestParquetFloatBits: a float column of few values, both zeros and two
// NaNs among them, which dictColumn tells apart by their bits, reads back
// bit for bit (where pqarrow's dictionary encoder takes the NaNs for one
// value, the chunk falls back to plain encoding).
func TestParquetFloatBits(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	b := array.NewFloat64Builder(mem)
	vals := []float64{0, math.Copysign(0, -1), 1.5, math.NaN(), math.Float64frombits(0x7ff8000000000000)}
	for i := range 10_000 {
		b.Append(vals[i%len(vals)])
	}
	arr := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len()))
	arr.Release()
	defer rec.Release()
	if plans := planColumns(schema, []arrow.RecordBatch{rec}); plans[0].dict == nil {
		t.Fatalf("plan %+v, want a dictionary", plans[0])
	}
	tbl := readParquet(t, writeAll(t, Parquet, schema, []arrow.RecordBatch{rec}, Options{Mem: mem}))
	defer tbl.Release()
	i := 0
	for _, c := range tbl.Column(0).Data().Chunks() {
		for _, v := range c.(*array.Float64).Float64Values() {
			if want := vals[i%len(vals)]; math.Float64bits(v) != math.Float64bits(want) {
				t.Fatalf("row %d: %v (%#x), want %v (%#x)", i, v, math.Float64bits(v), want, math.Float64bits(want))
			}
			i++
		}
	}
	if i != 10_000 {
		t.Fatalf("%d rows read back", i)
	}
}
