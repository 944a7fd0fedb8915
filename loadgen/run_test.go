package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a short run against dial.
func testConfig(dial Dialer, mem memory.Allocator) Config {
	cfg := DefaultConfig()
	cfg.Duration = 600 * time.Millisecond
	cfg.Interval = 200 * time.Millisecond
	cfg.DrainTimeout = 5 * time.Second
	cfg.Dial = dial
	cfg.Mem = mem
	return cfg
}

func smallWrites(mode WriteMode) *WriteConfig {
	w := DefaultWriteConfig()
	w.Writers, w.BatchRows, w.Hosts, w.Mode = 3, 50, 20, mode
	return &w
}

// checkSane checks what every run must hold of every kind: something
// done, quantiles in order, no errors.
func checkSane(t *testing.T, sum *Summary) {
	t.Helper()
	for _, k := range sum.Kinds {
		if k.Count == 0 || k.Rows == 0 {
			t.Errorf("%s: count %d rows %d, want some", k.Kind, k.Count, k.Rows)
		}
		if !(0 < k.P50ms && k.P50ms <= k.P90ms && k.P90ms <= k.P99ms && k.P99ms <= k.MaxMs) {
			t.Errorf("%s: p50 %v p90 %v p99 %v max %v: want 0 < p50 ≤ p90 ≤ p99 ≤ max", k.Kind, k.P50ms, k.P90ms, k.P99ms, k.MaxMs)
		}
		if k.Errors != 0 {
			t.Errorf("%s: %d errors (%s) %v", k.Kind, k.Errors, k.ErrorCodes, k.FirstErrors)
		}
	}
}

func TestRunWrite(t *testing.T) {
	for _, mode := range []WriteMode{ModePut, ModeIngest} {
		t.Run(string(mode), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			fake, dial := startFake(t)
			cfg := testConfig(dial, mem)
			cfg.Write = smallWrites(mode)
			var progress, report bytes.Buffer
			cfg.Progress = &progress
			sink, _ := NewSink(&report, FormatJSON)
			cfg.Report = sink
			sum, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkSane(t, sum)
			w := sum.Kind(KindWrite)
			if len(sum.Kinds) != 1 || w == nil || !w.Write {
				t.Fatalf("kinds %+v, want write alone", sum.Kinds)
			}
			// Acknowledged is written, exactly: the run drains its acks.
			if got := fake.rows("bench", "cpu"); got != w.Rows || w.Rows != w.Count*50 {
				t.Errorf("server has %d rows, the run says %d acknowledged in %d batches of 50", got, w.Rows, w.Count)
			}
			if w.Bytes < w.Rows*8*9 {
				t.Errorf("%d bytes for %d rows of 9 columns: want at least 72 a row", w.Bytes, w.Rows)
			}
			var rows []Row
			if err := json.Unmarshal(report.Bytes(), &rows); err != nil {
				t.Fatal(err)
			}
			// 600ms in intervals of 200ms: three interval rows and the total.
			if len(rows) != 4 || rows[3].Scope != ScopeTotal || rows[2].Scope != ScopeInterval {
				t.Fatalf("report rows %+v, want 3 intervals and a total", rows)
			}
			var count, sumRows int64
			for _, r := range rows[:3] {
				count += r.Count
				sumRows += r.Rows
			}
			if count != w.Count || sumRows != w.Rows || rows[3].Count != w.Count {
				t.Errorf("intervals add up to %d batches %d rows, total %d %d", count, sumRows, w.Count, w.Rows)
			}
			if n := strings.Count(progress.String(), "] write"); n != 3 {
				t.Errorf("%d progress lines, want 3:\n%s", n, progress.String())
			}
		})
	}
}

// TestRunWriteRows: with Rows the writers stop once that many rows (in
// whole batches) are sent, and the run ends then, long before Duration.
func TestRunWriteRows(t *testing.T) {
	for _, mode := range []WriteMode{ModePut, ModeIngest} {
		t.Run(string(mode), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			fake, dial := startFake(t)
			cfg := testConfig(dial, mem)
			cfg.Duration = time.Hour
			cfg.Write = smallWrites(mode)
			cfg.Write.Rows = 1234
			start := time.Now()
			sum, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("run took %s", d)
			}
			checkSane(t, sum)
			// 1234 rows in batches of 50: 25 batches.
			if w := sum.Kind(KindWrite); w.Rows != 1250 || w.Count != 25 || fake.rows("bench", "cpu") != 1250 {
				t.Errorf("%d rows in %d batches acknowledged, server has %d; want 1250 in 25", w.Rows, w.Count, fake.rows("bench", "cpu"))
			}
		})
	}
}

func TestRunQuery(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fake, dial := startFake(t)
	fake.add("bench", "cpu", 1) // the preflight's table
	cfg := testConfig(dial, mem)
	q := DefaultQueryConfig()
	q.Concurrency = 3
	cfg.Query = &q
	sum, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, sum)
	if got := strings.Join(kinds(sum), ","); got != "point,range,aggregate,last,count" {
		t.Errorf("kinds %s", got)
	}
	var queries int64
	for _, k := range sum.Kinds {
		queries += k.Count
		if k.Rows != 3*k.Count || k.Bytes == 0 {
			t.Errorf("%s: %d rows %d bytes of %d queries, want 3 rows each", k.Kind, k.Rows, k.Bytes, k.Count)
		}
	}
	// +1: the preflight; more: those cut short by the run's end.
	if served := fake.queries(); served < queries+1 {
		t.Errorf("the server answered %d queries, the run counted %d", served, queries)
	}
}

func TestRunMixed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fake, dial := startFake(t)
	cfg := testConfig(dial, mem)
	cfg.Write = smallWrites(ModePut)
	q := DefaultQueryConfig()
	q.Concurrency = 2
	q.Queries, _ = BuiltinQueries([]string{"last", "count"})
	cfg.Query = &q
	sum, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, sum)
	if got := strings.Join(kinds(sum), ","); got != "write,last,count" {
		t.Errorf("kinds %s", got)
	}
	if fake.rows("bench", "cpu") != sum.Kind(KindWrite).Rows {
		t.Errorf("server has %d rows, run acknowledged %d", fake.rows("bench", "cpu"), sum.Kind(KindWrite).Rows)
	}
}

func TestRunSQLFileQueries(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fake, dial := startFake(t)
	fake.add("bench", "cpu", 1)
	cfg := testConfig(dial, mem)
	q := DefaultQueryConfig()
	q.Queries = ParseStatements("SELECT 1 FROM {table};\nSELECT * FROM {table} WHERE host = '{host}' AND missing")
	cfg.Query = &q
	sum, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ok, bad := sum.Kind("sql1"), sum.Kind("sql2")
	if ok == nil || bad == nil || ok.Count == 0 || ok.Errors != 0 {
		t.Fatalf("kinds %+v", sum.Kinds)
	}
	if bad.Count != 0 || bad.Errors == 0 || bad.ErrorCodes != "NOT_FOUND="+strconv.FormatInt(bad.Errors, 10) || bad.FirstErrors["NOT_FOUND"] != "no table missing" {
		t.Errorf("the failing statement: %+v", bad)
	}
}

func TestRunQueryMissingTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dial := startFake(t)
	cfg := testConfig(dial, mem)
	cfg.Table = "missing"
	q := DefaultQueryConfig()
	cfg.Query = &q
	var report bytes.Buffer
	cfg.Report, _ = NewSink(&report, FormatJSON)
	start := time.Now()
	sum, err := Run(t.Context(), cfg)
	if err == nil || sum != nil || !strings.Contains(err.Error(), "table bench.missing: NOT_FOUND: no table missing (write it first") {
		t.Errorf("Run = %v, %v; want the preflight's error naming the table", sum, err)
	}
	if strings.TrimSpace(report.String()) != "[]" {
		t.Errorf("report %q, want an empty JSON array", report.String())
	}
	if time.Since(start) > cfg.Duration {
		t.Errorf("the preflight failure took %s", time.Since(start))
	}
}

// TestRunStreamFailure: a stream the server fails counts its
// unacknowledged batches as errors by code and is reopened.
func TestRunStreamFailure(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fake, dial := startFake(t)
	cfg := testConfig(dial, mem)
	cfg.Table = "fail"
	cfg.Write = smallWrites(ModePut)
	cfg.Write.Writers, cfg.Write.InFlight = 1, 1
	sum, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := sum.Kind(KindWrite)
	// InFlight 1: each stream gets two batches acknowledged, then one
	// fails; the backoff (50ms, 100ms, …) lets a few streams through.
	if w.Errors < 2 || w.ErrorCodes != "RESOURCE_EXHAUSTED="+strconv.FormatInt(w.Errors, 10) || w.Count != 2*w.Errors {
		t.Errorf("write: %d acknowledged, %d errors (%s)", w.Count, w.Errors, w.ErrorCodes)
	}
	if fake.rows("bench", "fail") != w.Rows {
		t.Errorf("server has %d rows, run acknowledged %d", fake.rows("bench", "fail"), w.Rows)
	}
	if !strings.Contains(w.FirstErrors["RESOURCE_EXHAUSTED"], "the fake is full") {
		t.Errorf("first errors %v", w.FirstErrors)
	}
}

// TestRunDrainTimeout: batches never acknowledged are given up after the
// drain timeout and count as errors; the run does not hang.
func TestRunDrainTimeout(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dial := startFake(t)
	cfg := testConfig(dial, mem)
	cfg.Table = "stall"
	cfg.Duration = 200 * time.Millisecond
	cfg.DrainTimeout = 200 * time.Millisecond
	cfg.Write = smallWrites(ModePut)
	cfg.Write.Writers, cfg.Write.InFlight = 2, 3
	start := time.Now()
	sum, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run took %s", d)
	}
	w := sum.Kind(KindWrite)
	if w.Count != 0 || w.Errors != 6 || w.ErrorCodes != "CANCELLED=6" {
		t.Errorf("write: %d acknowledged, %d errors (%s, %v), want 0 and 2 writers × 3 in flight CANCELLED", w.Count, w.Errors, w.ErrorCodes, w.FirstErrors)
	}
}

// TestRunCancel: cancelling the context ends a long run early, with the
// summary of what was done, every acknowledged row written.
func TestRunCancel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fake, dial := startFake(t)
	cfg := testConfig(dial, mem)
	cfg.Duration = time.Hour
	cfg.Write = smallWrites(ModePut)
	q := DefaultQueryConfig()
	q.Concurrency = 2
	cfg.Query = &q
	ctx, cancel := context.WithCancel(t.Context())
	// Cancelled 300 ms in, once the server has taken writes and more
	// queries than the clients' number times the kinds': each client
	// takes the kinds in turn, so one has then sent a query after one of
	// every kind, which it had finished and counted (on a busy machine
	// 300 ms alone may not be enough, nor a query beyond each client's
	// first: a kind was once left with none).
	go func() {
		defer cancel()
		for deadline := time.Now().Add(300 * time.Millisecond); ; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) && fake.rows("bench", "cpu") > 0 && fake.queries() > int64(q.Concurrency*len(q.Queries)) {
				time.Sleep(50 * time.Millisecond)
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	start := time.Now()
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run took %s, cancelled at 300ms or soon after", d)
	}
	checkSane(t, sum)
	if fake.rows("bench", "cpu") != sum.Kind(KindWrite).Rows {
		t.Errorf("server has %d rows, run acknowledged %d", fake.rows("bench", "cpu"), sum.Kind(KindWrite).Rows)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Dial = func(context.Context) (*flightsql.Client, error) { return nil, nil }
	w := DefaultWriteConfig()
	ok.Write = &w
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no_workers", func(c *Config) { c.Write = nil }, "neither writers nor queries"},
		{"no_dial", func(c *Config) { c.Dial = nil }, "no Dial"},
		{"no_table", func(c *Config) { c.Table = "" }, "both must be given"},
		{"zero_duration", func(c *Config) { c.Duration = 0 }, "duration"},
		{"zero_interval", func(c *Config) { c.Interval = 0 }, "interval"},
		{"bad_mode", func(c *Config) { w := *c.Write; w.Mode = "post"; c.Write = &w }, `mode "post"`},
		{"no_writers", func(c *Config) { w := *c.Write; w.Writers = 0; c.Write = &w }, "writers 0"},
		{"no_in_flight", func(c *Config) { w := *c.Write; w.InFlight = 0; c.Write = &w }, "in flight 0"},
		{"negative_rows", func(c *Config) { w := *c.Write; w.Rows = -1; c.Write = &w }, "rows -1"},
		{"no_queries", func(c *Config) { q := DefaultQueryConfig(); q.Queries = nil; c.Query = &q }, "no queries"},
		{"query_named_write", func(c *Config) {
			q := DefaultQueryConfig()
			q.Queries = []Query{{Kind: KindWrite, SQL: "SELECT 1"}}
			c.Query = &q
		}, "writers'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func kinds(s *Summary) []string {
	var out []string
	for _, k := range s.Kinds {
		out = append(out, k.Kind)
	}
	return out
}
