package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary is what a run did, kind by kind, over its whole length.
type Summary struct {
	Start time.Time
	// Elapsed is from the start until the last worker stopped (the drain
	// of the writers' last acknowledgements included): the rates are per
	// second of it.
	Elapsed time.Duration
	Kinds   []KindSummary
}

// KindSummary is one kind's totals.
type KindSummary struct {
	Row
	// Write tells the writers' kind from the queries'.
	Write bool
	Mean  time.Duration
	// FirstErrors is the first message seen of each error code, by code
	// name.
	FirstErrors map[string]string
}

// Kind is the summary of kind name, or nil.
func (s *Summary) Kind(name string) *KindSummary {
	for i := range s.Kinds {
		if s.Kinds[i].Kind == name {
			return &s.Kinds[i]
		}
	}
	return nil
}

// Errors is the number of failed operations of every kind.
func (s *Summary) Errors() int64 {
	var n int64
	for _, k := range s.Kinds {
		n += k.Errors
	}
	return n
}

func newKindSummary(k *kindStats, write bool, start time.Time, elapsed time.Duration, total *counters) KindSummary {
	ks := KindSummary{Row: newRow(ScopeTotal, k.name, start, start, elapsed, total), Write: write, Mean: total.hist.Mean()}
	for c, m := range k.firstErrors() {
		if ks.FirstErrors == nil {
			ks.FirstErrors = map[string]string{}
		}
		ks.FirstErrors[CodeName(c)] = m
	}
	return ks
}

// WriteTable writes s as an aligned table, one line a kind, then the
// first message of each error code seen.
func (s *Summary) WriteTable(w io.Writer) error {
	cells := [][]string{{"kind", "count", "ops/s", "rows", "rows/s", "MB/s", "p50", "p90", "p99", "max", "errors"}}
	for _, k := range s.Kinds {
		lat := []string{"-", "-", "-", "-"}
		if k.Count > 0 {
			lat = []string{msString(k.P50ms), msString(k.P90ms), msString(k.P99ms), msString(k.MaxMs)}
		}
		cells = append(cells, append(append([]string{k.Kind,
			fmt.Sprint(k.Count), fmt.Sprintf("%.1f", k.OpsPerS),
			fmt.Sprint(k.Rows), humanCount(k.RowsPerS), fmt.Sprintf("%.1f", k.MBPerS)},
			lat...), fmt.Sprint(k.Errors)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.2fs from %s\n", s.Elapsed.Seconds(), s.Start.UTC().Format(time.RFC3339))
	writeAligned(&b, cells)
	for _, k := range s.Kinds {
		if k.Errors == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s errors: %s\n", k.Kind, k.ErrorCodes)
		names := make([]string, 0, len(k.FirstErrors))
		for n := range k.FirstErrors {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "  first %s: %s\n", n, oneLine(k.FirstErrors[n], 300))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeAligned writes cells as columns two spaces apart: the first
// column left-aligned, the numbers right-aligned.
func writeAligned(b *strings.Builder, cells [][]string) {
	widths := make([]int, len(cells[0]))
	for _, row := range cells {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range cells {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-len(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
