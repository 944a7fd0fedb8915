package output

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		got, err := ParseFormat(" " + strings.ToUpper(string(f)) + " ")
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	_, err := ParseFormat("xml")
	if !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("ParseFormat(xml) error %v, want ErrUnknownFormat", err)
	}
	if want := "table, csv, json, jsonl, arrow, parquet"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not list %q", err, want)
	}
	if _, err := New("xml", &bytes.Buffer{}, allTypesSchema(), Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("New(xml) error %v, want ErrUnknownFormat", err)
	}
	if _, err := New(Table, &bytes.Buffer{}, allTypesSchema(), Options{MaxRows: -1}); err == nil {
		t.Error("New accepted MaxRows -1")
	}
}

// TestGolden writes the every-type batches in each text format.
func TestGolden(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		opts   Options
	}{
		{"table_unlimited", Table, Options{}},
		{"table_w80", Table, Options{Width: 80}},
		{"table_w40", Table, Options{Width: 40}},
		{"csv", CSV, Options{}},
		{"json", JSON, Options{}},
		{"jsonl", JSONL, Options{}},
		// The shape of most results, where shrinking columns is enough.
		{"cpu_table_w120", Table, Options{Width: 120}},
		{"cpu_table_w80", Table, Options{Width: 80}},
		{"cpu_csv", CSV, Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := checkedMem(t)
			schema := allTypesSchema()
			var recs []arrow.RecordBatch
			if strings.HasPrefix(c.name, "cpu_") {
				schema, recs = cpuSchema(), cpuBatches(mem, 8, 5)
			} else {
				recs = buildBatches(t, mem, schema, allTypesRows())
			}
			defer releaseAll(recs)
			c.opts.Mem = mem
			got := writeAll(t, c.format, schema, recs, c.opts)
			checkGolden(t, c.name+".golden", got)
			if c.format == Table && c.opts.Width > 0 {
				for i, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
					if w := displayWidth(line); w > c.opts.Width {
						t.Errorf("line %d is %d wide, more than %d: %s", i, w, c.opts.Width, line)
					}
				}
			}
		})
	}
}

// TestEmpty writes a result of no rows in every format.
func TestEmpty(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: arrow.FixedWidthTypes.Timestamp_ns},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			mem := checkedMem(t)
			empty := buildBatches(t, mem, schema, [][]row{{}})
			defer releaseAll(empty)
			// No batch at all, and one batch of no rows: the same output.
			none := writeAll(t, f, schema, nil, Options{Mem: mem})
			one := writeAll(t, f, schema, empty, Options{Mem: mem})
			if !bytes.Equal(none, one) {
				t.Errorf("no batch and an empty batch differ:\n%q\n%q", none, one)
			}
			switch f {
			case Arrow:
				recs, got := readIPC(t, one, mem)
				releaseAll(recs)
				if !got.Equal(schema) {
					t.Errorf("schema read back %s, want %s", got, schema)
				}
			case Parquet:
				tbl := readParquet(t, one)
				defer tbl.Release()
				if tbl.NumRows() != 0 || !typesEqual(tbl.Schema(), schema) {
					t.Errorf("read back %d rows of %s", tbl.NumRows(), tbl.Schema())
				}
			default:
				checkGolden(t, "empty_"+string(f)+".golden", one)
			}
		})
	}
}

// typesEqual compares the column names and types of two schemas.
func typesEqual(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

// manyRows is a result of n rows: time, i (0…n-1) and a host name.
func manyRows(t testing.TB, mem memory.Allocator, n, batch int) (*arrow.Schema, []arrow.RecordBatch) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: arrow.FixedWidthTypes.Timestamp_ns},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64},
		{Name: "host", Type: arrow.BinaryTypes.String},
	}, nil)
	var batches [][]row
	for start := 0; start < n; start += batch {
		var rows []row
		for i := start; i < min(n, start+batch); i++ {
			rows = append(rows, row{t0.Add(time.Duration(i) * time.Second).UnixNano(), int64(i), "host-" + strings.Repeat("x", i%7)})
		}
		batches = append(batches, rows)
	}
	return schema, buildBatches(t, mem, schema, batches)
}

// TestTableMaxRows: a result longer than MaxRows shows its head, a "…" row
// and its tail, whatever the batch sizes.
func TestTableMaxRows(t *testing.T) {
	for _, c := range []struct {
		name          string
		rows, maxRows int
		golden        string
	}{
		{"cut", 100, 6, "table_maxrows.golden"},
		{"odd", 100, 5, "table_maxrows_odd.golden"},
		{"exact", 6, 6, "table_maxrows_exact.golden"},
		{"one_over", 7, 6, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := checkedMem(t)
			var first []byte
			for _, batch := range []int{1, 2, 3, 4, 7, 50, 1000} {
				schema, recs := manyRows(t, mem, c.rows, batch)
				got := writeAll(t, Table, schema, recs, Options{MaxRows: c.maxRows, Mem: mem})
				releaseAll(recs)
				if first == nil {
					first = got
					if c.golden != "" {
						checkGolden(t, c.golden, got)
					}
					continue
				}
				if !bytes.Equal(got, first) {
					t.Errorf("batches of %d rows:\n%s\ndiffers from batches of 1:\n%s", batch, got, first)
				}
			}
			lines := strings.Split(strings.TrimSuffix(string(first), "\n"), "\n")
			// Rules and header: 5 lines; rows; the "…" row if cut; footer.
			shown := min(c.rows, c.maxRows)
			want := 5 + shown + 1
			if c.rows > c.maxRows {
				want++
				if !strings.Contains(lines[len(lines)-1], "rows ("+strconv.Itoa(c.maxRows)+" shown)") {
					t.Errorf("footer %q does not say %d shown", lines[len(lines)-1], c.maxRows)
				}
			}
			if len(lines) != want {
				t.Errorf("%d lines, want %d:\n%s", len(lines), want, first)
			}
			// The last row shown is the last row of the result.
			last := lines[len(lines)-3]
			if !strings.Contains(last, " "+strconv.Itoa(c.rows-1)+" ") {
				t.Errorf("last row %q is not row %d", last, c.rows-1)
			}
		})
	}
}

func TestTableElapsed(t *testing.T) {
	mem := checkedMem(t)
	schema, recs := manyRows(t, mem, 3, 10)
	defer releaseAll(recs)
	got := writeAll(t, Table, schema, recs, Options{Mem: mem, Elapsed: func() time.Duration { return 12345 * time.Microsecond }})
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if want := "3 rows  3 columns in 0.012 s"; lines[len(lines)-1] != want {
		t.Errorf("footer %q, want %q", lines[len(lines)-1], want)
	}
}

// TestCSVParses reads the CSV back with encoding/csv: every row has every
// field, hostile values come back byte for byte, NULL is the empty field
// and the empty string is "".
func TestCSVParses(t *testing.T) {
	mem := checkedMem(t)
	schema := allTypesSchema()
	rows := allTypesRows()
	recs := buildBatches(t, mem, schema, rows)
	defer releaseAll(recs)
	out := writeAll(t, CSV, schema, recs, Options{Mem: mem})
	records, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1+5 {
		t.Fatalf("%d records, want 6", len(records))
	}
	for i, f := range schema.Fields() {
		if records[0][i] != f.Name {
			t.Errorf("header %d = %q, want %q", i, records[0][i], f.Name)
		}
	}
	host := schema.FieldIndices("host")[0]
	if got, want := records[3][host], rows[0][2][1].(string); got != want {
		t.Errorf("hostile host read back %q, want %q", got, want)
	}
	if got := records[2][host]; got != "" {
		t.Errorf("NULL host read back %q", got)
	}
	if !bytes.Contains(out, []byte(`,"",`)) {
		t.Error("no empty string is quoted")
	}
}

// TestJSONParses: the JSON output is one valid array, JSONL one valid
// object a line, keys in column order, every value of the right JSON kind.
func TestJSONParses(t *testing.T) {
	mem := checkedMem(t)
	schema := allTypesSchema()
	recs := buildBatches(t, mem, schema, allTypesRows())
	defer releaseAll(recs)

	var arr []map[string]any
	if err := json.Unmarshal(writeAll(t, JSON, schema, recs, Options{Mem: mem}), &arr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(writeAll(t, JSONL, schema, recs, Options{Mem: mem})), "\n"), "\n")
	if len(arr) != 5 || len(lines) != 5 {
		t.Fatalf("%d objects, %d lines, want 5", len(arr), len(lines))
	}
	for i, line := range lines {
		dec := json.NewDecoder(strings.NewReader(line))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("line %d: %v %v", i, tok, err)
		}
		for _, f := range schema.Fields() {
			key, err := dec.Token()
			if err != nil || key != f.Name {
				t.Fatalf("line %d: key %v (%v), want %q", i, key, err, f.Name)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("line %d, %s: %v", i, f.Name, err)
			}
		}
	}
	r0, r1 := arr[0], arr[1]
	for key, want := range map[string]any{
		"time": "2026-01-05T12:00:00Z", "host": "h1", "i64": 4.0, "f64": 0.1, "ok": true,
		"bin": "Ymlu", "ts_ms_utc": "2026-01-05T12:00:00.123Z", "d32": "2026-01-05", "dict": "east",
	} {
		if r0[key] != want {
			t.Errorf("row 0 %s = %#v, want %#v", key, r0[key], want)
		}
	}
	if r1["host"] != nil || r1["list"] != nil {
		t.Errorf("row 1 nulls read back as %v, %v", r1["host"], r1["list"])
	}
	if got := arr[2]["host"]; got != allTypesRows()[0][2][1] {
		t.Errorf("hostile host read back %q", got)
	}
}

// TestTypeNames: the table's second header row.
func TestTypeNames(t *testing.T) {
	got := map[string]string{}
	for _, f := range allTypesSchema().Fields() {
		got[f.Name] = typeName(f.Type)
	}
	for col, want := range map[string]string{
		"time": "timestamp_ns", "host": "varchar", "i8": "int8", "u64": "uint64", "f32": "float", "f64": "double",
		"ok": "boolean", "large": "varchar", "view": "varchar", "bin": "blob", "bview": "blob",
		"ts_s": "timestamp_s", "ts_ms_utc": "timestamptz_ms", "ts_us_ny": "timestamptz", "d64": "date",
		"t32": "time_ms", "t64": "time_ns", "dec": "decimal(10,3)", "dur": "interval_ms", "iv": "interval",
		"dict": "varchar", "list": "int64[]", "st": "struct(a int64, b varchar)", "m": "map(varchar, int64)",
	} {
		if got[col] != want {
			t.Errorf("typeName(%s) = %q, want %q", col, got[col], want)
		}
	}
}

// TestTableEveryWidth: at every terminal width, no line is wider than it,
// and every line of the box has the same width.
func TestTableEveryWidth(t *testing.T) {
	mem := checkedMem(t)
	schema := allTypesSchema()
	recs := buildBatches(t, mem, schema, allTypesRows())
	defer releaseAll(recs)
	for width := 1; width <= 400; width++ {
		out := writeAll(t, Table, schema, recs, Options{Width: width, Mem: mem})
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		box := displayWidth(lines[0])
		for i, line := range lines {
			w := displayWidth(line)
			if w > width {
				t.Fatalf("width %d: line %d is %d wide: %s", width, i, w, line)
			}
			if i < len(lines)-1 && w != box {
				t.Fatalf("width %d: line %d is %d wide, the box %d:\n%s", width, i, w, box, out)
			}
		}
	}
}
