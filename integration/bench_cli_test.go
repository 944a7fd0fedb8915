package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apron-db/apron/loadgen"
)

// benchRun is one `apron bench` run: what it printed and reported.
type benchRun struct {
	stdout, stderr string
	code           int
	intervals      []loadgen.Row
	totals         map[string]loadgen.Row // by kind
}

// runBench runs `apron bench args… --host addr --report FILE.json` and
// decodes the report.
func runBench(t *testing.T, addr string, args ...string) *benchRun {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	args = append(append([]string{"bench"}, args...), "--host", addr, "--report", report)
	cmd := exec.Command(apronBin, args...)
	cmd.Env = benchEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := &benchRun{stdout: stdout.String(), stderr: stderr.String(), totals: map[string]loadgen.Row{}}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("apron %s: %v", strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		return r // no report: the run did not start
	}
	var rows []loadgen.Row
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("report of apron %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	for _, row := range rows {
		if row.Scope == loadgen.ScopeTotal {
			r.totals[row.Kind] = row
		} else {
			r.intervals = append(r.intervals, row)
		}
	}
	return r
}

// benchEnv is the environment without APRON_ variables, so that the
// command line alone says where the bench goes.
func benchEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APRON_") {
			env = append(env, kv)
		}
	}
	return env
}

// checkBenchKind checks one kind's totals: work done, quantiles in order,
// no errors, and intervals that add up to the totals.
func checkBenchKind(t *testing.T, r *benchRun, kind string) loadgen.Row {
	t.Helper()
	tot, ok := r.totals[kind]
	if !ok {
		t.Fatalf("no total of %s in the report; stdout:\n%s\nstderr:\n%s", kind, r.stdout, r.stderr)
	}
	if tot.Count <= 0 || tot.Rows <= 0 {
		t.Errorf("%s: count %d rows %d, want some", kind, tot.Count, tot.Rows)
	}
	if !(0 < tot.P50ms && tot.P50ms <= tot.P90ms && tot.P90ms <= tot.P99ms && tot.P99ms <= tot.MaxMs) {
		t.Errorf("%s: p50 %v p90 %v p99 %v max %v: want 0 < p50 ≤ p90 ≤ p99 ≤ max", kind, tot.P50ms, tot.P90ms, tot.P99ms, tot.MaxMs)
	}
	if tot.Errors != 0 {
		t.Errorf("%s: %d errors (%s); stdout:\n%s", kind, tot.Errors, tot.ErrorCodes, r.stdout)
	}
	var count, rows int64
	intervals := 0
	for _, row := range r.intervals {
		if row.Kind == kind {
			count += row.Count
			rows += row.Rows
			intervals++
		}
	}
	if count != tot.Count || rows != tot.Rows || intervals < 2 {
		t.Errorf("%s: %d intervals add up to %d ops, %d rows; the total says %d, %d", kind, intervals, count, rows, tot.Count, tot.Rows)
	}
	// The summary table on stdout has a line of the kind.
	if !strings.Contains(r.stdout, "\n"+kind+" ") {
		t.Errorf("no line of %s in the summary:\n%s", kind, r.stdout)
	}
	return tot
}

// tableCount is count(*) of bench.cpu through SQL.
func tableCount(t *testing.T, addr, table string) int64 {
	t.Helper()
	rows, err := sqlExecute(testCtx(t), t, sqlClient(t, addr, nil), "SELECT count(*) AS n FROM bench."+table)
	if err != nil {
		t.Fatalf("count of bench.%s: %v", table, err)
	}
	return rows[0]["n"].(int64)
}

// TestBenchCLI runs apron bench write, query and mixed against a real
// server: each does some work without errors, its numbers are consistent,
// and the rows it reports acknowledged are the rows in the table.
func TestBenchCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	short := []string{"--duration", "2s", "--interval", "500ms", "--tags", "50"}

	w := runBench(t, s.Addr, append([]string{"write", "--writers", "2", "--batch-rows", "500"}, short...)...)
	if w.code != 0 {
		t.Fatalf("bench write exited %d; stdout:\n%s\nstderr:\n%s", w.code, w.stdout, w.stderr)
	}
	wt := checkBenchKind(t, w, loadgen.KindWrite)
	if wt.Rows != 500*wt.Count || wt.Bytes < 72*wt.Rows {
		t.Errorf("write: %d rows, %d bytes in %d batches of 500", wt.Rows, wt.Bytes, wt.Count)
	}
	if got := tableCount(t, s.Addr, "cpu"); got != wt.Rows {
		t.Fatalf("bench.cpu has %d rows, bench write reported %d acknowledged", got, wt.Rows)
	}
	if !strings.Contains(w.stderr, "] write ") || !strings.Contains(w.stderr, "rows/s") {
		t.Errorf("no progress lines on stderr:\n%s", w.stderr)
	}

	// Every querier starts at its own kind: with five, each kind runs
	// from the start.
	q := runBench(t, s.Addr, append([]string{"query", "--concurrency", "5"}, short...)...)
	if q.code != 0 {
		t.Fatalf("bench query exited %d; stdout:\n%s\nstderr:\n%s", q.code, q.stdout, q.stderr)
	}
	for _, kind := range loadgen.BuiltinKinds() {
		tot := checkBenchKind(t, q, kind)
		switch kind {
		case "count":
			if tot.Rows != tot.Count { // one row a query
				t.Errorf("count: %d rows of %d queries", tot.Rows, tot.Count)
			}
		case "last":
			if tot.Rows != 50*tot.Count { // a row of every host
				t.Errorf("last: %d rows of %d queries over 50 hosts", tot.Rows, tot.Count)
			}
		}
	}

	// The same through query tickets: one DoGet a query.
	qt := runBench(t, s.Addr, append([]string{"query", "--ticket", "--concurrency", "2", "--queries", "count,last"}, short...)...)
	if qt.code != 0 {
		t.Fatalf("bench query --ticket exited %d; stdout:\n%s\nstderr:\n%s", qt.code, qt.stdout, qt.stderr)
	}
	if !strings.Contains(qt.stderr+qt.stdout, "as query tickets") {
		t.Errorf("bench query --ticket does not say it runs query tickets:\n%s%s", qt.stdout, qt.stderr)
	}
	if tot := checkBenchKind(t, qt, "last"); tot.Rows != 50*tot.Count {
		t.Errorf("last by ticket: %d rows of %d queries over 50 hosts", tot.Rows, tot.Count)
	}
	if tot := checkBenchKind(t, qt, "count"); tot.Rows != tot.Count {
		t.Errorf("count by ticket: %d rows of %d queries", tot.Rows, tot.Count)
	}

	m := runBench(t, s.Addr, append([]string{"mixed", "--writers", "1", "--concurrency", "2", "--queries", "count,last"}, short...)...)
	if m.code != 0 {
		t.Fatalf("bench mixed exited %d; stdout:\n%s\nstderr:\n%s", m.code, m.stdout, m.stderr)
	}
	mt := checkBenchKind(t, m, loadgen.KindWrite)
	checkBenchKind(t, m, "count")
	checkBenchKind(t, m, "last")
	if len(m.totals) != 3 {
		t.Errorf("mixed kinds %v, want write, count, last", m.totals)
	}

	// Flight SQL ingest, into a table of its own.
	i := runBench(t, s.Addr, "write", "--mode", "ingest", "--table", "ingest", "--writers", "2", "--batch-rows", "200",
		"--duration", "1s", "--interval", "500ms")
	if i.code != 0 {
		t.Fatalf("bench write --mode ingest exited %d; stdout:\n%s\nstderr:\n%s", i.code, i.stdout, i.stderr)
	}
	it := checkBenchKind(t, i, loadgen.KindWrite)
	if got := tableCount(t, s.Addr, "ingest"); got != it.Rows {
		t.Errorf("bench.ingest has %d rows, bench write --mode ingest reported %d", got, it.Rows)
	}
	if got := tableCount(t, s.Addr, "cpu"); got != wt.Rows+mt.Rows {
		t.Errorf("bench.cpu has %d rows, the write and mixed runs reported %d + %d", got, wt.Rows, mt.Rows)
	}
}

// TestBenchCLIErrors: a query run on a table that is not there stops at
// once, saying so; flags that make no sense are usage errors (exit 2).
func TestBenchCLIErrors(t *testing.T) {
	s := startServer(t, t.TempDir())
	r := runBench(t, s.Addr, "query", "--table", "nothere", "--duration", "30s")
	if r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") || !strings.Contains(r.stderr, "apron bench write") {
		t.Errorf("query of a missing table: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"write", "--mode", "post"},
		{"write", "--writers", "0"},
		{"write", "--batch-rows", "1000000"},
		{"query", "--queries", "point,nope"},
		{"query", "--sql", "x.sql", "--queries", "point"},
		{"query", "--report-format", "xml"},
		{"write", "--concurrency", "2"}, // a query flag
		{"write", "extra"},
	} {
		r := runBench(t, s.Addr, args...)
		if r.code != 2 {
			t.Errorf("apron bench %s: exit %d, want 2; stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
