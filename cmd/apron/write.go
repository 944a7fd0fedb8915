package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/apron-db/apron/input"
)

func init() { extraCommands = append(extraCommands, newWriteCommand) }

// writeFlags are the flags of apron write.
type writeFlags struct {
	conn       connFlags
	table      string
	format     string
	schema     string
	timeColumn string
	timeFormat string
	precision  string
	batchRows  int
	parallel   int
	progress   string
}

const writeLong = `Load files into a table: CSV (with a header row), Parquet, Arrow IPC
(file or stream), JSON lines, or InfluxDB line protocol ("lp": each line's
measurement names its table, tags become string columns, fields typed
columns). FILE "-" is stdin.

The rows go through Flight DoPut in batches of --batch-rows, over
--parallel streams. A batch is written once the server has acknowledged
it (its WAL record is durable); the summary and every error say how many
rows were. CSV and JSON types are inferred from the first rows; --schema
sets them. A row's time comes from --time-column (default: a column named
"time"), else the server stamps its own.`

func newWriteCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &writeFlags{}
	cmd := &cobra.Command{
		Use:   "write --db DB --table TABLE [flags] FILE... | -",
		Short: "Load CSV, Parquet, Arrow, JSON lines or line protocol files into a table",
		Long:  writeLong,
		Example: `  apron write --db metrics --table cpu cpu.csv
  apron write --db metrics --table cpu --schema 'host:string,usage:float64' --time-column ts --time-format ms cpu.csv
  apron write --db telegraf metrics.lp            # tables from the measurements
  zcat cpu.csv.gz | apron write --db metrics --table cpu --format csv -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.conn.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runWrite(ctx, f, args, stdin, stdout, stderr)
		},
	}
	f.conn.addTo(cmd.Flags(), 0)
	fs := cmd.Flags()
	fs.StringVarP(&f.table, "table", "t", "", "the table to write (not for line protocol, whose lines name their tables)")
	fs.StringVar(&f.format, "format", "auto", "auto (from the file name, else its first bytes), csv, parquet, arrow, jsonl or lp")
	fs.StringVar(&f.schema, "schema", "", "column types of CSV and JSON lines instead of inferred ones: 'host:string,usage:float64,n:int64,ok:bool,ts:timestamp'")
	fs.StringVar(&f.timeColumn, "time-column", "", "the column holding each row's time, stored as \"time\" (default: a column named time)")
	fs.StringVar(&f.timeFormat, "time-format", "", "how the time column is written: rfc3339, s, ms, us, ns (epoch) or a Go layout; default: RFC 3339, or an epoch whose unit its size tells")
	fs.StringVar(&f.precision, "precision", "ns", "line protocol: the unit of the timestamps (ns, us, ms, s)")
	fs.IntVar(&f.batchRows, "batch-rows", 65536, "rows per batch sent")
	fs.IntVar(&f.parallel, "parallel", 4, "batches sent over this many DoPut streams at once")
	fs.StringVar(&f.progress, "progress", "auto", "auto (a bar on a terminal, else a line every 5 s), bar, lines or none")
	fs.DurationVar(&progressLineEvery, "progress-interval", progressLineEvery, "lines: how often a progress line is printed")
	fs.MarkHidden("progress-interval")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]cobra.Completion{"auto", "csv", "parquet", "arrow", "jsonl", "lp"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (f *writeFlags) check(files []string) error {
	if f.conn.db == "" {
		return usageErrorf("--db is required (or APRON_DATABASE): the database to write")
	}
	if f.batchRows < 1 || f.batchRows > 10_000_000 {
		return usageErrorf("--batch-rows %d: want 1 to 10,000,000", f.batchRows)
	}
	if f.parallel < 1 || f.parallel > 64 {
		return usageErrorf("--parallel %d: want 1 to 64", f.parallel)
	}
	switch f.progress {
	case "auto", "bar", "lines", "none":
	default:
		return usageErrorf("--progress %q: want auto, bar, lines or none", f.progress)
	}
	stdins := 0
	for _, name := range files {
		if name == "-" {
			stdins++
		}
	}
	if stdins > 1 {
		return usageErrorf("stdin (-) can be read once")
	}
	return nil
}

// source is one input to write: a file or stdin.
type source struct {
	name string
	r    io.Reader
	size int64 // -1: unknown
	head []byte
	file *os.File
}

func openSource(name string, stdin io.Reader) (*source, error) {
	if name == "-" {
		br := bufio.NewReaderSize(stdin, 1<<20)
		head, err := br.Peek(4096)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return &source{name: "stdin", r: br, size: -1, head: head}, nil
	}
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if st.IsDir() {
		fh.Close()
		return nil, fmt.Errorf("%s is a directory", name)
	}
	head := make([]byte, 4096)
	n, err := fh.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		fh.Close()
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return &source{name: name, r: fh, size: st.Size(), head: head[:n], file: fh}, nil
}

func (s *source) close() {
	if s.file != nil {
		s.file.Close()
	}
}

// options is the input options of the flags for src.
func (f *writeFlags) options(src *source) (input.Options, error) {
	format := input.Format(f.format)
	if f.format == "auto" {
		var err error
		if format, err = input.Detect(src.name, src.head); err != nil {
			return input.Options{}, err
		}
	}
	if format == input.LineProtocol && f.table != "" {
		return input.Options{}, usageErrorf("%s is line protocol, whose lines name their tables (the measurements): leave out --table", src.name)
	}
	if format != input.LineProtocol && f.table == "" {
		return input.Options{}, usageErrorf("--table is required for %s (%s): the table to write", src.name, format)
	}
	return input.Options{
		Format: format, BatchRows: f.batchRows, Schema: f.schema, TimeColumn: f.timeColumn,
		TimeFormat: f.timeFormat, Precision: f.precision, Table: f.table, Mem: memory.DefaultAllocator,
		DictionaryStrings: true,
	}, nil
}

func runWrite(ctx context.Context, f *writeFlags, files []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.check(files); err != nil {
		return err
	}
	// Every file is opened, and its format settled, before anything is
	// sent: a typo in the fifth name must not leave four files written.
	var srcs []*source
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	var total int64
	for _, name := range files {
		s, err := openSource(name, stdin)
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
		if _, err := f.options(s); err != nil {
			return err
		}
		if total >= 0 && s.size >= 0 {
			total += s.size
		} else {
			total = -1
		}
	}
	cl, cctx, cancel, err := f.conn.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer cancel()

	start := time.Now()
	w := newBatchWriter(cctx, cl, f.conn.db, f.parallel, memory.DefaultAllocator, func(err error) error { return f.conn.callError("", err) })
	prog := newWriteProgress(stderr, f.progress, total, start)
	var done atomic.Int64 // bytes of the finished sources
	var cur atomic.Pointer[input.Reader]
	stopProgress := prog.run(func() (int64, int64) {
		n := done.Load()
		if r := cur.Load(); r != nil {
			n += (*r).BytesRead()
		}
		return n, w.acked.Load()
	})
	readErr := func() error {
		for _, s := range srcs {
			opts, _ := f.options(s)
			r, err := input.Open(s.name, s.r, s.size, opts)
			if err != nil {
				return err
			}
			cur.Store(&r)
			for {
				b, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					r.Close()
					return err
				}
				if !w.send(pendingBatch{file: s.name, batch: b}) {
					r.Close()
					return nil // the writer failed; it says why
				}
			}
			done.Add(r.BytesRead())
			cur.Store(nil)
			if err := r.Close(); err != nil {
				return err
			}
		}
		return nil
	}()
	putErr := w.close()
	stopProgress()
	rows := w.acked.Load()
	elapsed := time.Since(start)
	written := fmt.Sprintf("%s rows were durably written (acknowledged by the server)", groupDigits(rows))
	if putErr != nil {
		return fmt.Errorf("%w\n  %s", putErr, written)
	}
	if readErr != nil {
		if errors.Is(readErr, context.Canceled) || ctx.Err() != nil {
			return fmt.Errorf("interrupted: %s; the rest was not sent", written)
		}
		return fmt.Errorf("%w\n  nothing from there on was sent; %s", readErr, written)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %s", written)
	}
	fmt.Fprintf(stdout, "wrote %s rows in %s (%s rows/s)\n", groupDigits(rows), roundDuration(elapsed), shortRate(float64(rows)/elapsed.Seconds()))
	return nil
}

// shortRate is a rate as 1.26M, 845k, 12.
func shortRate(r float64) string {
	switch {
	case r >= 1e9:
		return fmt.Sprintf("%.2fG", r/1e9)
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.0fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}

// describeBatch names where a batch's rows come from: the file and its
// lines, else its rows.
func describeBatch(p pendingBatch) string {
	b := p.batch
	if b.FirstLine > 0 {
		if b.FirstLine == b.LastLine {
			return fmt.Sprintf("%s line %s", p.file, groupDigits(b.FirstLine))
		}
		return fmt.Sprintf("%s lines %s-%s", p.file, groupDigits(b.FirstLine), groupDigits(b.LastLine))
	}
	return fmt.Sprintf("%s rows %s-%s", p.file, groupDigits(b.FirstRow+1), groupDigits(b.LastRow+1))
}
