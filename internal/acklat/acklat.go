// Package acklat is what the acknowledgement benchmarks share (buffer's
// BenchmarkAckWhilePersisting, query's BenchmarkAckWhileQuerying): a
// writer paced as a client sends, and the percentiles of its latencies.
package acklat

import (
	"slices"
	"testing"
	"time"
)

// Paced times writes started at most one every Every, as a client sends
// them: an unpaced writer without fsync would fill the buffer, and one
// with it measures its own queue.
type Paced struct {
	Every time.Duration
	next  time.Time
}

// Time waits for the next slot (the first call starts the schedule) and
// returns how long write took.
func (p *Paced) Time(write func()) time.Duration {
	if p.next.IsZero() {
		p.next = time.Now()
	}
	p.next = p.next.Add(p.Every)
	time.Sleep(time.Until(p.next))
	start := time.Now()
	write()
	return time.Since(start)
}

// Restart makes the next Time start a new schedule.
func (p *Paced) Restart() { p.next = time.Time{} }

// Report reports p50, p99, p99.9 and max of lat in ms, as metrics
// name_p50_ms and so on, and logs them.
func Report(b *testing.B, name string, lat []time.Duration) {
	if len(lat) == 0 {
		b.Fatalf("%s: no latencies", name)
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6
	}
	b.ReportMetric(at(0.5), name+"_p50_ms")
	b.ReportMetric(at(0.99), name+"_p99_ms")
	b.ReportMetric(at(0.999), name+"_p99.9_ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, name+"_max_ms")
	b.Logf("%s: %d writes, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms", name, len(lat), at(0.5), at(0.99), at(0.999), float64(lat[len(lat)-1])/1e6)
}
