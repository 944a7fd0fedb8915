package loadgen

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func TestReportFormat(t *testing.T) {
	for _, tc := range []struct {
		path, format, want string
		fails              bool
	}{
		{"out.csv", "", FormatCSV, false},
		{"out.JSON", "", FormatJSON, false},
		{"out.jsonl", "", FormatJSONL, false},
		{"out.ndjson", "", FormatJSONL, false},
		{"out.txt", "", FormatCSV, false},
		{"out", "", FormatCSV, false},
		{"out.csv", "json", FormatJSON, false},
		{"out.json", " CSV ", FormatCSV, false},
		{"out.csv", "xml", "", true},
	} {
		got, err := ReportFormat(tc.path, tc.format)
		if (err != nil) != tc.fails || got != tc.want {
			t.Errorf("ReportFormat(%q, %q) = %q, %v; want %q, error %v", tc.path, tc.format, got, err, tc.want, tc.fails)
		}
	}
}

// testRows are two interval rows and a total, from known counters.
func testRows() []Row {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var a, b counters
	for i := 1; i <= 100; i++ {
		a.hist.Record(time.Duration(i) * time.Millisecond)
	}
	a.rows, a.bytes = 100_000, 5_000_000
	b.errors = 3
	b.addCode(codes.Unavailable, 2)
	b.addCode(codes.Internal, 1)
	var total counters
	total.merge(&a)
	total.merge(&b)
	return []Row{
		newRow(ScopeInterval, KindWrite, start, start, 2*time.Second, &a),
		newRow(ScopeInterval, KindWrite, start.Add(2*time.Second), start, 2*time.Second, &b),
		newRow(ScopeTotal, KindWrite, start, start, 4*time.Second, &total),
	}
}

func TestRowValues(t *testing.T) {
	rows := testRows()
	r := rows[0]
	if r.Count != 100 || r.Rows != 100_000 || r.Bytes != 5_000_000 || r.ElapsedS != 2 || r.IntervalS != 2 {
		t.Errorf("row %+v", r)
	}
	if r.OpsPerS != 50 || r.RowsPerS != 50_000 || r.MBPerS != 2.5 {
		t.Errorf("rates %v ops/s %v rows/s %v MB/s, want 50, 50000, 2.5", r.OpsPerS, r.RowsPerS, r.MBPerS)
	}
	if r.P50ms < 49.8 || r.P50ms > 50.2 || r.P99ms < 98.6 || r.P99ms > 99.4 || r.MaxMs != 100 {
		t.Errorf("p50 %v p99 %v max %v, want ~50, ~99, 100", r.P50ms, r.P99ms, r.MaxMs)
	}
	if e := rows[1]; e.Errors != 3 || e.ErrorCodes != "INTERNAL=1;UNAVAILABLE=2" || e.Count != 0 || e.P99ms != 0 || e.ElapsedS != 4 {
		t.Errorf("error row %+v", e)
	}
	if tot := rows[2]; tot.Scope != ScopeTotal || tot.Count != 100 || tot.Errors != 3 || tot.RowsPerS != 25_000 {
		t.Errorf("total row %+v", tot)
	}
}

func TestCSVSink(t *testing.T) {
	var buf bytes.Buffer
	s, err := NewSink(&buf, FormatCSV)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range testRows() {
		if err := s.WriteRow(r); err != nil {
			t.Fatal(err)
		}
	}
	// Rows are on the writer before Close: a run cut short keeps them.
	if n := strings.Count(buf.String(), "\n"); n != 4 {
		t.Errorf("before Close: %d lines, want 4:\n%s", n, buf.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != "scope,interval_start,elapsed_s,interval_s,kind,count,rows,bytes,ops_per_s,rows_per_s,mb_per_s,p50_ms,p90_ms,p99_ms,max_ms,errors,error_codes" {
		t.Errorf("header %q", recs[0])
	}
	want := [][]string{
		{"interval", "2026-12-01T10:00:00Z", "2", "2", "write", "100", "100000", "5000000", "50", "50000", "2.5"},
		{"interval", "2026-12-01T10:00:02Z", "4", "2", "write", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "3", "INTERNAL=1;UNAVAILABLE=2"},
		{"total", "2026-12-01T10:00:00Z", "4", "4", "write", "100", "100000", "5000000", "25", "25000", "1.25"},
	}
	for i, w := range want {
		got := recs[i+1]
		if len(got) != len(recs[0]) {
			t.Fatalf("row %d has %d fields, header %d", i, len(got), len(recs[0]))
		}
		for j, v := range w {
			if got[j] != v {
				t.Errorf("row %d column %s = %q, want %q", i, recs[0][j], got[j], v)
			}
		}
	}
	if recs[1][14] != "100" || recs[1][15] != "0" || recs[1][16] != "" {
		t.Errorf("row 0 max/errors/codes %q", recs[1][14:])
	}
}

func TestJSONSinks(t *testing.T) {
	for _, format := range []string{FormatJSON, FormatJSONL} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			s, err := NewSink(&buf, format)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range testRows() {
				if err := s.WriteRow(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			if format == FormatJSON {
				if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
					t.Fatalf("%v:\n%s", err, buf.String())
				}
			} else {
				for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Fatalf("line %q: %v", line, err)
					}
					got = append(got, m)
				}
			}
			if len(got) != 3 {
				t.Fatalf("%d rows, want 3", len(got))
			}
			for _, col := range csvColumns {
				if _, ok := got[0][col]; !ok {
					t.Errorf("no field %q in %v", col, got[0])
				}
			}
			if got[0]["kind"] != "write" || got[0]["count"] != 100.0 || got[0]["max_ms"] != 100.0 || got[0]["interval_start"] != "2026-12-01T10:00:00Z" {
				t.Errorf("row 0 %v", got[0])
			}
			if got[1]["errors"] != 3.0 || got[1]["error_codes"] != "INTERNAL=1;UNAVAILABLE=2" || got[2]["scope"] != "total" {
				t.Errorf("rows 1, 2: %v %v", got[1], got[2])
			}
		})
	}
	// An empty JSON report is an empty array, not null.
	var buf bytes.Buffer
	s, _ := NewSink(&buf, FormatJSON)
	s.Close()
	if strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("empty JSON report %q", buf.String())
	}
}

func TestSummaryTable(t *testing.T) {
	rows := testRows()
	sum := &Summary{Start: rows[0].IntervalStart, Elapsed: 4 * time.Second, Kinds: []KindSummary{
		{Row: rows[2], Write: true, FirstErrors: map[string]string{"UNAVAILABLE": "connection\nrefused", "INTERNAL": "boom"}},
		{Row: Row{Kind: "aggregate", Count: 12345, OpsPerS: 3086.31, P50ms: 0.5, P90ms: 1, P99ms: 12.5, MaxMs: 1500}},
	}}
	var buf bytes.Buffer
	if err := sum.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	if len(lines) < 4 {
		t.Fatalf("table:\n%s", out)
	}
	// Aligned: every line of the table is as long as the header, and the
	// numbers end where their header does.
	head, w, agg := lines[1], lines[2], lines[3]
	if len(w) != len(head) || len(agg) != len(head) {
		t.Errorf("lines of %d, %d, %d bytes, want aligned:\n%s", len(head), len(w), len(agg), out)
	}
	if !strings.HasPrefix(w, "write ") || !strings.HasPrefix(agg, "aggregate ") || !strings.HasSuffix(agg, " 0") || !strings.HasSuffix(w, " 3") {
		t.Errorf("rows:\n%s", out)
	}
	for _, want := range []string{"4.00s from 2026-12-01T10:00:00Z", "12345", "3086.3", "1.50s", "12.5ms", "0.500ms",
		"write errors: INTERNAL=1;UNAVAILABLE=2", "first INTERNAL: boom", "first UNAVAILABLE: connection refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if sum.Errors() != 3 || sum.Kind("aggregate").Count != 12345 || sum.Kind("nope") != nil {
		t.Errorf("Errors %d, Kind lookups wrong", sum.Errors())
	}
}

func TestProgressLine(t *testing.T) {
	rows := testRows()
	var buf bytes.Buffer
	writeProgress(&buf, rows[0], true)
	writeProgress(&buf, rows[1], false)
	out := buf.String()
	for _, want := range []string{"[   2.0s] write", "50.0k rows/s", "2.5 MB/s", "100 batches", "max 100ms",
		"[   4.0s] write", "0.0 q/s", "errors 3 (INTERNAL=1;UNAVAILABLE=2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
