package input

import (
	"errors"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		want       Format
		err        string
	}{
		{"a.csv", "", CSV, ""},
		{"A.CSV", "", CSV, ""},
		{"a.tsv", "", TSV, ""},
		{"a.jsonl", "", JSONL, ""},
		{"a.ndjson", "", JSONL, ""},
		{"a.json", "", JSONL, ""},
		{"a.lp", "", LineProtocol, ""},
		{"a.parquet", "", Parquet, ""},
		{"a.arrow", "", Arrow, ""},
		{"a.arrows", "", Arrow, ""},
		{"a.feather", "", Arrow, ""},
		{"a.ipc", "", Arrow, ""},
		{"-", "PAR1\x15\x04", Parquet, ""},
		{"-", "ARROW1\x00\x00", Arrow, ""},
		{"-", "\xff\xff\xff\xff\x10\x00", Arrow, ""},
		{"-", "  {\"a\":1}\n", JSONL, ""},
		{"data.txt", "# comment\n\ncpu,host=a usage=1 1700000000\ncpu,host=a usa", LineProtocol, ""},
		{"-", "cpu usage=1i\n", LineProtocol, ""},
		{"-", "time,host,usage\n2024-01-01T00:00:00Z,a,1\n", CSV, ""},
		{"-", "\xEF\xBB\xBFa,b\n1,2\n", CSV, ""},
		{"-", "value\n1\n", CSV, ""},
		{"-", "a\tb\n1\t2\n", TSV, ""},
		{"x", "a b c\n", CSV, ""},
		{"-", "", "", `unknown format: - is empty, its format cannot be told; pass --format csv|tsv|jsonl|lp|parquet|arrow`},
		{"-", "[{\"a\":1}]", "", `unknown format: - holds a JSON array; write one object per line (JSON Lines), e.g. jq -c '.[]' - | apron write … --format jsonl -`},
		{"d.csv.gz", "", "", `unknown format: d.csv.gz is compressed (.gz); decompress it first, e.g. zcat d.csv.gz | apron write … --format csv -`},
		{"-", "\x1f\x8b\x08", "", `unknown format: - is compressed (gzip or zstd); decompress it first, e.g. zcat - | apron write … -`},
		{"-", "ab\x00cd", "", `unknown format: - looks binary and is none of Parquet or Arrow; pass --format`},
	} {
		got, err := Detect(tc.name, []byte(tc.head))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || !errors.Is(err, ErrFormat) {
				t.Errorf("Detect(%q, %q): %v, want error %q", tc.name, tc.head, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Detect(%q, %q) = %q, %v; want %q", tc.name, tc.head, got, err, tc.want)
		}
	}
}

func TestParseSchema(t *testing.T) {
	got, err := ParseSchema(" host:str , usage:Double,n:INT,u:uint,ok:boolean,t:datetime,a:b:text,")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Kind{"host": KindString, "usage": KindFloat64, "n": KindInt64, "u": KindUint64, "ok": KindBool, "t": KindTimestamp, "a:b": KindString}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	for _, bad := range []string{"host", "host:decimal", ":int", "a:int,a:str"} {
		if _, err := ParseSchema(bad); !errors.Is(err, ErrSchema) {
			t.Errorf("ParseSchema(%q): %v", bad, err)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	if err := (Options{Format: LineProtocol, Precision: "ms", TimeFormat: "2006-01-02"}).Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	for _, tc := range []struct {
		opts Options
		is   error
	}{
		{Options{}, ErrFormat},
		{Options{Format: "xml"}, ErrFormat},
		{Options{Format: CSV, TimeFormat: "secs"}, ErrSchema},
		{Options{Format: CSV, Schema: "a:decimal"}, ErrSchema},
		{Options{Format: CSV, BatchRows: -1}, nil},
	} {
		_, err := Open("x", nil, 0, tc.opts)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Open(%+v): %v", tc.opts, err)
		}
		if err := tc.opts.Validate(); err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Validate(%+v): %v", tc.opts, err)
		}
	}
}
