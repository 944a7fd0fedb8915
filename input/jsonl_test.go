package input

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestJSONL(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		opts Options
		want []batchDump // Schema and Rows only, plus lines
	}{
		{
			name: "types",
			data: `{"time":"2024-01-02T03:04:05Z","host":"a","usage":1,"ratio":1,"ok":true,"tags":{"x":[1,2]},"none":null}` + "\n" +
				`{"time":1704164646,"host":"b\"\u00e9\n","usage":2,"ratio":0.5,"ok":false,"tags":[],"none":null}` + "\n",
			want: []batchDump{{
				Schema: tsSchema + ",host:utf8,usage:int64,ratio:float64,ok:bool,tags:utf8,none:utf8",
				Rows: []string{
					`1704164645000000000 "a" 1 1 true "{\"x\":[1,2]}" null`,
					`1704164646000000000 "b\"é\n" 2 0.5 false "[]" null`,
				},
				FirstLine: 1, LastLine: 2, FirstRow: 0, LastRow: 1,
			}},
		},
		{
			name: "missing_keys_are_null_and_blank_lines_skipped",
			data: "\n" + `{"a":1}` + "\n  \n" + `{"b":"x"}` + "\n\r\n" + `{}` + "\n",
			want: []batchDump{{
				Schema: "a:int64,b:utf8",
				Rows:   []string{`1 null`, `null "x"`, `null null`},
				// Lines 2, 4 and 6 hold the objects.
				FirstLine: 2, LastLine: 6, FirstRow: 0, LastRow: 2,
			}},
		},
		{
			name: "mixed_values_are_strings",
			data: `{"v":1,"w":true}` + "\n" + `{"v":"x","w":2.5}` + "\n",
			want: []batchDump{{Schema: "v:utf8,w:utf8", Rows: []string{`"1" "true"`, `"x" "2.5"`}, FirstLine: 1, LastLine: 2, LastRow: 1}},
		},
		{
			name: "schema_override_and_time_column",
			data: `{"ts":1704164645000,"v":1,"s":"3"}` + "\n",
			opts: Options{TimeColumn: "ts", TimeFormat: "ms", Schema: "v:float,s:int"},
			want: []batchDump{{Schema: tsSchema + ",v:float64,s:int64", Rows: []string{`1704164645000000000 1 3`}, FirstLine: 1, LastLine: 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Format = JSONL
			bs := mustRead(t, "d.jsonl", tc.data, opts)
			if len(bs) != len(tc.want) {
				t.Fatalf("%d batches, want %d: %+v", len(bs), len(tc.want), bs)
			}
			for i, w := range tc.want {
				g := bs[i]
				if g.Schema != w.Schema {
					t.Errorf("batch %d schema %s, want %s", i, g.Schema, w.Schema)
				}
				equalStrings(t, "rows", g.Rows, w.Rows)
				if g.FirstLine != w.FirstLine || g.LastLine != w.LastLine || g.FirstRow != w.FirstRow || g.LastRow != w.LastRow {
					t.Errorf("batch %d: lines %d-%d rows %d-%d, want %d-%d %d-%d", i, g.FirstLine, g.LastLine, g.FirstRow, g.LastRow, w.FirstLine, w.LastLine, w.FirstRow, w.LastRow)
				}
			}
		})
	}
}

// TestJSONLNewKey: a key first seen after the sample closes the batch in
// progress; the next batch has the wider schema, and the late numeric
// column is a float64.
func TestJSONLNewKey(t *testing.T) {
	var b strings.Builder
	for i := range sampleRows + 2 {
		fmt.Fprintf(&b, `{"a":%d}`+"\n", i)
	}
	b.WriteString(`{"a":1,"late":2}` + "\n")
	b.WriteString(`{"a":2,"late":2.5}` + "\n")
	b.WriteString(`{"a":3}` + "\n")
	bs := mustRead(t, "n.jsonl", b.String(), Options{Format: JSONL, BatchRows: 600})
	var got []string
	for _, x := range bs {
		got = append(got, fmt.Sprintf("%s rows %d-%d lines %d-%d", x.Schema, x.FirstRow, x.LastRow, x.FirstLine, x.LastLine))
	}
	equalStrings(t, "batches", got, []string{
		"a:int64 rows 0-599 lines 1-600",
		"a:int64 rows 600-1001 lines 601-1002",
		"a:int64,late:float64 rows 1002-1004 lines 1003-1005",
	})
	equalStrings(t, "last rows", bs[2].Rows, []string{"1 2", "2 2.5", "3 null"})
}

func TestJSONLErrors(t *testing.T) {
	var late strings.Builder
	for i := range sampleRows {
		fmt.Fprintf(&late, `{"n":%d}`+"\n", i)
	}
	late.WriteString(`{"n":1.5}` + "\n")
	for _, tc := range []struct {
		name, data string
		opts       Options
		want       string
		is         error
	}{
		{"bad_json", `{"a":1}` + "\n" + `{"a":1,}` + "\n", Options{}, `d.jsonl:2: syntax error: invalid JSON at byte 8: expected a key in quotes`, ErrSyntax},
		{"bad_value", `{"a":1}` + "\n" + `{"a":tru}` + "\n", Options{}, `d.jsonl:2: column "a": syntax error: invalid JSON at byte 6: expected a value`, ErrSyntax},
		{"unclosed_string", `{"a":"x}`, Options{}, `d.jsonl:1: column "a": syntax error: invalid JSON at byte 9: the string is not closed`, ErrSyntax},
		{"not_an_object", `[1,2]`, Options{}, `d.jsonl:1: syntax error: invalid JSON at byte 1: a line must hold one JSON object, not an array (JSON Lines: one object per line)`, ErrSyntax},
		{"trailing_text", `{"a":1} x`, Options{}, `d.jsonl:1: syntax error: invalid JSON at byte 9: text after the object (one object per line)`, ErrSyntax},
		{"bad_number", `{"a":01}`, Options{}, `d.jsonl:1: column "a": syntax error: invalid JSON at byte 7: expected ',' or '}' after the value`, ErrSyntax},
		{"bad_nested", `{"a":{"b":}}`, Options{}, `d.jsonl:1: column "a": syntax error: invalid JSON at byte 6: invalid nested value`, ErrSyntax},
		{"duplicate_key", `{"a":1,"a":2}`, Options{}, `d.jsonl:1: column "a": syntax error: the key appears twice in the object`, ErrSyntax},
		{"type_after_sample", late.String(), Options{}, `d.jsonl:1001: column "n": "1.5" is not an int64 (the column's type was inferred from the first 1000 rows; set it with --schema n:float64)`, ErrType},
		{"nested_in_number_column", `{"a":1}` + "\n" + `{"a":{}}`, Options{Schema: "a:int"}, `d.jsonl:2: column "a": type mismatch: an object or array is not an int64 (the type given by --schema)`, ErrType},
		{"missing_time", `{"time":"2024-01-02","v":1}` + "\n" + `{"v":2}`, Options{}, `d.jsonl:2: column "time": the time is empty (every row needs one; leave the column out to have the server stamp the rows)`, nil},
		{"null_time", `{"time":null}`, Options{}, `d.jsonl:1: column "time": the time is empty (every row needs one; leave the column out to have the server stamp the rows)`, nil},
		{"bad_time", `{"time":"soon"}`, Options{}, `d.jsonl:1: column "time": "soon" is not a timestamp (not an RFC 3339 / ISO 8601 time (e.g. 2024-01-02T03:04:05Z)) (the time column; set its format with --time-format)`, ErrType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Format = JSONL
			_, err := readString(t, "d.jsonl", tc.data, opts)
			wantError(t, err, tc.want)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error is not %v", tc.is)
			}
		})
	}
}
