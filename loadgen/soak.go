package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// SoakSeries is one quantity a soak watches: a metric of the server's
// /metrics endpoint (summed over its labels), and the absolute slack its
// growth may have beyond the factor (a goroutine or two, a few fds, some
// megabytes of heap are noise, not a leak).
type SoakSeries struct {
	Metric string
	Slack  float64
}

// DefaultSoakSeries are what a soak of apron serve watches: its resident
// memory, the bytes of its buffer, its open file descriptors and its
// goroutines.
func DefaultSoakSeries() []SoakSeries {
	return []SoakSeries{
		{"process_resident_memory_bytes", 128 << 20},
		{"apron_buffer_bytes", 64 << 20},
		{"process_open_fds", 32},
		{"go_goroutines", 64},
	}
}

// SoakConfig is how a soak samples the server and judges growth.
type SoakConfig struct {
	// MetricsURL is the server's Prometheus endpoint, e.g.
	// http://127.0.0.1:8083/metrics.
	MetricsURL string
	// Every is how often it is sampled.
	Every time.Duration
	// Warmup is left out of the judgement: the heap, the caches and the
	// first segments grow to their steady size meanwhile.
	Warmup time.Duration
	// Factor and the series' slack bound growth: a series fails if the
	// maximum of the last third of the samples after Warmup exceeds
	// Factor times the maximum of the first third, plus its slack.
	Factor float64
	Series []SoakSeries
	// Client makes the requests; nil is a client with a 5s timeout.
	Client *http.Client
}

// DefaultSoakConfig samples every 5s, leaves out the first 30s, and fails
// growth past 1.5 times plus the slack.
func DefaultSoakConfig() SoakConfig {
	return SoakConfig{Every: 5 * time.Second, Warmup: 30 * time.Second, Factor: 1.5, Series: DefaultSoakSeries()}
}

// Validate says what is wrong with c.
func (c SoakConfig) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.MetricsURL, "http://") && !strings.HasPrefix(c.MetricsURL, "https://") {
		errs = append(errs, fmt.Errorf("metrics URL %q: want http://HOST:PORT/metrics (apron serve --metrics-addr)", c.MetricsURL))
	}
	if c.Every <= 0 {
		errs = append(errs, fmt.Errorf("sample interval %s: want more than 0", c.Every))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warm-up %s: want 0 or more", c.Warmup))
	}
	if c.Factor < 1 || math.IsNaN(c.Factor) || math.IsInf(c.Factor, 0) {
		errs = append(errs, fmt.Errorf("growth factor %v: want a number of at least 1", c.Factor))
	}
	if len(c.Series) == 0 {
		errs = append(errs, errors.New("no series to watch"))
	}
	return errors.Join(errs...)
}

// SoakSample is one scrape: the value of every series (absent if the
// metric was not there), at At.
type SoakSample struct {
	At     time.Time
	Values map[string]float64
}

// Sampler scrapes the server every SoakConfig.Every until its context
// ends. Safe for concurrent use.
type Sampler struct {
	cfg  SoakConfig
	mu   sync.Mutex
	got  []SoakSample
	errs int
	last error
}

// NewSampler makes a sampler of cfg (validated).
func NewSampler(cfg SoakConfig) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	return &Sampler{cfg: cfg}, nil
}

// Run samples at once and then every Every until ctx ends. A failed
// scrape is counted (Errors), not fatal: a server busy for a moment is
// what a soak is for.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sample(ctx context.Context) {
	names := make([]string, len(s.cfg.Series))
	for i, se := range s.cfg.Series {
		names[i] = se.Metric
	}
	v, err := Scrape(ctx, s.cfg.Client, s.cfg.MetricsURL, names)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.errs++
			s.last = err
		}
		return
	}
	s.got = append(s.got, SoakSample{At: time.Now(), Values: v})
}

// Samples are the samples so far.
func (s *Sampler) Samples() []SoakSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SoakSample(nil), s.got...)
}

// Errors is the number of failed scrapes and the last error.
func (s *Sampler) Errors() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs, s.last
}

// Scrape reads the Prometheus text exposition at url and returns the
// value of each of names, summed over its label sets (a metric not
// exposed is absent from the map).
func Scrape(ctx context.Context, c *http.Client, url string, names []string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("metrics %s: HTTP %s", url, resp.Status)
	}
	return parseMetrics(resp.Body, names)
}

func parseMetrics(r io.Reader, names []string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 || !want[line[:end]] {
			continue
		}
		rest := line[end:]
		if rest[0] == '{' {
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				return nil, fmt.Errorf("metrics line %q: unterminated labels", line)
			}
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest) // value [timestamp]
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:end]] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// SoakGrowth is the verdict on one series.
type SoakGrowth struct {
	Metric string
	// Samples judged (after the warm-up); First and Last the maxima of
	// their first and last thirds; Limit what Last may reach.
	Samples     int
	First, Last float64
	Limit       float64
	Grew        bool
	// Missing: the metric was in no judged sample (the server does not
	// expose it): a soak cannot vouch for it, so it fails too.
	Missing bool
}

// JudgeGrowth compares the last third of the samples taken after the
// warm-up with the first third. It needs at least 6 samples after the
// warm-up (two a third), else it returns an error saying how long to run.
func JudgeGrowth(samples []SoakSample, cfg SoakConfig) ([]SoakGrowth, error) {
	if len(samples) == 0 {
		return nil, errors.New("no sample of the server's metrics: is --metrics-url right?")
	}
	start := samples[0].At.Add(cfg.Warmup)
	var judged []SoakSample
	for _, s := range samples {
		if !s.At.Before(start) {
			judged = append(judged, s)
		}
	}
	if len(judged) < 6 {
		return nil, fmt.Errorf("%d samples after the %s warm-up, want at least 6: run longer than %s, or sample more often",
			len(judged), cfg.Warmup, cfg.Warmup+6*cfg.Every)
	}
	third := len(judged) / 3
	first, last := judged[:third], judged[len(judged)-third:]
	var out []SoakGrowth
	for _, se := range cfg.Series {
		g := SoakGrowth{Metric: se.Metric, Samples: len(judged)}
		f, okF := maxOf(first, se.Metric)
		l, okL := maxOf(last, se.Metric)
		g.First, g.Last = f, l
		g.Limit = cfg.Factor*f + se.Slack
		switch {
		case !okF || !okL:
			g.Missing, g.Grew = true, true
		case l > g.Limit:
			g.Grew = true
		}
		out = append(out, g)
	}
	return out, nil
}

func maxOf(samples []SoakSample, metric string) (float64, bool) {
	m, ok := math.Inf(-1), false
	for _, s := range samples {
		if v, has := s.Values[metric]; has {
			m, ok = max(m, v), true
		}
	}
	return m, ok
}

// WriteGrowth writes the verdicts as a table.
func WriteGrowth(w io.Writer, gs []SoakGrowth) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tsamples\tfirst third max\tlast third max\tlimit\tverdict\t")
	for _, g := range gs {
		verdict := "flat"
		switch {
		case g.Missing:
			verdict = "NOT EXPOSED"
		case g.Grew:
			verdict = "GREW"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", g.Metric, g.Samples, fmtQty(g.First), fmtQty(g.Last), fmtQty(g.Limit), verdict)
	}
	return tw.Flush()
}

func fmtQty(v float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	default:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

// TableCount is what a table holds: its rows and its distinct times
// (every row the writers send has a time of its own, so the two are equal
// unless a row was stored twice).
type TableCount struct {
	Rows, DistinctTimes int64
}

// CountTable counts db.table with SQL (0, 0 if it does not exist yet is
// not assumed: the error says so).
func CountTable(ctx context.Context, cl *flightsql.Client, db, table string) (TableCount, error) {
	sql := "SELECT count(*), count(DISTINCT time) FROM " + quoteIdent(db) + "." + quoteIdent(table)
	info, err := cl.Execute(ctx, sql)
	if err != nil {
		return TableCount{}, fmt.Errorf("%s: %w", sql, err)
	}
	var tc TableCount
	var n int
	for _, ep := range info.Endpoint {
		rdr, err := cl.DoGet(ctx, ep.Ticket)
		if err != nil {
			return TableCount{}, fmt.Errorf("%s: %w", sql, err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				a, okA := rec.Column(0).(*array.Int64)
				b, okB := rec.Column(1).(*array.Int64)
				if !okA || !okB {
					rdr.Release()
					return TableCount{}, fmt.Errorf("%s: columns %s, %s, want int64", sql, rec.Column(0).DataType(), rec.Column(1).DataType())
				}
				tc.Rows, tc.DistinctTimes = a.Value(i), b.Value(i)
				n++
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return TableCount{}, fmt.Errorf("%s: %w", sql, err)
		}
	}
	if n != 1 {
		return TableCount{}, fmt.Errorf("%s: %d rows, want 1", sql, n)
	}
	return tc, nil
}

// SoakVerdict is the end of a soak: the growth of every series and the
// rows accounted for.
type SoakVerdict struct {
	Growth []SoakGrowth
	// Before and After count the table at the start and the end; Acked
	// is the rows the writers had acknowledged.
	Before, After TableCount
	Acked         int64
}

// Lost is the acknowledged rows the table does not hold.
func (v SoakVerdict) Lost() int64 { return max(0, v.Acked-(v.After.Rows-v.Before.Rows)) }

// Duplicated is the rows stored more than once.
func (v SoakVerdict) Duplicated() int64 { return v.After.Rows - v.After.DistinctTimes }

// Err says why the soak failed, or nil.
func (v SoakVerdict) Err() error {
	var errs []error
	for _, g := range v.Growth {
		switch {
		case g.Missing:
			errs = append(errs, fmt.Errorf("%s: not exposed by the server, cannot be watched", g.Metric))
		case g.Grew:
			errs = append(errs, fmt.Errorf("%s grew without bound: %s in the last third, over the limit %s (first third %s)",
				g.Metric, fmtQty(g.Last), fmtQty(g.Limit), fmtQty(g.First)))
		}
	}
	if n := v.Lost(); n > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged rows lost: %d acknowledged, the table went from %d to %d rows", n, v.Acked, v.Before.Rows, v.After.Rows))
	}
	if n := v.Duplicated(); n > 0 {
		errs = append(errs, fmt.Errorf("%d rows stored twice: %d rows, %d distinct times", n, v.After.Rows, v.After.DistinctTimes))
	}
	return errors.Join(errs...)
}
