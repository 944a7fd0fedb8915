package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const tsSchema = "time:timestamp[ns, tz=UTC]"

func TestCSV(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		opts   Options
		schema string
		rows   []string
	}{
		{
			name:   "inferred_types",
			data:   "time,host,usage,n,ok\n2024-01-02T03:04:05Z,a,1.5,3,true\n2024-01-02T03:04:06.5Z,b,-2,-4,FALSE\n",
			schema: tsSchema + ",host:utf8,usage:float64,n:int64,ok:bool",
			rows:   []string{`1704164645000000000 "a" 1.5 3 true`, `1704164646500000000 "b" -2 -4 false`},
		},
		{
			name:   "int_then_decimal_is_float",
			data:   "v\n1\n2\n2.5\n",
			schema: "v:float64",
			rows:   []string{"1", "2", "2.5"},
		},
		{
			name:   "mixed_is_string",
			data:   "v,w\n1,true\nx,1\n",
			schema: "v:utf8,w:utf8",
			rows:   []string{`"1" "true"`, `"x" "1"`},
		},
		{
			name:   "empty_is_null_and_all_empty_is_string",
			data:   "a,b,c\n1,,x\n,,\n",
			schema: "a:int64,b:utf8,c:utf8",
			rows:   []string{`1 null "x"`, "null null null"},
		},
		{
			name:   "null_first",
			data:   "a,b,c\n,,x\n2,1.5,\n",
			schema: "a:int64,b:float64,c:utf8",
			rows:   []string{`null null "x"`, `2 1.5 null`},
		},
		{
			name:   "dates_stay_strings_outside_the_time_column",
			data:   "d\n2024-01-02T03:04:05Z\n",
			schema: "d:utf8",
			rows:   []string{`"2024-01-02T03:04:05Z"`},
		},
		{
			name:   "quoted_fields",
			data:   "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n\"line1\nline2\",\"\"\n",
			schema: "a:utf8,b:utf8",
			rows:   []string{`"x,y" "say \"hi\""`, `"line1\nline2" null`},
		},
		{
			name:   "bom_and_crlf",
			data:   "\xEF\xBB\xBFa,b\r\n1,x\r\n\"q\r\nr\",y\r\n",
			schema: "a:utf8,b:utf8",
			rows:   []string{`"1" "x"`, `"q\nr" "y"`},
		},
		{
			name:   "no_final_newline_and_blank_lines",
			data:   "a\n\n1\n\n2",
			schema: "a:int64",
			rows:   []string{"1", "2"},
		},
		{
			name:   "tsv",
			data:   "a\tb\n1,5\tx y\n",
			opts:   Options{Format: TSV},
			schema: "a:utf8,b:utf8",
			rows:   []string{`"1,5" "x y"`},
		},
		{
			name:   "schema_override",
			data:   "host,usage,n,u\n1,2,3,4\n",
			opts:   Options{Schema: "host:string, usage:double,n:float,u:uint64"},
			schema: "host:utf8,usage:float64,n:float64,u:uint64",
			rows:   []string{`"1" 2 3 4`},
		},
		{
			name:   "schema_timestamp_column",
			data:   "t,d\n1,2024-01-02\n",
			opts:   Options{Schema: "d:timestamp"},
			schema: "t:int64,d:timestamp[ns, tz=UTC]",
			rows:   []string{"1 1704153600000000000"},
		},
		{
			name:   "time_column_renamed",
			data:   "ts,v\n2024-01-02T03:04:05+01:00,1\n",
			opts:   Options{TimeColumn: "ts"},
			schema: tsSchema + ",v:int64",
			rows:   []string{"1704161045000000000 1"},
		},
		{
			name:   "no_time_column",
			data:   "v\n1\n",
			schema: "v:int64",
			rows:   []string{"1"},
		},
		{
			name:   "large_integer_is_float",
			data:   "v\n99999999999999999999\n",
			schema: "v:float64",
			rows:   []string{"1e+20"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.Format == "" {
				opts.Format = CSV
			}
			opts.Table = "t"
			bs := mustRead(t, "data.csv", tc.data, opts)
			if len(bs) != 1 {
				t.Fatalf("%d batches, want 1", len(bs))
			}
			if bs[0].Schema != tc.schema {
				t.Errorf("schema %s, want %s", bs[0].Schema, tc.schema)
			}
			if bs[0].Table != "t" {
				t.Errorf("table %q", bs[0].Table)
			}
			equalStrings(t, "rows", bs[0].Rows, tc.rows)
		})
	}
}

func TestCSVTimeFormats(t *testing.T) {
	const t0 = 1704164645000000000 // 2024-01-02T03:04:05Z
	for _, tc := range []struct {
		format, value string
		want          int64
	}{
		{"", "2024-01-02T03:04:05Z", t0},
		{"", "2024-01-02T03:04:05", t0},                        // no zone: UTC
		{"", "2024-01-02 03:04:05", t0},                        // space separator
		{"", "2024-01-02T04:04:05+01:00", t0},                  // offset
		{"", "2024-01-02T02:04:05-0100", t0},                   // offset without colon
		{"", "2024-01-02T03:04:05.123456789Z", t0 + 123456789}, // nanoseconds
		{"", "2024-01-02T03:04", t0 - 5e9},                     // no seconds
		{"", "2024-01-02", 1704153600000000000},                // a date is midnight UTC
		{"", "1704164645", t0},                                 // epoch s by magnitude
		{"", "1704164645.25", t0 + 250000000},                  // fractional seconds
		{"", "1704164645000", t0},                              // ms
		{"", "1704164645000000", t0},                           // us
		{"", "1704164645000000000", t0},                        // ns
		{"", "0", 0},
		{"rfc3339", "2024-01-02T03:04:05Z", t0},
		{"s", "1704164645", t0},
		{"ms", "1704164645000", t0},
		{"ms", "1704164645000.5", t0 + 500000},
		{"us", "1704164645000000", t0},
		{"ns", "1704164645000000000", t0},
		{"s", "5", 5e9}, // no magnitude guess with a unit
		{"02/01/2006 15:04:05", "02/01/2024 03:04:05", t0},
		{"2006-01-02 15:04:05 MST", "2024-01-02 03:04:05 UTC", t0},
	} {
		t.Run(tc.format+"/"+tc.value, func(t *testing.T) {
			bs := mustRead(t, "t.csv", "time\n"+tc.value+"\n", Options{Format: CSV, TimeFormat: tc.format})
			equalStrings(t, "rows", allRows(bs), []string{fmt.Sprint(tc.want)})
		})
	}
}

func TestCSVErrors(t *testing.T) {
	var late strings.Builder
	late.WriteString("id,usage\n")
	for i := range sampleRows {
		fmt.Fprintf(&late, "%d,%d.5\n", i, i)
	}
	late.WriteString("1000,abc\n")
	var lateInt strings.Builder
	lateInt.WriteString("n\n")
	for i := range sampleRows {
		fmt.Fprintf(&lateInt, "%d\n", i)
	}
	lateInt.WriteString("1.5\n")

	for _, tc := range []struct {
		name string
		data string
		opts Options
		want string
		is   error
	}{
		{"bare_quote", "a,b\n1,2\nx,ab\"c\n", Options{}, `data.csv:3: column "b": syntax error: bare " in a non-quoted field (quote the whole field and double the quote: "a""b")`, ErrSyntax},
		{"text_after_quote", "a,b\n\"x\"y,2\n", Options{}, `data.csv:2: column "a": syntax error: text after the closing quote of a quoted field (a quote inside a quoted field is written "")`, ErrSyntax},
		{"unterminated_quote_at_eof", "a,b\n1,2\n3,\"abc\ndef\n", Options{}, `data.csv:3: column "b": syntax error: quoted field not closed before the end of the file`, ErrSyntax},
		{"too_many_fields", "a,b\n1,2\n1,2,3\n", Options{}, `data.csv:3: syntax error: the row has more fields than the header's 2`, ErrSyntax},
		{"too_few_fields", "a,b,c\n1,2,3\n\"x\ny\",2\n", Options{}, `data.csv:3: syntax error: the row has 2 fields, the header 3`, ErrSyntax},
		{"value_after_sample", late.String(), Options{}, `data.csv:1002: column "usage": "abc" is not a float64 (the column's type was inferred from the first 1000 rows; set it with --schema usage:string)`, ErrType},
		{"decimal_after_sample_in_int_column", lateInt.String(), Options{}, `data.csv:1002: column "n": "1.5" is not an int64 (the column's type was inferred from the first 1000 rows; set it with --schema n:float64)`, ErrType},
		{"schema_type", "a,b\n1,x\n", Options{Schema: "b:int"}, `data.csv:2: column "b": "x" is not an int64 (the type given by --schema)`, ErrType},
		{"bad_time", "time,v\n2024-01-02T03:04:05Z,1\nyesterday,2\n", Options{}, `data.csv:3: column "time": "yesterday" is not a timestamp (not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)) (the time column; set its format with --time-format)`, ErrType},
		{"bad_date", "time\n2024-02-30\n", Options{}, `data.csv:2: column "time": "2024-02-30" is not a timestamp (not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)) (the time column; set its format with --time-format)`, ErrType},
		{"time_out_of_range", "time\n2300-01-01T00:00:00Z\n", Options{}, `data.csv:2: column "time": "2300-01-01T00:00:00Z" is not a timestamp (outside the range of timestamp[ns], 1677-09-21 to 2262-04-11) (the time column; set its format with --time-format)`, ErrType},
		{"empty_time", "time,v\n,1\n", Options{}, `data.csv:2: column "time": the time is empty (every row needs one; leave the column out to have the server stamp the rows)`, nil},
		{"invalid_utf8", "a\nok\nx\xffy\n", Options{}, `data.csv:3: column "a": "x\xffy" is not a string (not valid UTF-8)`, ErrType},
		{"duplicate_header", "a,b,a\n1,2,3\n", Options{}, `data.csv:1: column "a": schema error: fields 1 and 3 of the header have the same name`, ErrSchema},
		{"empty_header_field", "a,,b\n", Options{}, `data.csv:1: schema error: header field 2 is empty: every column needs a name`, ErrSchema},
		{"empty_file", "", Options{}, `data.csv: schema error: the file is empty: a CSV file needs a header row with the column names`, ErrSchema},
		{"time_and_time_column", "time,ts\n1,2\n", Options{TimeColumn: "ts"}, `data.csv: schema error: the file has a column "time" and --time-column names "ts": both would be the time column; rename or drop one`, ErrSchema},
		{"missing_time_column", "a,b\n1,2\n", Options{TimeColumn: "ts"}, `data.csv: schema error: --time-column "ts": no such column (the columns are "a", "b")`, ErrSchema},
		{"schema_unknown_column", "a,b\n1,2\n", Options{Schema: "c:int"}, `data.csv: schema error: --schema names "c", which is not a column (the columns are "a", "b")`, ErrSchema},
		{"schema_time_not_timestamp", "time\n1\n", Options{Schema: "time:int"}, `data.csv: column "time": schema error: --schema makes the time column an int64; it is always a timestamp (set --time-format to read numbers)`, ErrSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Format = CSV
			_, err := readString(t, "data.csv", tc.data, opts)
			wantError(t, err, tc.want)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error is not %v", tc.is)
			}
		})
	}
}

// TestCSVBatching checks the positions of every batch at BatchRows
// boundaries, with rows that span lines and blank lines in between.
func TestCSVBatching(t *testing.T) {
	data := "a,b\n" + // line 1
		"1,x\n" + // 2
		"2,\"multi\nline\"\n" + // 3-4
		"\n" + // 5 (blank)
		"3,y\n" + // 6
		"4,\"a\n\nb\"\n" + // 7-9
		"5,z\n" // 10
	for _, tc := range []struct {
		batchRows int
		want      []batchDump
	}{
		{1, []batchDump{
			{FirstLine: 2, LastLine: 2, FirstRow: 0, LastRow: 0},
			{FirstLine: 3, LastLine: 4, FirstRow: 1, LastRow: 1},
			{FirstLine: 6, LastLine: 6, FirstRow: 2, LastRow: 2},
			{FirstLine: 7, LastLine: 9, FirstRow: 3, LastRow: 3},
			{FirstLine: 10, LastLine: 10, FirstRow: 4, LastRow: 4},
		}},
		{2, []batchDump{
			{FirstLine: 2, LastLine: 4, FirstRow: 0, LastRow: 1},
			{FirstLine: 6, LastLine: 9, FirstRow: 2, LastRow: 3},
			{FirstLine: 10, LastLine: 10, FirstRow: 4, LastRow: 4},
		}},
		{5, []batchDump{{FirstLine: 2, LastLine: 10, FirstRow: 0, LastRow: 4}}},
		{0, []batchDump{{FirstLine: 2, LastLine: 10, FirstRow: 0, LastRow: 4}}},
	} {
		t.Run(fmt.Sprint(tc.batchRows), func(t *testing.T) {
			bs := mustRead(t, "b.csv", data, Options{Format: CSV, BatchRows: tc.batchRows})
			if len(bs) != len(tc.want) {
				t.Fatalf("%d batches, want %d", len(bs), len(tc.want))
			}
			for i, w := range tc.want {
				g := bs[i]
				if g.FirstLine != w.FirstLine || g.LastLine != w.LastLine || g.FirstRow != w.FirstRow || g.LastRow != w.LastRow {
					t.Errorf("batch %d: lines %d-%d rows %d-%d, want lines %d-%d rows %d-%d", i, g.FirstLine, g.LastLine, g.FirstRow, g.LastRow, w.FirstLine, w.LastLine, w.FirstRow, w.LastRow)
				}
			}
			equalStrings(t, "rows", allRows(bs), []string{`1 "x"`, `2 "multi\nline"`, `3 "y"`, `4 "a\n\nb"`, `5 "z"`})
		})
	}
}

// TestCSVQuotedNewlineLines: an error after rows with quoted newlines is
// reported at its real line, in any batch and any chunk.
func TestCSVQuotedNewlineLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("n,s\n")
	line := 2
	for i := range 3000 {
		if i%3 == 0 {
			fmt.Fprintf(&b, "%d,\"two\nlines\"\n", i)
			line += 2
		} else {
			fmt.Fprintf(&b, "%d,one\n", i)
			line++
		}
	}
	b.WriteString("oops,x\n")
	for _, batchRows := range []int{1, 7, 1000, 0} {
		_, err := readString(t, "q.csv", b.String(), Options{Format: CSV, BatchRows: batchRows})
		wantError(t, err, fmt.Sprintf(`q.csv:%d: column "n": "oops" is not an int64 (the column's type was inferred from the first 1000 rows; set it with --schema n:string)`, line))
	}
}

// TestCSVLarge reads a file of many chunks through the parallel workers
// and checks that the rows come out complete and in order.
func TestCSVLarge(t *testing.T) {
	const rows = 50_000
	data := genCPU(rows, true)
	bs, err := readAll(t, "big.csv", onlyReader{bytes.NewReader(data)}, Options{Format: CSV, BatchRows: 999})
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	for i, b := range bs {
		if b.FirstRow != next || b.FirstLine != next+2 || b.LastLine != b.LastRow+2 {
			t.Fatalf("batch %d: rows %d-%d lines %d-%d, want first row %d", i, b.FirstRow, b.LastRow, b.FirstLine, b.LastLine, next)
		}
		if int64(len(b.Rows)) != b.LastRow-b.FirstRow+1 || (len(b.Rows) != 999 && i != len(bs)-1) {
			t.Fatalf("batch %d has %d rows", i, len(b.Rows))
		}
		for j, r := range b.Rows {
			want := fmt.Sprint(int64(1700000000)*1e9 + (next+int64(j))*1e9)
			if !strings.HasPrefix(r, want+" ") {
				t.Fatalf("batch %d row %d: %s, want time %s", i, j, r, want)
			}
		}
		next = b.LastRow + 1
	}
	if next != rows {
		t.Fatalf("%d rows, want %d", next, rows)
	}
}

// TestCSVLongRow: a quote that is never closed makes the splitter give up
// at maxRowBytes; the error is where the quote opened.
func TestCSVLongRow(t *testing.T) {
	data := "a,b\n1,2\n3,\"" + strings.Repeat("x\n", 100) + "end\n"
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c, err := newConfig("long.csv", Options{Format: CSV, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := openCSVLimit(c, strings.NewReader(data), ',', 64)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err := rd.Next()
	if err == nil {
		b.Record.Release()
		_, err = rd.Next()
	}
	wantError(t, err, `long.csv:3: column "b": syntax error: quoted field not closed within 64 MiB`)

	// A line that never ends (no newline at all) is no row either.
	rd, err = openCSVLimit(c, strings.NewReader("a,b\n1,2\n"+strings.Repeat("x", 200)), ',', 64)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err = rd.Next()
	if err == nil {
		b.Record.Release()
		_, err = rd.Next()
	}
	wantError(t, err, `long.csv:3: column "a": syntax error: a row longer than 64 MiB (is the file CSV, with LF or CRLF line ends?)`)
}

// TestCSVClose closes readers after 0, 1 and 2 batches of a file of
// many: no goroutine (goleak in TestMain) and no Arrow buffer may remain.
func TestCSVClose(t *testing.T) {
	data := genCPU(20_000, false)
	for _, after := range []int{0, 1, 2} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rd, err := Open("c.csv", bytes.NewReader(data), int64(len(data)), Options{Format: CSV, BatchRows: 100, Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			for range after {
				b, err := rd.Next()
				if err != nil {
					t.Fatal(err)
				}
				b.Record.Release()
			}
			// Let the pipeline fill up behind the reader.
			time.Sleep(20 * time.Millisecond)
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rd.Close(); err != nil {
				t.Fatal("second Close:", err)
			}
			if _, err := rd.Next(); err == nil {
				t.Fatal("Next after Close succeeded")
			}
		})
	}
	// And after an error: the workers are still parsing later chunks.
	bad := append(bytes.Clone(data[:len(data)/2]), []byte("\n\"oops\n")...)
	bad = append(bad, data[len(data)/2:]...)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rd, err := Open("c.csv", bytes.NewReader(bad), -1, Options{Format: CSV, BatchRows: 100, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				t.Fatal("no error")
			}
			break
		}
		b.Record.Release()
	}
	rd.Close()
	runtime.GC()
}

func TestBytesRead(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		data []byte
	}{{CSV, genCPU(30_000, true)}, {JSONL, genJSONL(30_000)}, {LineProtocol, genLP(30_000)}} {
		rd, err := Open("p", bytes.NewReader(tc.data), int64(len(tc.data)), Options{Format: tc.f, BatchRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for {
			b, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b.Record.Release()
			n := rd.BytesRead()
			if n < last || n == 0 {
				t.Fatalf("%s: BytesRead %d after %d", tc.f, n, last)
			}
			last = n
		}
		if last != int64(len(tc.data)) || last == 0 {
			t.Errorf("%s: BytesRead %d at the end, want %d", tc.f, last, len(tc.data))
		}
		rd.Close()
	}
}

// TestCloseEarly closes JSONL, line-protocol, Parquet and Arrow readers
// in the middle: nothing may leak.
func TestCloseEarly(t *testing.T) {
	mem0 := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rec := testRecord(t, mem0, arrow.PrimitiveTypes.Int64, "time")
	pq, ar := writeParquet(t, rec), writeIPC(t, rec, false)
	rec.Release()
	mem0.AssertSize(t, 0)
	for _, tc := range []struct {
		f    Format
		data []byte
	}{{JSONL, genJSONL(5000)}, {LineProtocol, genLP(5000)}, {Parquet, pq}, {Arrow, ar}, {CSV, []byte("a\n1\n2\n3\n")}} {
		t.Run(string(tc.f), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rd, err := Open("x", onlyReader{bytes.NewReader(tc.data)}, -1, Options{Format: tc.f, BatchRows: 2, Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			b, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			b.Record.Release()
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCSVHeaderOnly(t *testing.T) {
	for _, data := range []string{"a,b\n", "a,b", "a,b\r\n\n\n"} {
		bs, err := readString(t, "h.csv", data, Options{Format: CSV})
		if err != nil || len(bs) != 0 {
			t.Errorf("%q: %v, %d batches", data, err, len(bs))
		}
	}
}

// TestCSVStringGrowth: strings after the sample longer than its average,
// and nulls that first appear in the middle of a chunk, make a chunk's
// string column grow its data and start its validity in place; every
// value must come out as written, in batches of any size.
func TestCSVStringGrowth(t *testing.T) {
	var data strings.Builder
	var want []string
	data.WriteString("k,s\n")
	for i := range 3000 {
		var s string
		switch {
		case i < sampleRows:
			s = "a"
		case i%7 == 0:
			s = "" // null
		default:
			s = strings.Repeat(string(rune('b'+i%20)), 1+i%300)
		}
		fmt.Fprintf(&data, "%d,%s\n", i, s)
		if s == "" {
			want = append(want, fmt.Sprintf("%d null", i))
		} else {
			want = append(want, fmt.Sprintf("%d %q", i, s))
		}
	}
	for _, batch := range []int{2500, 3000, 64 << 10} {
		bs := mustRead(t, "grow.csv", data.String(), Options{Format: CSV, BatchRows: batch})
		equalStrings(t, fmt.Sprintf("rows in batches of %d", batch), allRows(bs), want)
	}
}

// TestCSVDictionaryStrings: with Options.DictionaryStrings, string
// columns whose sample repeats values come out dictionary-encoded, the
// others as utf8; every value comes out as written, values first seen
// after the sample, long ones (the dictionary's data grows) and nulls
// first seen in the middle of a chunk included, in batches of any size.
func TestCSVDictionaryStrings(t *testing.T) {
	var data strings.Builder
	data.WriteString("time,host,id,note\n")
	type row struct{ host, id, note string }
	var rows []row
	for i := range 3000 {
		r := row{host: fmt.Sprintf("host-%d", i%20), id: fmt.Sprintf("id-%d", i), note: "a"}
		if i >= sampleRows {
			r.host = fmt.Sprintf("host-%d", i%37)
			r.note = strings.Repeat(string(rune('b'+i%20)), 1+i%300)
			if i > 1500 && i%11 == 0 {
				r.host = "" // null
			}
		}
		fmt.Fprintf(&data, "2026-01-01T00:00:%02d.%06dZ,%s,%s,%s\n", i%60, i, r.host, r.id, r.note)
		rows = append(rows, r)
	}
	const dictT = "dictionary<values=utf8, indices=int32, ordered=false>"
	for _, dict := range []bool{false, true} {
		// A dictionary cell prints as its value's text, a utf8 one quoted.
		show := func(v string, encoded bool) string {
			switch {
			case v == "":
				return "null"
			case encoded:
				return v
			}
			return strconv.Quote(v)
		}
		var want []string
		for i, r := range rows {
			want = append(want, fmt.Sprintf("%d %s %s %s", time.Date(2026, 1, 1, 0, 0, i%60, i*1000, time.UTC).UnixNano(),
				show(r.host, dict), show(r.id, false), show(r.note, dict)))
		}
		wantSchema := "time:timestamp[ns, tz=UTC],host:utf8,id:utf8,note:utf8"
		if dict {
			wantSchema = "time:timestamp[ns, tz=UTC],host:" + dictT + ",id:utf8,note:" + dictT
		}
		for _, batch := range []int{700, 2500, 64 << 10} {
			bs := mustRead(t, "dict.csv", data.String(), Options{Format: CSV, BatchRows: batch, DictionaryStrings: dict})
			what := fmt.Sprintf("dictionary strings %v, batches of %d", dict, batch)
			for _, b := range bs {
				if b.Schema != wantSchema {
					t.Fatalf("%s: schema %s, want %s", what, b.Schema, wantSchema)
				}
			}
			equalStrings(t, what, allRows(bs), want)
		}
	}
}
