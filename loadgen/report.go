package loadgen

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Row is what a report holds of one kind over one interval (Scope
// "interval") or over the whole run (Scope "total").
type Row struct {
	Scope         string    `json:"scope"`
	IntervalStart time.Time `json:"interval_start"`
	// ElapsedS is the end of the span, in seconds since the run started;
	// IntervalS its length.
	ElapsedS  float64 `json:"elapsed_s"`
	IntervalS float64 `json:"interval_s"`
	Kind      string  `json:"kind"`
	// Count is the operations that succeeded: batches acknowledged, or
	// queries read to the end.
	Count int64 `json:"count"`
	// Rows and Bytes are those written (Arrow IPC bytes sent) or read
	// (Arrow bytes of the result batches).
	Rows     int64   `json:"rows"`
	Bytes    int64   `json:"bytes"`
	OpsPerS  float64 `json:"ops_per_s"`
	RowsPerS float64 `json:"rows_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	// The latency quantiles and maximum, in milliseconds, of the
	// operations that succeeded.
	P50ms  float64 `json:"p50_ms"`
	P90ms  float64 `json:"p90_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
	// ErrorCodes is the errors by gRPC code: "UNAVAILABLE=2;INTERNAL=1".
	ErrorCodes string `json:"error_codes"`
}

// Scopes of a Row.
const (
	ScopeInterval = "interval"
	ScopeTotal    = "total"
)

func newRow(scope, kind string, start, runStart time.Time, span time.Duration, c *counters) Row {
	secs := span.Seconds()
	r := Row{
		Scope: scope, IntervalStart: start.UTC(), Kind: kind,
		ElapsedS:  start.Add(span).Sub(runStart).Seconds(),
		IntervalS: secs,
		Count:     int64(c.hist.Count()), Rows: c.rows, Bytes: c.bytes,
		P50ms: ms(c.hist.Quantile(0.50)), P90ms: ms(c.hist.Quantile(0.90)),
		P99ms: ms(c.hist.Quantile(0.99)), MaxMs: ms(c.hist.Max()),
		Errors: c.errors, ErrorCodes: formatCodes(c.codes),
	}
	if secs > 0 {
		r.OpsPerS = float64(r.Count) / secs
		r.RowsPerS = float64(r.Rows) / secs
		r.MBPerS = float64(r.Bytes) / 1e6 / secs
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Report formats.
const (
	FormatCSV   = "csv"
	FormatJSON  = "json"
	FormatJSONL = "jsonl"
)

// ReportFormat is format if given, else the one of path's extension
// (.json, .jsonl or .ndjson, else csv).
func ReportFormat(path, format string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(format)); f {
	case FormatCSV, FormatJSON, FormatJSONL:
		return f, nil
	case "":
	default:
		return "", fmt.Errorf("report format %q: want csv, json or jsonl", format)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return FormatJSON, nil
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	}
	return FormatCSV, nil
}

// Sink takes the rows of a run as they come: every interval's, then the
// totals.
type Sink interface {
	WriteRow(Row) error
	// Close writes what is left; it does not close the underlying writer.
	Close() error
}

// NewSink writes rows to w in format: csv (a header, then one line a row,
// flushed each row so that a run cut short leaves its rows so far), jsonl
// (one object a line, likewise) or json (one array of objects, written by
// Close).
func NewSink(w io.Writer, format string) (Sink, error) {
	switch format {
	case FormatCSV:
		return &csvSink{w: csv.NewWriter(w)}, nil
	case FormatJSON:
		return &jsonSink{w: w}, nil
	case FormatJSONL:
		return &jsonlSink{w: bufio.NewWriter(w)}, nil
	}
	return nil, fmt.Errorf("report format %q: want csv, json or jsonl", format)
}

// csvColumns are the CSV header, in Row's field order.
var csvColumns = []string{"scope", "interval_start", "elapsed_s", "interval_s", "kind", "count", "rows", "bytes",
	"ops_per_s", "rows_per_s", "mb_per_s", "p50_ms", "p90_ms", "p99_ms", "max_ms", "errors", "error_codes"}

type csvSink struct {
	w      *csv.Writer
	headed bool
}

func (s *csvSink) WriteRow(r Row) error {
	if !s.headed {
		s.headed = true
		if err := s.w.Write(csvColumns); err != nil {
			return err
		}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	rec := []string{r.Scope, r.IntervalStart.Format(time.RFC3339Nano), f(round(r.ElapsedS, 3)), f(round(r.IntervalS, 3)), r.Kind,
		i(r.Count), i(r.Rows), i(r.Bytes), f(round(r.OpsPerS, 3)), f(round(r.RowsPerS, 1)), f(round(r.MBPerS, 3)),
		f(round(r.P50ms, 3)), f(round(r.P90ms, 3)), f(round(r.P99ms, 3)), f(round(r.MaxMs, 3)), i(r.Errors), r.ErrorCodes}
	if err := s.w.Write(rec); err != nil {
		return err
	}
	s.w.Flush()
	return s.w.Error()
}

func (s *csvSink) Close() error {
	s.w.Flush()
	return s.w.Error()
}

type jsonlSink struct{ w *bufio.Writer }

func (s *jsonlSink) WriteRow(r Row) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	s.w.Write(b)
	s.w.WriteByte('\n')
	return s.w.Flush()
}

func (s *jsonlSink) Close() error { return s.w.Flush() }

type jsonSink struct {
	w    io.Writer
	rows []Row
}

func (s *jsonSink) WriteRow(r Row) error {
	s.rows = append(s.rows, r)
	return nil
}

func (s *jsonSink) Close() error {
	if s.rows == nil {
		s.rows = []Row{}
	}
	b, err := json.MarshalIndent(s.rows, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// writeProgress writes r as one line (on stderr, while the run goes on).
func writeProgress(w io.Writer, r Row, isWrite bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "[%6.1fs] %-10s ", r.ElapsedS, r.Kind)
	if isWrite {
		fmt.Fprintf(&b, "%11s rows/s %8.1f MB/s %8s batches", humanCount(r.RowsPerS), r.MBPerS, humanCount(float64(r.Count)))
	} else {
		fmt.Fprintf(&b, "%9.1f q/s %11s rows/s %6s queries", r.OpsPerS, humanCount(r.RowsPerS), humanCount(float64(r.Count)))
	}
	if r.Count > 0 {
		if isWrite {
			b.WriteString("  ack")
		}
		fmt.Fprintf(&b, " p50 %s p90 %s p99 %s max %s", msString(r.P50ms), msString(r.P90ms), msString(r.P99ms), msString(r.MaxMs))
	}
	if r.Errors > 0 {
		fmt.Fprintf(&b, "  errors %d (%s)", r.Errors, r.ErrorCodes)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// msString is a latency for people: 0.412ms, 12.3ms, 1.52s.
func msString(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.3fms", v)
	}
}

// humanCount is a count for people: 987, 12.3k, 4.56M.
func humanCount(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}
