package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/apron-db/apron/output"
)

// queryFlags are the flags of apron query (and, without --output, of
// apron show).
type queryFlags struct {
	conn     connFlags
	format   string
	output   string
	maxWidth int
	maxRows  int
}

func (f *queryFlags) addOutputFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.format, "format", "f", "", "table, csv, json, jsonl, arrow (IPC stream) or parquet; default: table on a terminal, else csv (with --output: from the file's extension)")
	fs.IntVar(&f.maxWidth, "max-width", 0, "table: cut lines to this many columns; default: the terminal's width, or $COLUMNS")
	fs.IntVar(&f.maxRows, "max-rows", 40, "table: most rows shown (the first and last half of them); the count says how many there were")
}

func newQueryCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &queryFlags{}
	cmd := &cobra.Command{
		Use:   "query [flags] [SQL]",
		Short: "Run SQL on a server and print or save the result",
		Long: `Run SQL on a server and print or save the result.

The SQL is the arguments, joined by spaces, or stdin when there are none
(or the only one is "-"). A query's rows stream to the output as they
arrive, so a result of any size is written in constant memory; an INSERT
prints the number of rows it wrote.`,
		Example: `  apron query --db metrics "SELECT host, avg(usage) FROM cpu GROUP BY host"
  apron query -f parquet -o cpu.parquet "SELECT * FROM metrics.cpu"
  echo "SELECT count(*) FROM metrics.cpu" | apron query -f json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.conn.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			sql, err := sqlText(args, stdin)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runQuery(ctx, f, sql, stdout, stderr)
		},
	}
	f.conn.addTo(cmd.Flags(), 0)
	f.addOutputFlags(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "write the result to this file (replaced once the whole result is in) instead of stdout")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]cobra.Completion{"table", "csv", "json", "jsonl", "arrow", "parquet"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// sqlText is the statement of args, or of stdin.
func sqlText(args []string, stdin io.Reader) (string, error) {
	if len(args) > 0 && !(len(args) == 1 && args[0] == "-") {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("reading the SQL from stdin: %w", err)
	}
	sql := strings.TrimSpace(string(b))
	if sql == "" {
		return "", usageErrorf("no SQL: give it as an argument or on stdin")
	}
	return sql, nil
}

// outputFormat is the format of --format, else of --output's extension,
// else table on a terminal and csv elsewhere.
func (f *queryFlags) outputFormat(stdout io.Writer) (output.Format, error) {
	if f.format != "" {
		return output.ParseFormat(f.format)
	}
	if f.output != "" {
		switch strings.ToLower(filepath.Ext(f.output)) {
		case ".parquet", ".pq":
			return output.Parquet, nil
		case ".arrow", ".arrows", ".ipc":
			return output.Arrow, nil
		case ".json":
			return output.JSON, nil
		case ".jsonl", ".ndjson":
			return output.JSONL, nil
		case ".txt":
			return output.Table, nil
		}
		return output.CSV, nil
	}
	if isTerminal(stdout) {
		return output.Table, nil
	}
	return output.CSV, nil
}

// tableWidth is --max-width, else the terminal's width, else $COLUMNS,
// else no limit.
func (f *queryFlags) tableWidth(stdout io.Writer) int {
	if f.maxWidth > 0 {
		return f.maxWidth
	}
	if w := terminalWidth(stdout); w > 0 {
		return w
	}
	var n int
	if _, err := fmt.Sscan(os.Getenv("COLUMNS"), &n); err == nil && n > 0 {
		return n
	}
	return 0
}

func runQuery(ctx context.Context, f *queryFlags, sql string, stdout, stderr io.Writer) error {
	format, err := f.outputFormat(stdout)
	if err != nil {
		return usageErrorf("--format: %v", err)
	}
	if f.output == "" && (format == output.Arrow || format == output.Parquet) && isTerminal(stdout) {
		return usageErrorf("--format %s is binary: give --output FILE or redirect stdout to a file", format)
	}
	start := time.Now()
	mem := memory.DefaultAllocator
	cl, cctx, cancel, err := f.conn.sqlConnect(ctx, stderr)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer cancel()
	res, n, err := runSQL(cctx, cl, sql, mem)
	if err != nil {
		return f.conn.callError("", err)
	}
	if res == nil {
		// Only how the answer reads: the server decided what the
		// statement is.
		switch firstWord(sql) {
		case "CREATE", "DROP":
			fmt.Fprintf(stdout, "OK in %s\n", roundDuration(time.Since(start)))
		case "DELETE":
			fmt.Fprintf(stdout, "%s rows deleted in %s\n", groupDigits(n), roundDuration(time.Since(start)))
		default:
			fmt.Fprintf(stdout, "%s rows written in %s\n", groupDigits(n), roundDuration(time.Since(start)))
		}
		return nil
	}
	defer res.close(cctx)
	dst, commit, abort, err := openOutput(f.output, stdout)
	if err != nil {
		return err
	}
	opts := output.Options{Mem: mem}
	if format == output.Table {
		opts.Width, opts.MaxRows = f.tableWidth(stdout), f.maxRows
		opts.Elapsed = func() time.Duration { return time.Since(start) }
	}
	w, err := output.New(format, dst, res.schema, opts)
	if err != nil {
		abort()
		return err
	}
	err = res.each(cctx, func(rec arrow.RecordBatch) error { return w.Write(rec) })
	if err != nil {
		w.Close()
		abort()
		var oe *outputError
		if errors.As(err, &oe) {
			return err
		}
		return f.conn.callError("", err)
	}
	if err := w.Close(); err != nil {
		abort()
		return fmt.Errorf("writing the result: %w", err)
	}
	if err := commit(); err != nil {
		return err
	}
	if f.output != "" {
		fmt.Fprintf(stderr, "wrote %s rows to %s in %s\n", groupDigits(w.Rows()), f.output, roundDuration(time.Since(start)))
	}
	return nil
}

// outputError is a failure to write the result locally, as opposed to
// one of the server's.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// openOutput opens where the result goes: stdout, or a temporary file
// beside path that commit renames over it (so a failed query leaves no
// half-written file, and an old file stays until the new one is whole).
func openOutput(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" {
		ew := &errWriter{w: stdout}
		return ew, func() error { return ew.err }, func() {}, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--output %s: %w", path, err)
	}
	bw := &errWriter{w: tmp}
	commit = func() error {
		if err := errors.Join(bw.err, tmp.Sync(), tmp.Close()); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("--output %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("--output %s: %w", path, err)
		}
		return nil
	}
	abort = func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	return bw, commit, abort, nil
}

// errWriter marks its write errors as the output's, not the server's.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = &outputError{err: err}
	}
	if err != nil {
		return n, e.err
	}
	return n, nil
}

// groupDigits writes n with thousands separators: 12,345,678.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// roundDuration is d as people read it: 12 ms, 1.3 s, 2m3s.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// firstWord is sql's first word in upper case, to word the answer of an
// update.
func firstWord(sql string) string {
	w := strings.Fields(sql)
	if len(w) == 0 {
		return ""
	}
	return strings.ToUpper(w[0])
}
