package loadgen

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestGeneratorRowsValidAndUnique(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const writers, rows, hosts, batches = 3, 7, 10, 20
	before := time.Now()
	seenTime := map[int64]bool{}
	seenHost := map[string]bool{}
	for w := range writers {
		g, err := NewGenerator(mem, GenConfig{Writer: w, Writers: writers, BatchRows: rows, Hosts: hosts})
		if err != nil {
			t.Fatal(err)
		}
		last := int64(math.MinInt64)
		var lastReq int64 = -1
		for range batches {
			rec := g.Next()
			if !rec.Schema().Equal(Schema) || rec.NumRows() != rows {
				t.Fatalf("batch schema %s, %d rows", rec.Schema(), rec.NumRows())
			}
			for c, col := range rec.Columns() {
				if col.NullN() != 0 || col.Len() != rows {
					t.Fatalf("column %s: %d nulls, length %d", Schema.Field(c).Name, col.NullN(), col.Len())
				}
			}
			times := rec.Column(0).(*array.Timestamp)
			host := rec.Column(1).(*array.String)
			region := rec.Column(2).(*array.String)
			user, system := rec.Column(3).(*array.Float64), rec.Column(4).(*array.Float64)
			iowait, idle := rec.Column(5).(*array.Float64), rec.Column(6).(*array.Float64)
			reqs := rec.Column(8).(*array.Int64)
			for i := range rows {
				ts := int64(times.Value(i))
				if ts <= last {
					t.Fatalf("writer %d: time %d after %d: not increasing", w, ts, last)
				}
				last = ts
				if ts%writers != int64(w) {
					t.Fatalf("writer %d: time %d ≢ %d (mod %d)", w, ts, w, writers)
				}
				if seenTime[ts] {
					t.Fatalf("time %d written twice", ts)
				}
				seenTime[ts] = true
				if d := time.Unix(0, ts).Sub(before); d < -time.Microsecond || d > time.Minute {
					t.Fatalf("time %v is %v from the clock", time.Unix(0, ts), d)
				}
				h := host.Value(i)
				num, _ := strings.CutPrefix(h, "host-")
				n, err := strconv.Atoi(num)
				if err != nil || n < 0 || n >= hosts || HostName(n) != h {
					t.Fatalf("host %q: not one of host-0 … host-%d", h, hosts-1)
				}
				seenHost[h] = true
				if region.Value(i) != Regions[n%len(Regions)] {
					t.Fatalf("host %s in region %s, want %s", h, region.Value(i), Regions[n%len(Regions)])
				}
				sum := user.Value(i) + system.Value(i) + iowait.Value(i) + idle.Value(i)
				if math.Abs(sum-100) > 1e-9 || user.Value(i) < 0 || idle.Value(i) < 0 {
					t.Fatalf("usages user %v system %v iowait %v idle %v: want ≥ 0, summing to 100", user.Value(i), system.Value(i), iowait.Value(i), idle.Value(i))
				}
				if reqs.Value(i) != lastReq+1 {
					t.Fatalf("requests %d after %d", reqs.Value(i), lastReq)
				}
				lastReq = reqs.Value(i)
			}
			rec.Release()
		}
		g.Release()
	}
	if len(seenHost) != hosts {
		t.Errorf("%d hosts written, want all %d", len(seenHost), hosts)
	}
}

// TestGeneratorClockBackwards: a clock that stands still or goes back
// does not repeat or reorder times.
func TestGeneratorClockBackwards(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	clock := time.Unix(1_700_000_000, 0)
	g, err := NewGenerator(mem, GenConfig{Writer: 1, Writers: 2, BatchRows: 5, Hosts: 3, Now: func() time.Time {
		clock = clock.Add(-time.Second)
		return clock
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	last := int64(math.MinInt64)
	for range 10 {
		rec := g.Next()
		for _, ts := range rec.Column(0).(*array.Timestamp).TimestampValues() {
			if int64(ts) <= last || int64(ts)%2 != 1 {
				t.Fatalf("time %d after %d (want increasing, odd)", ts, last)
			}
			last = int64(ts)
		}
		rec.Release()
	}
}

// TestGeneratorBatchesOutliveIt: a batch stays valid after later Next
// calls and after Release (the writer's send may still hold one).
func TestGeneratorBatchesOutliveIt(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g, err := NewGenerator(mem, GenConfig{Writer: 0, Writers: 1, BatchRows: 4, Hosts: 2})
	if err != nil {
		t.Fatal(err)
	}
	first := g.Next()
	want := first.Column(0).(*array.Timestamp).Value(0)
	for range 5 {
		g.Next().Release()
	}
	g.Release()
	if got := first.Column(0).(*array.Timestamp).Value(0); got != want || first.Column(1).(*array.String).Value(0) != "host-0" {
		t.Errorf("first batch changed: time %v, want %v; host %q", got, want, first.Column(1).(*array.String).Value(0))
	}
	first.Release()
}

func TestGenConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  GenConfig
	}{
		{"no_writers", GenConfig{Writer: 0, Writers: 0, BatchRows: 1, Hosts: 1}},
		{"writer_out_of_range", GenConfig{Writer: 2, Writers: 2, BatchRows: 1, Hosts: 1}},
		{"no_rows", GenConfig{Writer: 0, Writers: 1, BatchRows: 0, Hosts: 1}},
		{"no_hosts", GenConfig{Writer: 0, Writers: 1, BatchRows: 1, Hosts: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewGenerator(memory.DefaultAllocator, tc.cfg); err == nil {
				t.Errorf("NewGenerator(%+v) succeeded, want an error", tc.cfg)
			}
		})
	}
}

func TestTemplateCount(t *testing.T) {
	for _, tc := range []struct{ rows, hosts, want int }{
		{1000, 1000, minTemplates},        // one template covers the hosts: a few for variety
		{100, 1000, 10},                   // ten batches to go round the hosts
		{1, 1000, maxTemplates},           // capped
		{100_000, 1000, 2},                // big batches: bounded memory
		{1_000_000, 10, 1},                // never none
		{maxTemplateRows, 1, 1},           //
		{maxTemplateRows / 8, 1 << 30, 8}, //
	} {
		if got := templateCount(tc.rows, tc.hosts); got != tc.want {
			t.Errorf("templateCount(%d rows, %d hosts) = %d, want %d", tc.rows, tc.hosts, got, tc.want)
		}
	}
}

// BenchmarkGenerator is how many rows a second one writer's generator
// makes: the ceiling it puts on a writer, far above what a server takes.
func BenchmarkGenerator(b *testing.B) {
	for _, rows := range []int{1000, 100_000} {
		b.Run(rowsName(rows), func(b *testing.B) {
			g, err := NewGenerator(memory.DefaultAllocator, GenConfig{Writer: 0, Writers: 1, BatchRows: rows, Hosts: 1000})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Release()
			b.ResetTimer()
			for b.Loop() {
				g.Next().Release()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkGeneratorIPC is the generator and the Arrow IPC encoding a
// writer does before gRPC: the whole client-side cost of a batch but the
// network.
func BenchmarkGeneratorIPC(b *testing.B) {
	for _, rows := range []int{1000, 100_000} {
		b.Run(rowsName(rows), func(b *testing.B) {
			g, err := NewGenerator(memory.DefaultAllocator, GenConfig{Writer: 0, Writers: 1, BatchRows: rows, Hosts: 1000})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Release()
			var sink discardStream
			w := flight.NewRecordWriter(&sink, ipc.WithSchema(Schema))
			defer w.Close()
			b.ResetTimer()
			for b.Loop() {
				rec := g.Next()
				if err := w.Write(rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(sink.bytes)/float64(b.N)/float64(rows), "B/row")
		})
	}
}

func rowsName(n int) string {
	if n >= 1000 {
		return strconv.Itoa(n/1000) + "k_rows"
	}
	return strconv.Itoa(n) + "_rows"
}

// discardStream is a flight.DataStreamWriter that counts and drops.
type discardStream struct{ bytes int64 }

func (d *discardStream) Send(fd *flight.FlightData) error {
	d.bytes += int64(len(fd.DataHeader) + len(fd.DataBody))
	return nil
}

// TestBackfillClock: with a time span, the writers' rows cover the span
// before the start evenly, each writer's in order, even when one writer
// sends more batches than the others, and none is later than the clock.
func TestBackfillClock(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const writers, batchRows, rows = 4, 100, 40_000
	const span = 24 * time.Hour
	start := time.Now()
	clock := backfillClock(start, span, rows, batchRows)
	var gens []*Generator
	for w := range writers {
		g, err := NewGenerator(mem, GenConfig{Writer: w, Writers: writers, BatchRows: batchRows, Hosts: 10, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Release()
		gens = append(gens, g)
	}
	// Writer 0 sends half the batches, the others the rest in turn.
	prev := make([]int64, writers)
	for w := range prev {
		prev[w] = math.MinInt64
	}
	var firsts []int64
	for b := range rows / batchRows {
		w := 0
		if b%2 == 1 {
			w = 1 + (b/2)%(writers-1)
		}
		rec := gens[w].Next()
		times := rec.Column(0).(*array.Timestamp)
		for i := range times.Len() {
			ts := int64(times.Value(i))
			if ts <= prev[w] {
				t.Fatalf("writer %d batch %d: time %d after %d", w, b, ts, prev[w])
			}
			prev[w] = ts
		}
		firsts = append(firsts, int64(times.Value(0)))
		rec.Release()
	}
	step := span / (rows / batchRows) // between batches
	for b, ts := range firsts {
		want := start.Add(-span).Add(time.Duration(b) * step)
		if d := time.Unix(0, ts).Sub(want); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("batch %d: first row %v from its place in the span, want within 1µs", b, d)
		}
	}
	// Past rows, the clock's.
	if got := clock(); got.Before(start) || got.After(time.Now()) {
		t.Errorf("past the rows: %v, want the clock (%v)", got, start)
	}
}
