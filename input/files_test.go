package input

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// testRecord has 10 rows: ts (the given type, seconds 1700000000+i or
// their text), host, and v with a null in row 3.
func testRecord(t *testing.T, mem memory.Allocator, tsType arrow.DataType, tsName string) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: tsName, Type: tsType},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range 10 {
		sec := int64(1700000000 + i)
		switch tb := b.Field(0).(type) {
		case *array.Int64Builder:
			tb.Append(sec)
		case *array.TimestampBuilder:
			tb.Append(arrow.Timestamp(sec * 1000)) // unit ms in these tests
		case *array.StringBuilder:
			tb.Append(fmt.Sprintf("2023-11-14T22:13:%02dZ", 20+i))
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", i))
		if i == 3 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
		}
	}
	return b.NewRecordBatch()
}

func writeParquet(t *testing.T, rec arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeIPC(t *testing.T, rec arrow.RecordBatch, file bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if file {
		fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	} else {
		w = ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	}
	// Two batches: the reader re-chunks across them.
	for range 2 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParquetAndArrow(t *testing.T) {
	msType := &arrow.TimestampType{Unit: arrow.Millisecond}
	const t0 = int64(1700000000) * 1e9
	for _, tc := range []struct {
		name       string
		tsType     arrow.DataType
		tsName     string
		opts       Options
		wantSchema string
		wantTime0  string
	}{
		{"int_seconds_renamed_and_converted", arrow.PrimitiveTypes.Int64, "ts", Options{TimeColumn: "ts", TimeFormat: "s"},
			"time:timestamp[ns, tz=UTC],host:utf8,v:float64", fmt.Sprint(t0)},
		{"int_auto_by_magnitude", arrow.PrimitiveTypes.Int64, "time", Options{},
			"time:timestamp[ns, tz=UTC],host:utf8,v:float64", fmt.Sprint(t0)},
		{"timestamp_renamed_only", msType, "ts", Options{TimeColumn: "ts"},
			"time:timestamp[ms],host:utf8,v:float64", fmt.Sprint(t0 / 1e6)},
		{"timestamp_time_untouched", msType, "time", Options{},
			"time:timestamp[ms],host:utf8,v:float64", fmt.Sprint(t0 / 1e6)},
		{"string_parsed", arrow.BinaryTypes.String, "when", Options{TimeColumn: "when"},
			"time:timestamp[ns, tz=UTC],host:utf8,v:float64", fmt.Sprint(t0)},
		{"no_time_column", arrow.PrimitiveTypes.Int64, "ts", Options{},
			"ts:int64,host:utf8,v:float64", "1700000000"},
	} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rec := testRecord(t, mem, tc.tsType, tc.tsName)
		files := map[string][]byte{
			"f.parquet": writeParquet(t, rec),
			"f.arrow":   writeIPC(t, rec, true),
			"f.arrows":  writeIPC(t, rec, false),
		}
		rec.Release()
		mem.AssertSize(t, 0)
		for fname, data := range files {
			format, err := Detect(fname, data)
			if err != nil {
				t.Fatal(err)
			}
			if sniffed, err := Detect("-", data); err != nil || sniffed != format {
				t.Errorf("%s: sniffed %q, %v; want %q", fname, sniffed, err, format)
			}
			total := 10
			if format == Arrow {
				total = 20
			}
			for _, seekable := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/seekable=%v", tc.name, fname, seekable), func(t *testing.T) {
					tmp := t.TempDir()
					t.Setenv("TMPDIR", tmp)
					var r io.Reader = bytes.NewReader(data)
					if !seekable {
						r = onlyReader{r}
					}
					opts := tc.opts
					opts.Format, opts.BatchRows, opts.Table = format, 4, "tbl"
					bs, err := readAll(t, fname, r, opts)
					if err != nil {
						t.Fatal(err)
					}
					var rows int64
					for i, b := range bs {
						if b.Schema != tc.wantSchema {
							t.Fatalf("schema %s, want %s", b.Schema, tc.wantSchema)
						}
						if b.Table != "tbl" || b.FirstLine != 0 || b.LastLine != 0 || b.FirstRow != rows || int64(len(b.Rows)) != b.LastRow-b.FirstRow+1 || len(b.Rows) > 4 {
							t.Fatalf("batch %d: %+v", i, b)
						}
						rows += int64(len(b.Rows))
					}
					if rows != int64(total) {
						t.Fatalf("%d rows, want %d", rows, total)
					}
					all := allRows(bs)
					if want := tc.wantTime0 + ` "h0" 0`; all[0] != want {
						t.Errorf("row 0: %s, want %s", all[0], want)
					}
					if want := ` "h3" null`; all[3][len(all[3])-len(want):] != want {
						t.Errorf("row 3: %s", all[3])
					}
					left, _ := filepath.Glob(filepath.Join(tmp, "*"))
					if len(left) != 0 {
						t.Errorf("spool files left: %v", left)
					}
				})
			}
		}
	}
}

func TestParquetAndArrowErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem, arrow.BinaryTypes.String, "time")
	// Make row 5's time unreadable: rebuild with a bad string.
	sb := array.NewStringBuilder(mem)
	for i := range 10 {
		if i == 5 {
			sb.Append("later")
		} else {
			sb.Append(fmt.Sprintf("2023-11-14T22:13:%02dZ", 20+i))
		}
	}
	bad := sb.NewArray()
	sb.Release()
	rec2, err := rec.SetColumn(0, bad)
	bad.Release()
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	pq := writeParquet(t, rec2)
	ar := writeIPC(t, rec2, true)
	rec2.Release()
	noTime := testRecord(t, mem, arrow.PrimitiveTypes.Int64, "ts")
	pqNoTime := writeParquet(t, noTime)
	noTime.Release()

	for _, tc := range []struct {
		name string
		data []byte
		opts Options
		want string
	}{
		{"parquet_bad_time", pq, Options{Format: Parquet, BatchRows: 4}, `f: row 5: column "time": type mismatch: not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)`},
		{"arrow_bad_time", ar, Options{Format: Arrow}, `f: row 5: column "time": type mismatch: not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)`},
		{"both_time_columns", pq, Options{Format: Parquet, TimeColumn: "host"}, `f: schema error: the file has a column "time" and --time-column names "host": both would be the time column; rename or drop one`},
		{"float_time_column", pqNoTime, Options{Format: Parquet, TimeColumn: "v"}, `f: column "v": schema error: the time column is a float64; it must be a timestamp, a date, an integer (epoch) or a string`},
		{"layout_for_integers", pqNoTime, Options{Format: Parquet, TimeColumn: "ts", TimeFormat: "2006-01-02"}, `f: column "ts": schema error: the time column holds int64, which a time layout cannot read (use --time-format s, ms, us or ns)`},
		{"missing_time_column", pqNoTime, Options{Format: Parquet, TimeColumn: "when"}, `f: schema error: --time-column "when": no such column (the columns are "ts", "host", "v")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, "f", bytes.NewReader(tc.data), tc.opts)
			wantError(t, err, tc.want)
		})
	}
	// Not a Parquet file at all.
	if _, err := readAll(t, "x.parquet", bytes.NewReader([]byte("PAR1 nope")), Options{Format: Parquet}); err == nil {
		t.Error("garbage parquet: no error")
	}
	if _, err := readAll(t, "x.arrow", bytes.NewReader([]byte("nope")), Options{Format: Arrow}); err == nil {
		t.Error("garbage arrow: no error")
	}
}

func TestParquetFile(t *testing.T) {
	// An *os.File is read in place, from offset 0 whatever its position.
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rec := testRecord(t, mem, arrow.PrimitiveTypes.Int64, "ts")
	data := writeParquet(t, rec)
	rec.Release()
	mem.AssertSize(t, 0)
	path := filepath.Join(t.TempDir(), "f.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 100)); err != nil { // as Detect's caller would
		t.Fatal(err)
	}
	rd, err := Open(path, f, -1, Options{Format: Parquet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if b.Record.NumRows() != 10 {
		t.Errorf("%d rows", b.Record.NumRows())
	}
	b.Record.Release()
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("second Next: %v", err)
	}
	if n := rd.BytesRead(); n <= 0 || n > int64(len(data)) {
		t.Errorf("BytesRead %d of %d", n, len(data))
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
}
