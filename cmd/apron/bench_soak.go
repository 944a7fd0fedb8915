package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/loadgen"
)

const soakShort = "Write and query for long, failing if the server's memory, buffer, files or goroutines grow without bound, or a row is lost"

// soakDefaultDuration is the length of a soak without --duration.
const soakDefaultDuration = 10 * time.Minute

// soakFlags are the flags of apron bench soak beyond those of mixed.
type soakFlags struct {
	cfg loadgen.SoakConfig
}

func (s *soakFlags) addTo(cmd *cobra.Command, f *benchFlags) {
	fs := cmd.Flags()
	s.cfg = loadgen.DefaultSoakConfig()
	f.duration = soakDefaultDuration
	fs.Lookup("duration").DefValue = soakDefaultDuration.String()
	fs.StringVar(&s.cfg.MetricsURL, "metrics-url", "http://127.0.0.1:8083/metrics", "the server's Prometheus endpoint (apron serve --metrics-addr), sampled every --sample-interval")
	fs.DurationVar(&s.cfg.Every, "sample-interval", s.cfg.Every, "how often the server's metrics are sampled")
	fs.DurationVar(&s.cfg.Warmup, "warmup", s.cfg.Warmup, "the start of the run left out of the judgement (the heap and the first segments grow to their steady size)")
	fs.Float64Var(&s.cfg.Factor, "growth-factor", s.cfg.Factor, "a metric fails if the maximum of the last third of the samples exceeds this times the maximum of the first third, plus its slack")
	cmd.Example = `  apron serve --segment-duration 10s &
  apron bench soak --duration 1h --writers 4 --concurrency 2 --metrics-url http://127.0.0.1:8083/metrics`
	cmd.Long = soakShort + `.

Runs writers and queriers as 'apron bench mixed' does, and meanwhile samples
the server's /metrics every --sample-interval: its resident memory
(process_resident_memory_bytes), buffered bytes (apron_buffer_bytes), open
file descriptors (process_open_fds) and goroutines (go_goroutines). Start
the server with a small --segment-duration, so that segments roll over and
persist many times during the soak.

At the end it fails (exit code 1, saying why) if, after --warmup, the
maximum of a metric over the last third of the samples exceeds
--growth-factor times its maximum over the first third plus a slack (128
MiB of memory, 64 MiB of buffer, 32 fds, 64 goroutines), or if the table
holds fewer rows than it held at the start plus every row acknowledged, or
some row twice (every row has a time of its own).`
}

// runSoak runs cfg (writers and queriers) while sampling the server, then
// judges growth and counts the table.
func runSoak(ctx context.Context, f *benchFlags, cfg loadgen.Config, stdout, stderr io.Writer) error {
	started := false
	defer func() {
		if !started && cfg.Report != nil {
			cfg.Report.Close() // an empty report, still well-formed, as loadgen.Run leaves it
		}
	}()
	sampler, err := loadgen.NewSampler(f.soak.cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	cctx := f.conn.callContext(ctx)
	cl, err := cfg.Dial(cctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	counters := []string{"apron_buffer_rollovers_total", "apron_persist_segments_total", "apron_persist_failures_total"}
	httpc := &http.Client{Timeout: 5 * time.Second}
	start, err := loadgen.Scrape(ctx, httpc, f.soak.cfg.MetricsURL, counters)
	if err != nil {
		return fmt.Errorf("%w (is --metrics-url the server's --metrics-addr?)", err)
	}
	before, err := loadgen.CountTable(cctx, cl, cfg.DB, cfg.Table)
	switch c := status.Code(err); {
	case err == nil:
	case c == codes.Unavailable || c == codes.Unauthenticated || c == codes.PermissionDenied || c == codes.DeadlineExceeded:
		return fmt.Errorf("counting the table before the soak: %w", err)
	default:
		fmt.Fprintf(stderr, "apron bench soak: %s.%s not counted (%v): counting from 0\n", cfg.DB, cfg.Table, err)
	}

	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sampler.Run(sctx) })
	started = true
	sum, err := loadgen.Run(cctx, cfg)
	stopSampling()
	wg.Wait()
	if sum != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "apron bench soak: interrupted: the verdict is of the run so far")
		}
		if werr := sum.WriteTable(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}

	// The end: counted even after a Ctrl-C.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(cctx), time.Minute)
	defer cancel()
	v := loadgen.SoakVerdict{Before: before}
	if w := sum.Kind(loadgen.KindWrite); w != nil {
		v.Acked = w.Rows
	}
	if v.After, err = loadgen.CountTable(ectx, cl, cfg.DB, cfg.Table); err != nil {
		return fmt.Errorf("counting the table after the soak: %w", err)
	}
	end, err := loadgen.Scrape(ectx, httpc, f.soak.cfg.MetricsURL, counters)
	if err != nil {
		return fmt.Errorf("after the soak: %w", err)
	}
	samples := sampler.Samples()
	if n, last := sampler.Errors(); n > 0 {
		fmt.Fprintf(stderr, "apron bench soak: %d of %d scrapes of %s failed, the last: %v\n", n, n+len(samples), f.soak.cfg.MetricsURL, last)
	}
	v.Growth, err = loadgen.JudgeGrowth(samples, f.soak.cfg)
	if err != nil {
		return fmt.Errorf("apron bench soak: %w", err)
	}
	fmt.Fprintln(stdout)
	if err := loadgen.WriteGrowth(stdout, v.Growth); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nrows: %d acknowledged; the table held %d, now %d (%d distinct times); lost %d, stored twice %d\n",
		v.Acked, v.Before.Rows, v.After.Rows, v.After.DistinctTimes, v.Lost(), v.Duplicated())
	d := func(name string) float64 { return end[name] - start[name] }
	fmt.Fprintf(stdout, "server: %.0f rollovers, %.0f segments persisted, %.0f failed persist steps\n",
		d(counters[0]), d(counters[1]), d(counters[2]))
	if d(counters[0]) == 0 {
		fmt.Fprintln(stderr, "apron bench soak: no segment rolled over during the soak: start the server with a smaller --segment-duration to soak rollovers and persists too")
	}
	if err := v.Err(); err != nil {
		return fmt.Errorf("soak failed:\n%w", err)
	}
	if n := sum.Errors(); n > 0 {
		return fmt.Errorf("%d operations failed (see the summary)", n)
	}
	fmt.Fprintln(stdout, "soak passed: nothing grew without bound, every acknowledged row is there once")
	return nil
}
