package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config is one run: writers, queriers or both (mixed).
type Config struct {
	DB, Table string
	// Duration is how long the workers run; Interval how often a row of
	// every kind is reported.
	Duration, Interval time.Duration
	// DrainTimeout is how long writers wait, after the end, for the
	// acknowledgements of the batches they sent.
	DrainTimeout time.Duration
	// Write and Query are the workers; at least one is set.
	Write *WriteConfig
	Query *QueryConfig
	// Dial makes every worker's client; the context given carries
	// Run's values (the call headers).
	Dial Dialer
	// Mem is where batches are built and results read; nil is
	// memory.DefaultAllocator.
	Mem memory.Allocator
	// Progress, if set, gets a line of every kind every interval.
	Progress io.Writer
	// Report, if set, gets the rows of every interval and the totals; Run
	// closes it.
	Report Sink
}

// DefaultConfig is a run of neither writers nor queriers: set one.
func DefaultConfig() Config {
	return Config{DB: "bench", Table: "cpu", Duration: 30 * time.Second, Interval: 5 * time.Second, DrainTimeout: 10 * time.Second}
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.DB == "" || c.Table == "" {
		errs = append(errs, fmt.Errorf("database %q, table %q: both must be given", c.DB, c.Table))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %s: want more than 0", c.Duration))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval %s: want more than 0", c.Interval))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("drain timeout %s: want 0 or more", c.DrainTimeout))
	}
	if c.Write == nil && c.Query == nil {
		errs = append(errs, errors.New("neither writers nor queries"))
	}
	if c.Write != nil {
		if err := c.Write.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Query != nil {
		if err := c.Query.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Dial == nil {
		errs = append(errs, errors.New("no Dial"))
	}
	return errors.Join(errs...)
}

// Run runs cfg until its Duration has passed or ctx is done, and returns
// what it measured. The error is of the setup (a client that could not be
// made, a table to query that is not there) or of the report; the summary
// is there whenever the workers ran.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := newRun(ctx, cfg)
	if err == nil {
		defer r.close()
		if cfg.Write == nil {
			err = r.preflight(ctx)
		}
	}
	if err != nil {
		if cfg.Report != nil {
			cfg.Report.Close() // an empty report, still well-formed
		}
		return nil, err
	}
	return r.run(ctx)
}

// run is the state of one Run.
type run struct {
	cfg      Config
	mem      memory.Allocator
	rec      *recorder
	writers  []*writer
	queriers []*querier
	clients  []*flightsql.Client

	start    time.Time
	totals   map[*kindStats]*counters
	spare    *counters
	sinkErr  error
	progress io.Writer
}

func newRun(ctx context.Context, cfg Config) (*run, error) {
	r := &run{cfg: cfg, mem: cfg.Mem, progress: cfg.Progress, spare: &counters{}, totals: map[*kindStats]*counters{}}
	if r.mem == nil {
		r.mem = memory.DefaultAllocator
	}
	var names []string
	if cfg.Write != nil {
		names = append(names, KindWrite)
	}
	if cfg.Query != nil {
		for _, q := range cfg.Query.Queries {
			names = append(names, q.Kind)
		}
	}
	r.rec = newRecorder(names)
	for _, k := range r.rec.kinds {
		r.totals[k] = &counters{}
	}
	if err := r.makeWorkers(ctx); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *run) dial(ctx context.Context) (*flightsql.Client, *countingClient, error) {
	raw, err := r.cfg.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.clients = append(r.clients, raw)
	cl, cc := wrapCounting(raw, r.mem)
	return cl, cc, nil
}

func (r *run) makeWorkers(ctx context.Context) error {
	if w := r.cfg.Write; w != nil {
		var budget *atomic.Int64
		if w.Rows > 0 {
			budget = &atomic.Int64{}
			budget.Store(w.Rows)
		}
		var clock func() time.Time
		if w.Span > 0 {
			clock = backfillClock(time.Now(), w.Span, w.Rows, w.BatchRows)
		}
		for i := range w.Writers {
			cl, cc, err := r.dial(ctx)
			if err != nil {
				return fmt.Errorf("client of writer %d: %w", i, err)
			}
			gen, err := NewGenerator(r.mem, GenConfig{Writer: i, Writers: w.Writers, BatchRows: w.BatchRows, Hosts: w.Hosts, Now: clock})
			if err != nil {
				return err
			}
			r.writers = append(r.writers, &writer{cfg: *w, db: r.cfg.DB, table: r.cfg.Table, cl: cl, sent: cc,
				mem: r.mem, gen: gen, stats: r.rec.kind(KindWrite), budget: budget})
		}
	}
	if q := r.cfg.Query; q != nil {
		stats := make([]*kindStats, len(q.Queries))
		for i, qq := range q.Queries {
			stats[i] = r.rec.kind(qq.Kind)
		}
		for i := range q.Concurrency {
			cl, _, err := r.dial(ctx)
			if err != nil {
				return fmt.Errorf("client of querier %d: %w", i, err)
			}
			r.queriers = append(r.queriers, &querier{id: i, cfg: *q, db: r.cfg.DB, table: r.cfg.Table, cl: cl,
				stats: stats, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))})
		}
	}
	return nil
}

// close releases what the workers did not (generators of writers that
// never ran) and closes the clients.
func (r *run) close() {
	for _, w := range r.writers {
		w.gen.Release()
	}
	for _, c := range r.clients {
		c.Close()
	}
	r.clients = nil
}

// preflight checks, before a run of queries alone, that the table is
// there: a run against a table not written yet would only count
// NOT_FOUND.
func (r *run) preflight(ctx context.Context) error {
	q := r.queriers[0]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, _, err := q.execute(ctx, Query{SQL: "SELECT count(*) FROM {table} WHERE false"}.render(r.cfg.DB, r.cfg.Table, 1, q.rng))
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("table %s.%s: %w (write it first, e.g. with apron bench write)", r.cfg.DB, r.cfg.Table, callError{err})
	}
	return fmt.Errorf("checking table %s.%s: %w", r.cfg.DB, r.cfg.Table, callError{err})
}

func (r *run) run(ctx context.Context) (*Summary, error) {
	stop := make(chan struct{})
	// Writes outlive stop by the drain, so that every batch sent is
	// acknowledged; queries end with stop.
	writeCtx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWrites()
	queryCtx, cancelQueries := context.WithCancel(ctx)
	defer cancelQueries()

	ready := make(chan struct{})
	var readyOnce sync.Once
	if len(r.writers) == 0 {
		close(ready)
	}
	r.start = time.Now()
	var writers, queriers sync.WaitGroup
	for _, w := range r.writers {
		w.onAck = func() { readyOnce.Do(func() { close(ready) }) }
		writers.Go(func() { w.run(writeCtx, stop) })
	}
	for _, q := range r.queriers {
		queriers.Go(func() { q.run(queryCtx, stop, ready) })
	}
	// Writers stop on their own only when WriteConfig.Rows are sent:
	// that ends the run.
	writersDone := make(chan struct{})
	if len(r.writers) > 0 {
		go func() {
			writers.Wait()
			close(writersDone)
		}()
	}

	end := r.start.Add(r.cfg.Duration)
	from := r.start
	t := time.NewTimer(0)
	defer t.Stop()
loop:
	for k := 1; ; k++ {
		// Ticks at start + k·interval, not drifting; the last interval is
		// the rest of the run, drain included.
		next := r.start.Add(time.Duration(k) * r.cfg.Interval)
		last := !next.Before(end)
		if last {
			next = end
		}
		t.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			break loop
		case <-writersDone:
			break loop
		case <-t.C:
		}
		if last {
			break
		}
		now := time.Now()
		r.emit(from, now)
		from = now
	}

	close(stop)
	cancelQueries()
	queriers.Wait()
	if !waitTimeout(&writers, r.cfg.DrainTimeout) {
		cancelWrites()
		writers.Wait()
	}
	finish := time.Now()
	r.emit(from, finish)

	sum := &Summary{Start: r.start, Elapsed: finish.Sub(r.start)}
	for _, k := range r.rec.kinds {
		ks := newKindSummary(k, k.name == KindWrite, r.start, sum.Elapsed, r.totals[k])
		sum.Kinds = append(sum.Kinds, ks)
		r.write(ks.Row)
	}
	if r.cfg.Report != nil {
		if err := r.cfg.Report.Close(); err != nil && r.sinkErr == nil {
			r.sinkErr = err
		}
	}
	if r.sinkErr != nil {
		return sum, fmt.Errorf("writing the report: %w", r.sinkErr)
	}
	return sum, nil
}

// emit reports every kind's counters from from to to and adds them to
// the totals.
func (r *run) emit(from, to time.Time) {
	for _, k := range r.rec.kinds {
		c := k.take(r.spare)
		r.totals[k].merge(c)
		row := newRow(ScopeInterval, k.name, from, r.start, to.Sub(from), c)
		r.spare = c
		if r.progress != nil {
			writeProgress(r.progress, row, k.name == KindWrite)
		}
		r.write(row)
	}
}

// write sends row to the report; after the first error it stops trying.
func (r *run) write(row Row) {
	if r.cfg.Report == nil || r.sinkErr != nil {
		return
	}
	r.sinkErr = r.cfg.Report.WriteRow(row)
}

// waitTimeout waits for wg for up to d; it tells whether wg was done.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
