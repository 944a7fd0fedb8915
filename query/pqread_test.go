//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
)

// pqGen describes a generated column: its type, the share of NULLs, how
// many distinct values (0: about all distinct) and the length of runs of
// one value (0: none).
type pqGen struct {
	name  string
	typ   arrow.DataType
	nulls float64
	card  int
	run   int
}

// pqAllTypes is a column of every type the native decoder reads.
func pqAllTypes(nulls float64) []pqGen {
	var out []pqGen
	add := func(name string, typ arrow.DataType, card, run int) {
		out = append(out, pqGen{name, typ, nulls, card, run})
	}
	out = append(out, pqGen{"time", tsNs, 0, 0, 0})
	add("i8", arrow.PrimitiveTypes.Int8, 0, 0)
	add("i16", arrow.PrimitiveTypes.Int16, 0, 0)
	add("i32", arrow.PrimitiveTypes.Int32, 50, 0)
	add("i64", arrow.PrimitiveTypes.Int64, 0, 0)
	add("u8", arrow.PrimitiveTypes.Uint8, 0, 0)
	add("u16", arrow.PrimitiveTypes.Uint16, 300, 0)
	add("u32", arrow.PrimitiveTypes.Uint32, 0, 0)
	add("u64", arrow.PrimitiveTypes.Uint64, 20, 0)
	add("f32", arrow.PrimitiveTypes.Float32, 0, 0)
	add("f64", arrow.PrimitiveTypes.Float64, 1000, 0)
	add("ok", arrow.FixedWidthTypes.Boolean, 0, 0)
	add("host", arrow.BinaryTypes.String, 40, 700)
	add("msg", arrow.BinaryTypes.String, 5000, 0)
	add("raw", arrow.BinaryTypes.Binary, 100, 0)
	add("d32", arrow.FixedWidthTypes.Date32, 0, 0)
	add("d64", arrow.FixedWidthTypes.Date64, 0, 0)
	add("ts_s", arrow.FixedWidthTypes.Timestamp_s, 0, 0)
	add("ts_ms", &arrow.TimestampType{Unit: arrow.Millisecond}, 0, 0)
	add("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond}, 100, 0)
	add("ts_ns", tsNs, 0, 0)
	add("tz_s", &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, 0, 0)
	add("tz_ms", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}, 0, 0)
	add("tz_us", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, 0, 0)
	add("tz_ns", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}, 0, 0)
	return out
}

// pqRecord generates n rows of cols, times from start 1 µs apart.
func pqRecord(mem memory.Allocator, cols []pqGen, n int, start int64, rng *rand.Rand) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.name != "time"}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, c := range cols {
		// The column's distinct values, as seeds; a run repeats one.
		seeds := make([]uint64, max(c.card, 1))
		for j := range seeds {
			seeds[j] = rng.Uint64()
		}
		seed := seeds[0]
		for r := range n {
			if c.name == "time" {
				b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(start + int64(r)*1000))
				continue
			}
			switch {
			case c.run > 0 && r%c.run == 0, c.run == 0 && c.card > 0:
				seed = seeds[rng.IntN(len(seeds))]
			case c.run == 0:
				seed = rng.Uint64()
			}
			if c.nulls > 0 && rng.Float64() < c.nulls {
				b.Field(i).AppendNull()
				continue
			}
			pqAppend(b.Field(i), seed)
		}
	}
	return b.NewRecordBatch()
}

// pqAppend appends a value made of seed.
func pqAppend(fb array.Builder, seed uint64) {
	signed := int64(seed)
	switch fb := fb.(type) {
	case *array.Int8Builder:
		fb.Append(int8(seed))
	case *array.Int16Builder:
		fb.Append(int16(seed))
	case *array.Int32Builder:
		fb.Append(int32(seed))
	case *array.Int64Builder:
		fb.Append(signed)
	case *array.Uint8Builder:
		fb.Append(uint8(seed))
	case *array.Uint16Builder:
		fb.Append(uint16(seed))
	case *array.Uint32Builder:
		fb.Append(uint32(seed))
	case *array.Uint64Builder:
		fb.Append(seed)
	case *array.Float32Builder:
		fb.Append(float32(signed>>40) / 7)
	case *array.Float64Builder:
		fb.Append(float64(signed>>20) / 3)
	case *array.BooleanBuilder:
		fb.Append(seed&1 == 1)
	case *array.StringBuilder:
		// Lengths 0 to 40, some not ASCII: inlined and not in DuckDB.
		s := fmt.Sprintf("v%x-é-%s", seed>>40, strings.Repeat("x", int(seed%37)))
		switch {
		case seed%11 == 0:
			s = ""
		case seed%13 == 0:
			s += "\xff\xfe" // not UTF-8: read as it is, from memory or file
		}
		fb.Append(s)
	case *array.BinaryBuilder:
		v := make([]byte, seed%20)
		for j := range v {
			v[j] = byte(seed >> (j % 8 * 8))
		}
		fb.Append(v)
	case *array.Date32Builder:
		fb.Append(arrow.Date32(signed % 40000))
	case *array.Date64Builder:
		fb.Append(arrow.Date64(signed % 40000 * 86400000))
	case *array.TimestampBuilder:
		// Within ±95 years of 1970 in any unit, many not on a whole
		// second, half of them negative (conversions round them).
		unit := fb.Type().(*arrow.TimestampType).Unit
		span := int64(3e9) * int64(time.Second/unit.Multiplier())
		fb.Append(arrow.Timestamp(signed % span))
	default:
		panic(fmt.Sprintf("no generator for %T", fb))
	}
}

// pqWrite writes rec as a Parquet file at path with the writer options.
func pqWrite(t testing.TB, path string, rec arrow.RecordBatch, opts ...parquet.WriterProperty) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Strings as Apron stores them: plain utf8 (the buffer's dictionaries
	// are not written as Arrow dictionaries).
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithVersion(parquet.V2_6)}, opts...)...)
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// declared is how the scan declares cols: strings as dictionaries.
func declared(cols []pqGen) []arrow.Field {
	out := make([]arrow.Field, len(cols))
	for i, c := range cols {
		out[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
		if c.typ.ID() == arrow.STRING {
			out[i].Type = stringDictType
		}
	}
	return out
}

// pqScanOf is a scan of the one file at path, as a thread of it: the
// table columns fields projected by proj, within bounds. done destroys it.
func pqScanOf(t testing.TB, e *Engine, path string, fields []arrow.Field, proj []int, bounds timeBounds) (l *scanLocal, done func()) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := persist.File{Path: filepath.Base(path), URI: "file://" + filepath.ToSlash(path), Size: fi.Size(), Rows: 1,
		MinTime: math.MinInt64, MaxTime: math.MaxInt64, Database: "db", Table: "t"}
	g := &scanGlobal{bind: &bindData{e: e, fields: fields}, bounds: bounds, proj: proj, files: []persist.File{f}, ctx: context.Background()}
	l = &scanLocal{g: g}
	return l, func() {
		l.destroy()
		g.destroy()
	}
}

// pqReadFile reads the file at path the way a scan does, with the table
// columns fields projected by proj, natively or not; it returns the rows
// and whether the native decoder read the file.
func pqReadFile(t testing.TB, e *Engine, path string, fields []arrow.Field, proj []int, bounds timeBounds, native bool) ([]string, bool) {
	t.Helper()
	pqDisabled.Store(!native)
	defer pqDisabled.Store(false)
	before := pqNative.Load()
	l, done := pqScanOf(t, e, path, fields, proj, bounds)
	defer done()
	outFields := make([]arrow.Field, len(proj))
	for i, tc := range proj {
		if tc < 0 {
			// A row id: DuckDB's type, nothing written.
			outFields[i] = arrow.Field{Name: "rowid", Type: arrow.PrimitiveTypes.Int64}
			continue
		}
		outFields[i] = fields[tc]
	}
	rows := readChunks(t, e, outFields, l.fill)
	return rows, pqNative.Load() > before
}

// readChunks fills chunks of outFields' DuckDB types until fill emits
// none and returns their rows, read back through DuckDB's Arrow export.
func readChunks(t testing.TB, e *Engine, outFields []arrow.Field, fill func(duck.DataChunk) error) []string {
	t.Helper()
	rows, err := tryReadChunks(t, e, outFields, fill)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// tryReadChunks is readChunks, returning the first error of fill or of
// the conversion back.
func tryReadChunks(t testing.TB, e *Engine, outFields []arrow.Field, fill func(duck.DataChunk) error) ([]string, error) {
	t.Helper()
	types, err := e.duckTypes(outFields)
	if err != nil {
		t.Fatal(err)
	}
	out := duck.CreateDataChunk(types)
	defer duck.DestroyDataChunk(&out)
	var opts duck.ArrowOptions
	duck.ConnectionGetArrowOptions(e.conv, &opts)
	defer duck.DestroyArrowOptions(&opts)
	names := make([]string, len(outFields))
	for i, f := range outFields {
		names[i] = f.Name
	}
	schema, ed := duck.NewArrowSchema(opts, types, names)
	if err := errorData(ed); err != nil {
		t.Fatal(err)
	}
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	var rows []string
	for {
		duck.DataChunkReset(out)
		if err := fill(out); err != nil {
			return rows, err
		}
		if duck.DataChunkGetSize(out) == 0 {
			return rows, nil
		}
		rec, ed := duck.DataChunkToArrowArray(opts, schema, out)
		if err := errorData(ed); err != nil {
			return rows, err
		}
		for i := range int(rec.NumRows()) {
			rows = append(rows, rowString(rec, i))
		}
		rec.Release()
	}
}

// pqExpected is the rows of rec projected, as DuckDB reads them from
// buffered chunks: through its Arrow import, strings as dictionaries.
func pqExpected(t testing.TB, e *Engine, mem memory.Allocator, rec arrow.RecordBatch, fields []arrow.Field, proj []int) []string {
	t.Helper()
	cols := make([]arrow.Array, len(proj))
	outFields := make([]arrow.Field, len(proj))
	for i, tc := range proj {
		want := fields[tc]
		outFields[i] = want
		idx := rec.Schema().FieldIndices(want.Name)
		if len(idx) == 0 {
			cols[i] = array.MakeArrayOfNull(mem, want.Type, int(rec.NumRows()))
			continue
		}
		c, err := convertArray(context.Background(), rec.Column(idx[0]), want.Type, mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	sub := arrow.NewSchema(outFields, nil)
	whole := array.NewRecordBatch(sub, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	defer whole.Release()
	conv, ed := duck.SchemaFromArrow(e.conv, sub)
	defer duck.DestroyArrowConvertedSchema(&conv)
	if err := errorData(ed); err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	return readChunks(t, e, outFields, func(out duck.DataChunk) error {
		if off >= whole.NumRows() {
			duck.DataChunkSetSize(out, 0)
			return nil
		}
		s := whole.NewSlice(off, min(off+vectorSize, whole.NumRows()))
		defer s.Release()
		off += s.NumRows()
		dc, ed := duck.DataChunkFromArrow(e.conv, s, conv)
		defer duck.DestroyDataChunk(&dc)
		if err := errorData(ed); err != nil {
			return err
		}
		for i := range outFields {
			duck.VectorReferenceVector(duck.DataChunkGetVector(out, duck.IdxT(i)), duck.DataChunkGetVector(dc, duck.IdxT(i)))
		}
		duck.DataChunkSetSize(out, duck.DataChunkGetSize(dc))
		return nil
	})
}

func allColumns(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// compareRows reports the first difference of got and want.
func compareRows(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: row %d\n got %s\nwant %s", what, i, got[i], want[i])
			return
		}
	}
}

// TestPQWriterVariants reads files of every supported type written with
// the writer's options varied (page versions, page sizes, dictionaries on,
// off and overflowing, row groups, codecs) natively and through pqarrow,
// and wants what DuckDB reads from the same rows in memory.
func TestPQWriterVariants(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	dir := t.TempDir()
	variants := []struct {
		name  string
		nulls float64
		opts  []parquet.WriterProperty
	}{
		{"apron", 0.1, []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true),
			parquet.WithDictionaryDefault(true), parquet.WithDictionaryFor("time", false), parquet.WithSortingColumns([]parquet.SortingColumn{{ColumnIdx: 12}})}},
		{"no_nulls", 0, []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}},
		{"all_null", 1, nil},
		{"v2_pages", 0.2, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Zstd)}},
		{"v2_uncompressed", 0.05, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"plain_small_pages", 0.3, []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(2000),
			parquet.WithBatchSize(100)}},
		{"dictionary_overflows", 0.1, []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(3000), parquet.WithBatchSize(500),
			parquet.WithDataPageSize(8000)}},
		{"small_row_groups", 0.1, []parquet.WriterProperty{parquet.WithMaxRowGroupLength(3001), parquet.WithDataPageSize(5000),
			parquet.WithSortingColumns([]parquet.SortingColumn{{ColumnIdx: 12}})}},
		{"rle_booleans_v2", 0.1, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithEncodingFor("ok", parquet.Encodings.RLE)}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cols := pqAllTypes(v.nulls)
			rec := pqRecord(s.mem, cols, 10000+rng.IntN(3000), base, rng)
			defer rec.Release()
			path := filepath.Join(dir, v.name+".parquet")
			pqWrite(t, path, rec, v.opts...)
			fields := declared(cols)
			projections := [][]int{allColumns(len(cols)), {12}, {13, 3, 12}, {21, 20, 19, 18, 17, 16}, {24, 23, 22, 11, 14}, {12, 12, 5}}
			for _, proj := range projections {
				want := pqExpected(t, s.e, s.mem, rec, fields, proj)
				got, native := pqReadFile(t, s.e, path, fields, proj, allTime, true)
				if !native {
					t.Fatalf("projection %v: not read natively", proj)
				}
				compareRows(t, fmt.Sprintf("native %v", proj), got, want)
				old, native := pqReadFile(t, s.e, path, fields, proj, allTime, false)
				if native {
					t.Fatal("read natively with the decoder disabled")
				}
				compareRows(t, fmt.Sprintf("pqarrow %v", proj), old, want)
			}
		})
	}
}

// TestPQFallback reads files the native decoder does not (an encoding it
// does not know, a type it does not read as declared) through pqarrow,
// and files that lack declared columns natively (NULLs).
func TestPQFallback(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	cols := pqAllTypes(0.1)
	rec := pqRecord(s.mem, cols, 5000, base, rng)
	defer rec.Release()
	fields := declared(cols)

	cases := []struct {
		name   string
		opts   []parquet.WriterProperty
		proj   []int
		native bool
	}{
		// (DELTA_* encodings would do too, but pqarrow leaks their
		// decoders' buffers: the checked allocator fails the test.)
		{"byte_stream_split", []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("f64", parquet.Encodings.ByteStreamSplit)}, []int{10, 1, 12}, false},
		{"byte_stream_split_int", []parquet.WriterProperty{parquet.WithDictionaryFor("i32", false), parquet.WithEncodingFor("i32", parquet.Encodings.ByteStreamSplit)}, []int{3}, false},
		{"not_projected", []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("f64", parquet.Encodings.ByteStreamSplit)}, []int{0, 5, 12, 13}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".parquet")
			pqWrite(t, path, rec, c.opts...)
			want := pqExpected(t, s.e, s.mem, rec, fields, c.proj)
			got, native := pqReadFile(t, s.e, path, fields, c.proj, allTime, true)
			if native != c.native {
				t.Errorf("read natively: %v, want %v", native, c.native)
			}
			compareRows(t, "rows", got, want)
		})
	}

	t.Run("type_differs", func(t *testing.T) {
		// A column the file has as int32 but the table declares int64
		// (no such table can be made; pqarrow casts it).
		path := filepath.Join(dir, "types.parquet")
		pqWrite(t, path, rec)
		wider := append([]arrow.Field(nil), fields...)
		wider[3].Type = arrow.PrimitiveTypes.Int64
		_, native := pqReadFile(t, s.e, path, wider, []int{3}, allTime, true)
		if native {
			t.Error("an int32 column read natively as int64")
		}
	})

	t.Run("row_counts_only", func(t *testing.T) {
		// No table column (count(*)): the row groups' row counts.
		path := filepath.Join(dir, "counts.parquet")
		pqWrite(t, path, rec, parquet.WithMaxRowGroupLength(1200))
		for _, native := range []bool{true, false} {
			got, read := pqReadFile(t, s.e, path, fields, []int{-1}, allTime, native)
			if len(got) != int(rec.NumRows()) || read != native {
				t.Errorf("native %v: %d rows (read natively: %v), want %d", native, len(got), read, rec.NumRows())
			}
		}
	})

	t.Run("missing_columns", func(t *testing.T) {
		// The file predates columns the table has now.
		path := filepath.Join(dir, "old.parquet")
		pqWrite(t, path, rec)
		more := append(append([]arrow.Field(nil), fields...), arrow.Field{Name: "later", Type: stringDictType, Nullable: true},
			arrow.Field{Name: "later_n", Type: arrow.PrimitiveTypes.Int16, Nullable: true})
		for _, proj := range [][]int{{len(fields), 1, len(fields) + 1}, {len(fields) + 1}} {
			want := pqExpected(t, s.e, s.mem, rec, more, proj)
			got, native := pqReadFile(t, s.e, path, more, proj, allTime, true)
			if !native {
				t.Errorf("%v not read natively", proj)
			}
			compareRows(t, fmt.Sprint(proj), got, want)
		}
	})
}

// TestPQStringDictionaries reads string columns whose dictionaries are
// larger than a DuckDB vector, overflow into PLAIN pages within a
// chunk, repeat values in runs long enough to go out as constants, and
// hold NULLs at every position of a run.
func TestPQStringDictionaries(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 10))
	cols := []pqGen{{"time", tsNs, 0, 0, 0},
		{"big", arrow.BinaryTypes.String, 0.01, 30000, 0},    // a dictionary of ~30k entries
		{"runs", arrow.BinaryTypes.String, 0.001, 20, 3000},  // long runs, rare NULLs
		{"short", arrow.BinaryTypes.String, 0, 5, 300},       // runs about pqMinConstRun
		{"nullruns", arrow.BinaryTypes.String, 0.5, 3, 5000}, // runs broken by NULLs
		{"unique", arrow.BinaryTypes.String, 0, 0, 0},        // PLAIN once the dictionary is full
		{"blob", arrow.BinaryTypes.Binary, 0.1, 10, 2500},    // blob runs
		{"n", arrow.PrimitiveTypes.Int64, 0.2, 0, 0}}
	rec := pqRecord(s.mem, cols, 70000, base, rng)
	defer rec.Release()
	fields := declared(cols)
	for _, sorted := range []int{2, 3, 4, 6} {
		path := filepath.Join(dir, fmt.Sprintf("sorted%d.parquet", sorted))
		pqWrite(t, path, rec, parquet.WithSortingColumns([]parquet.SortingColumn{{ColumnIdx: int32(sorted)}}), parquet.WithCompression(compress.Codecs.Zstd))
		for _, proj := range [][]int{allColumns(len(cols)), {sorted}, {sorted, 7}, {5, 1}} {
			want := pqExpected(t, s.e, s.mem, rec, fields, proj)
			got, native := pqReadFile(t, s.e, path, fields, proj, allTime, true)
			if !native {
				t.Fatalf("%v not read natively", proj)
			}
			compareRows(t, fmt.Sprintf("sorted by %d, %v", sorted, proj), got, want)
		}
	}
}

// TestPQDictionaryCache reads files whose row groups repeat dictionaries
// (the cache hands them out again) among more distinct ones than it
// keeps (it evicts), through one scan thread.
func TestPQDictionaryCache(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	rng := rand.New(rand.NewPCG(15, 16))
	cols := []pqGen{{"time", tsNs, 0, 0, 0}, {"host", arrow.BinaryTypes.String, 0.05, 30, 200}, {"kind", arrow.BinaryTypes.String, 0, 4, 0}}
	var distinct []arrow.RecordBatch
	for range maxCachedDicts + 4 {
		distinct = append(distinct, pqRecord(s.mem, cols, 1000+rng.IntN(500), base, rng))
	}
	defer func() {
		for _, r := range distinct {
			r.Release()
		}
	}()
	// Row groups: each distinct batch, with the first few coming back.
	var order []arrow.RecordBatch
	for i, r := range distinct {
		order = append(order, r)
		if i%3 == 2 {
			order = append(order, distinct[0], distinct[i-1])
		}
	}
	path := filepath.Join(t.TempDir(), "groups.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(order[0].Schema(), f, parquet.NewWriterProperties(parquet.WithVersion(parquet.V2_6)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	fields := declared(cols)
	var want []string
	for i, r := range order {
		if i > 0 {
			if err := w.NewBufferedRowGroupChecked(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteBuffered(r); err != nil {
			t.Fatal(err)
		}
		want = append(want, pqExpected(t, s.e, s.mem, r, fields, []int{0, 1, 2})...)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, native := pqReadFile(t, s.e, path, fields, []int{0, 1, 2}, allTime, true)
	if !native {
		t.Fatal("not read natively")
	}
	compareRows(t, "rows", got, want)
}

// TestPQCorruptFiles reads files with bytes flipped in their pages (zstd,
// and uncompressed so that the flips reach the decoder as they are): the
// native decoder must return rows or an error, never panic or hand DuckDB
// an index outside a dictionary (reading the output back would fault).
// The footer is left intact: a bad footer is refused before any page is
// read.
func TestPQCorruptFiles(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	cols := pqAllTypes(0.1)
	fields := declared(cols)
	rng := rand.New(rand.NewPCG(7, 11))
	rec := pqRecord(s.mem, cols, 5000, base, rng)
	defer rec.Release()
	dir := t.TempDir()
	for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Zstd} {
		clean := filepath.Join(dir, fmt.Sprintf("clean-%s.parquet", codec))
		pqWrite(t, clean, rec, parquet.WithCompression(codec), parquet.WithDictionaryDefault(true), parquet.WithDataPageSize(4<<10))
		data, err := os.ReadFile(clean)
		if err != nil {
			t.Fatal(err)
		}
		footer := int(uint32(data[len(data)-8]) | uint32(data[len(data)-7])<<8 | uint32(data[len(data)-6])<<16 | uint32(data[len(data)-5])<<24)
		pagesEnd := len(data) - 8 - footer
		errs, reads := 0, 0
		for i := range 200 {
			bad := append([]byte(nil), data...)
			for range 1 + rng.IntN(8) {
				bad[4+rng.IntN(pagesEnd-4)] ^= byte(1 + rng.IntN(255))
			}
			path := filepath.Join(dir, fmt.Sprintf("bad-%s-%d.parquet", codec, i))
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if pqReadCorrupt(t, s.e, path, fields, allColumns(len(fields))) != nil {
				errs++
			} else {
				reads++
			}
			os.Remove(path)
		}
		t.Logf("%s: %d corrupt files refused, %d read (flips that decode)", codec, errs, reads)
	}
}

// pqReadCorrupt reads a file as a scan does, converting every output
// chunk back through DuckDB, and returns the first error.
func pqReadCorrupt(t testing.TB, e *Engine, path string, fields []arrow.Field, proj []int) error {
	t.Helper()
	l, done := pqScanOf(t, e, path, fields, proj, allTime)
	defer done()
	_, err := tryReadChunks(t, e, fields, l.fill)
	return err
}
