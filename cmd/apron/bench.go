package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/loadgen"
)

func init() { extraCommands = append(extraCommands, newBenchCommand) }

// benchDefaultDB is the database apron bench writes and queries without
// --db or APRON_DATABASE: one of its own, away from real data.
const benchDefaultDB = "bench"

// benchMaxBatchRows keeps a batch (~85 bytes a row in IPC) under the
// client's gRPC message limit.
const benchMaxBatchRows = 500_000

// benchFlags are the flags of apron bench write, query and mixed; each
// subcommand adds the ones it uses.
type benchFlags struct {
	conn         connFlags
	table        string
	duration     time.Duration
	interval     time.Duration
	drainTimeout time.Duration
	tags         int
	report       string
	reportFormat string
	soak         soakFlags // apron bench soak

	writers   int
	batchRows int
	inFlight  int
	mode      string
	rows      int64
	timeSpan  time.Duration

	concurrency int
	ticket      bool
	queries     []string
	sqlFile     string
}

const benchLong = `Load a server with synthetic data and queries, and report throughput and
latency: a line of every kind every --interval on stderr, a summary table
on stdout at the end (also after Ctrl-C, which ends the run early), and
with --report FILE every interval as CSV or JSON.

  write   --writers streams of CPU-like rows (time, host, region, five
          usage fields, a counter) into --db/--table: plain Flight DoPut,
          --in-flight batches pipelined, each batch's latency from its send
          to its acknowledgement (the server's WAL fsync included); or
          --mode ingest, a Flight SQL ingest call a batch.
  query   --concurrency clients running a mix of SQL on the table (see
          --queries, or --sql FILE): latency from Execute to the last row.
  mixed   both at once; the queries start with the first batch written.
  soak    mixed, for long (--duration 10m by default), sampling the
          server's /metrics (--metrics-url) to fail if its memory, buffer,
          open files or goroutines grow without bound, or if an
          acknowledged row is missing from the table at the end.

Rows name hosts host-0 … host-<tags-1>, and queries ask for the same hosts,
so run 'apron bench query' with the --tags of the write that filled the
table. The exit code is 1 if any operation failed.`

func newBenchCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench write|query|mixed|soak [flags]",
		Short: "Measure a server: synthetic writes, queries or both, with throughput and latency",
		Long:  benchLong,
		Example: `  apron bench write --writers 16 --batch-rows 1000 --duration 30s
  apron bench query --queries point,last --concurrency 8 --report query.csv
  apron bench mixed --writers 4 --concurrency 4 --duration 1m --report mixed.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return errUsage
		},
	}
	for _, kind := range []string{"write", "query", "mixed", "soak"} {
		cmd.AddCommand(newBenchSubcommand(kind, &benchFlags{}, stdout, stderr))
	}
	return cmd
}

// newBenchSubcommand is apron bench kind, its flags parsed into f.
func newBenchSubcommand(kind string, f *benchFlags, stdout, stderr io.Writer) *cobra.Command {
	short := map[string]string{
		"write": "Stream synthetic rows into a table and report rows/s and acknowledgement latency",
		"query": "Run a mix of queries on a table and report queries/s and latency by query",
		"mixed": "Write and query at once, reported side by side",
		"soak":  soakShort,
	}[kind]
	cmd := &cobra.Command{
		Use:   kind + " [flags]",
		Short: short,
		Long:  short + ".\n\n" + benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.conn.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := f.config(kind, cmd.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The first Ctrl-C ends the run (the summary still comes);
			// a second one kills the process as usual.
			context.AfterFunc(ctx, stop)
			return runBench(ctx, f, kind, cfg, stdout, stderr)
		},
	}
	fs := cmd.Flags()
	f.conn.addTo(fs, 0)
	def := loadgen.DefaultConfig()
	fs.Lookup("db").Usage = "the database to write and query (default \"" + benchDefaultDB + "\"); env APRON_DATABASE"
	fs.StringVarP(&f.table, "table", "t", def.Table, "the table to write and query")
	fs.DurationVar(&f.duration, "duration", def.Duration, "how long to run (Ctrl-C ends it early)")
	fs.DurationVar(&f.interval, "interval", def.Interval, "how often a progress line (and a --report row) of every kind is written")
	fs.StringVar(&f.report, "report", "", "write every interval's numbers, then the totals, to this file: CSV, or JSON for .json, JSON lines for .jsonl")
	fs.StringVar(&f.reportFormat, "report-format", "", "csv, json or jsonl instead of the one of --report's extension")
	wdef, qdef := loadgen.DefaultWriteConfig(), loadgen.DefaultQueryConfig()
	fs.IntVar(&f.tags, "tags", wdef.Hosts, "the number of distinct hosts (series) written, and asked for by the queries")
	if kind != "query" {
		fs.IntVar(&f.writers, "writers", wdef.Writers, "concurrent writers, each with its own connection and stream")
		fs.IntVar(&f.batchRows, "batch-rows", wdef.BatchRows, fmt.Sprintf("rows per batch (at most %d)", benchMaxBatchRows))
		fs.IntVar(&f.inFlight, "in-flight", wdef.InFlight, "batches a writer sends before it waits for the oldest one's acknowledgement (--mode put)")
		fs.StringVar(&f.mode, "mode", string(wdef.Mode), "put: plain Flight DoPut, one stream a writer, a PutResult a batch; ingest: a Flight SQL ingest call a batch (as ADBC sends)")
		fs.Int64Var(&f.rows, "rows", 0, "stop once this many rows are sent (rounded up to whole batches), before --duration if need be: to fill a table of a known size; 0 = no limit")
		fs.DurationVar(&f.timeSpan, "time-span", 0, "with --rows: spread the rows' times evenly over this long before the run (e.g. 24h: a backfilled day, so that the point query's last 10 minutes read a realistic slice) instead of the clock's")
		fs.DurationVar(&f.drainTimeout, "drain-timeout", def.DrainTimeout, "at the end, how long writers wait for the acknowledgements of the batches they sent")
		cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]cobra.Completion{"put", "ingest"}, cobra.ShellCompDirectiveNoFileComp))
	}
	if kind != "write" {
		fs.IntVar(&f.concurrency, "concurrency", qdef.Concurrency, "concurrent queriers, each with its own connection and one query at a time")
		fs.StringSliceVar(&f.queries, "queries", loadgen.BuiltinKinds(), "the query mix, run in turn: "+benchQueryHelp())
		fs.StringVar(&f.sqlFile, "sql", "", "run the statements of this file instead of --queries: separated by ';', else one a line; {table}, {db} and {host} are replaced")
		fs.BoolVar(&f.ticket, "ticket", false, "run each query in one DoGet of a query ticket (InfluxDB 3's JSON ticket) instead of Flight SQL's GetFlightInfo and DoGet")
		fs.Lookup("timeout").Usage = "give up on a query after this long; 0 = never (the run's length is --duration)"
		cmd.RegisterFlagCompletionFunc("queries", cobra.FixedCompletions(loadgen.BuiltinKinds(), cobra.ShellCompDirectiveNoFileComp))
	} else {
		fs.MarkHidden("timeout") // a write stream lasts the whole run
	}
	if kind == "soak" {
		f.soak.addTo(cmd, f)
	}
	cmd.RegisterFlagCompletionFunc("report-format", cobra.FixedCompletions([]cobra.Completion{"csv", "json", "jsonl"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// benchQueryHelp describes the built-in queries for --help.
func benchQueryHelp() string {
	return "point (one host, last 10 minutes), range (one host, last hour), aggregate (1-minute averages of every host, last hour), " +
		"last (the latest row of every host), count (count(*))"
}

// config is the run the flags of kind describe.
func (f *benchFlags) config(kind string, fs *pflag.FlagSet) (loadgen.Config, error) {
	cfg := loadgen.DefaultConfig()
	cfg.DB, cfg.Table = f.conn.db, f.table
	if cfg.DB == "" {
		cfg.DB = benchDefaultDB
	}
	cfg.Duration, cfg.Interval, cfg.DrainTimeout = f.duration, f.interval, f.drainTimeout
	if f.table == "" {
		return cfg, usageErrorf("--table is empty")
	}
	if f.duration <= 0 || f.interval <= 0 {
		return cfg, usageErrorf("--duration %s, --interval %s: want both more than 0", f.duration, f.interval)
	}
	if f.tags < 1 {
		return cfg, usageErrorf("--tags %d: want at least 1", f.tags)
	}
	if kind != "query" {
		w := loadgen.WriteConfig{Writers: f.writers, BatchRows: f.batchRows, Hosts: f.tags, InFlight: f.inFlight, Mode: loadgen.WriteMode(f.mode), Rows: f.rows, Span: f.timeSpan}
		if f.batchRows > benchMaxBatchRows {
			return cfg, usageErrorf("--batch-rows %d: want at most %d", f.batchRows, benchMaxBatchRows)
		}
		if err := w.Validate(); err != nil {
			return cfg, usageErrorf("%v", err)
		}
		cfg.Write = &w
	}
	if kind != "write" {
		q := loadgen.QueryConfig{Concurrency: f.concurrency, Hosts: f.tags, Timeout: f.conn.timeout, Ticket: f.ticket}
		switch {
		case f.sqlFile != "":
			if fs.Changed("queries") {
				return cfg, usageErrorf("--sql and --queries do not go together: the file is the mix")
			}
			b, err := os.ReadFile(f.sqlFile)
			if err != nil {
				return cfg, fmt.Errorf("--sql: %w", err)
			}
			q.Queries = loadgen.ParseStatements(string(b))
			if len(q.Queries) == 0 {
				return cfg, usageErrorf("--sql %s: no statement in it", f.sqlFile)
			}
		default:
			qs, err := loadgen.BuiltinQueries(f.queries)
			if err != nil {
				return cfg, usageErrorf("--queries: %v", err)
			}
			q.Queries = qs
		}
		if err := q.Validate(); err != nil {
			return cfg, usageErrorf("%v", err)
		}
		cfg.Query = &q
	}
	if _, err := loadgen.ReportFormat(f.report, f.reportFormat); err != nil {
		return cfg, usageErrorf("--report-format: %v", err)
	}
	return cfg, nil
}

func runBench(ctx context.Context, f *benchFlags, kind string, cfg loadgen.Config, stdout, stderr io.Writer) (err error) {
	addr, opts, err := f.conn.dialOptions(stderr)
	if err != nil {
		return err
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(clientMaxMessage), grpc.MaxCallSendMsgSize(clientMaxMessage)))
	cfg.Dial = func(context.Context) (*flightsql.Client, error) {
		cl, err := flightsql.NewClient(addr, nil, nil, opts...)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", f.conn.host, f.conn.redact(err))
		}
		return cl, nil
	}
	cfg.Mem = memory.DefaultAllocator
	cfg.Progress = stderr
	if f.report != "" {
		format, _ := loadgen.ReportFormat(f.report, f.reportFormat)
		file, err := os.Create(f.report)
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		defer func() {
			if cerr := file.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("--report: %w", cerr)
			}
		}()
		sink, err := loadgen.NewSink(file, format)
		if err != nil {
			return err
		}
		cfg.Report = sink
	}
	fmt.Fprintf(stderr, "apron bench %s: %s at %s, %s.%s, for %s\n", kind, describeBench(cfg), f.conn.host, cfg.DB, cfg.Table, cfg.Duration)
	if kind == "soak" {
		return runSoak(ctx, f, cfg, stdout, stderr)
	}

	sum, err := loadgen.Run(f.conn.callContext(ctx), cfg)
	if sum != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "apron bench: interrupted: the summary is of the run so far")
		}
		if werr := sum.WriteTable(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if status.Code(err) == codes.Unavailable {
		return fmt.Errorf("%w (is apron serve running at %s? A TLS server needs --host grpc+tls://HOST:PORT)", err, f.conn.host)
	}
	if err != nil {
		return err
	}
	if f.report != "" {
		fmt.Fprintf(stderr, "apron bench: report written to %s\n", f.report)
	}
	if n := sum.Errors(); n > 0 {
		return fmt.Errorf("%d operations failed (see the summary)", n)
	}
	return nil
}

// describeBench is what a run does, in a few words, for its first line.
func describeBench(cfg loadgen.Config) string {
	var parts []string
	if w := cfg.Write; w != nil {
		s := fmt.Sprintf("%d writers × batches of %d rows over %d hosts (%s", w.Writers, w.BatchRows, w.Hosts, w.Mode)
		if w.Mode == loadgen.ModePut {
			s += fmt.Sprintf(", %d in flight", w.InFlight)
		}
		if w.Rows > 0 {
			s += fmt.Sprintf(", %d rows", w.Rows)
		}
		if w.Span > 0 {
			s += fmt.Sprintf(" over the last %s", w.Span)
		}
		parts = append(parts, s+")")
	}
	if q := cfg.Query; q != nil {
		var kinds []string
		for _, qq := range q.Queries {
			kinds = append(kinds, qq.Kind)
		}
		how := ""
		if q.Ticket {
			how = " as query tickets"
		}
		parts = append(parts, fmt.Sprintf("%d queriers running %s%s", q.Concurrency, strings.Join(kinds, ","), how))
	}
	return strings.Join(parts, " and ")
}
