package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apron-db/apron/loadgen"
)

// benchConfig is the run apron bench kind args describes.
func benchConfig(t *testing.T, kind string, args ...string) (loadgen.Config, error) {
	t.Helper()
	f := &benchFlags{}
	cmd := newBenchSubcommand(kind, f, io.Discard, io.Discard)
	if err := cmd.ParseFlags(args); err != nil {
		return loadgen.Config{}, err
	}
	return f.config(kind, cmd.Flags())
}

func TestBenchFlags(t *testing.T) {
	t.Setenv("APRON_DATABASE", "") // not read here: applyEnv runs in RunE
	sqlFile := filepath.Join(t.TempDir(), "mix.sql")
	os.WriteFile(sqlFile, []byte("SELECT count(*) FROM {table};\nSELECT * FROM {table} WHERE host = '{host}';\n"), 0o644)

	w, err := benchConfig(t, "write")
	if err != nil {
		t.Fatal(err)
	}
	if w.DB != "bench" || w.Table != "cpu" || w.Query != nil || w.Write == nil || *w.Write != loadgen.DefaultWriteConfig() ||
		w.Duration != 30*time.Second || w.Interval != 5*time.Second || w.DrainTimeout != 10*time.Second {
		t.Errorf("write defaults: %+v, write %+v", w, w.Write)
	}

	w, err = benchConfig(t, "write", "--db", "m", "-t", "t2", "--writers", "16", "--batch-rows", "100000", "--tags", "7",
		"--in-flight", "2", "--mode", "ingest", "--rows", "5000000", "--duration", "10s", "--interval", "1s", "--drain-timeout", "3s")
	if err != nil {
		t.Fatal(err)
	}
	want := loadgen.WriteConfig{Writers: 16, BatchRows: 100000, Hosts: 7, InFlight: 2, Mode: loadgen.ModeIngest, Rows: 5_000_000}
	if w.DB != "m" || w.Table != "t2" || *w.Write != want || w.Duration != 10*time.Second || w.Interval != time.Second || w.DrainTimeout != 3*time.Second {
		t.Errorf("write flags: %+v, write %+v", w, w.Write)
	}

	q, err := benchConfig(t, "query", "--queries", "last,count", "--concurrency", "8", "--tags", "10", "--timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if q.Write != nil || q.Query == nil || q.Query.Concurrency != 8 || q.Query.Hosts != 10 || q.Query.Timeout != 5*time.Second ||
		len(q.Query.Queries) != 2 || q.Query.Queries[0].Kind != "last" || q.Query.Queries[1].Kind != "count" {
		t.Errorf("query flags: %+v, query %+v", q, q.Query)
	}

	q, err = benchConfig(t, "query")
	if err != nil || len(q.Query.Queries) != len(loadgen.BuiltinKinds()) {
		t.Errorf("query defaults: %+v, %v", q.Query, err)
	}

	q, err = benchConfig(t, "query", "--sql", sqlFile)
	if err != nil || len(q.Query.Queries) != 2 || q.Query.Queries[1].Kind != "sql2" || !strings.Contains(q.Query.Queries[1].SQL, "'{host}'") {
		t.Errorf("--sql: %+v, %v", q.Query, err)
	}

	m, err := benchConfig(t, "mixed", "--writers", "2", "--concurrency", "3")
	if err != nil || m.Write == nil || m.Query == nil || m.Write.Writers != 2 || m.Query.Concurrency != 3 {
		t.Errorf("mixed: %+v, %v", m, err)
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		args       []string
		want       string
	}{
		{"bad_mode", "write", []string{"--mode", "post"}, `mode "post"`},
		{"no_writers", "write", []string{"--writers", "0"}, "writers 0"},
		{"huge_batches", "write", []string{"--batch-rows", "1000000"}, "at most 500000"},
		{"no_in_flight", "mixed", []string{"--in-flight", "0"}, "in flight 0"},
		{"no_tags", "query", []string{"--tags", "0"}, "--tags 0"},
		{"zero_duration", "write", []string{"--duration", "0s"}, "--duration"},
		{"empty_table", "write", []string{"--table", ""}, "--table is empty"},
		{"unknown_query", "query", []string{"--queries", "point,nope"}, `query "nope"`},
		{"sql_and_queries", "query", []string{"--sql", "x.sql", "--queries", "point"}, "do not go together"},
		{"no_concurrency", "query", []string{"--concurrency", "0"}, "concurrency 0"},
		{"span_without_rows", "write", []string{"--time-span", "24h"}, "time span 24h0m0s"},
		{"negative_span", "write", []string{"--rows", "10", "--time-span", "-1h"}, "time span -1h0m0s"},
		{"report_format", "write", []string{"--report", "r.txt", "--report-format", "xml"}, "xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := benchConfig(t, tc.kind, tc.args...)
			var ue *usageError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ue) {
				t.Errorf("apron bench %s %s: %v, want a usage error with %q", tc.kind, strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
	// A missing --sql file is an error of its own, not a usage error.
	if _, err := benchConfig(t, "query", "--sql", filepath.Join(t.TempDir(), "none.sql")); err == nil || !strings.Contains(err.Error(), "--sql") {
		t.Errorf("missing --sql file: %v", err)
	}
	// Flags of the other kind are unknown.
	if _, err := benchConfig(t, "write", "--concurrency", "2"); err == nil {
		t.Errorf("write --concurrency: no error")
	}
	if _, err := benchConfig(t, "query", "--writers", "2"); err == nil {
		t.Errorf("query --writers: no error")
	}
}
