package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile of sorted samples.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func TestHistogramSmallValuesExact(t *testing.T) {
	var h Histogram
	for v := 100; v >= 1; v-- { // order must not matter
		h.Record(time.Duration(v))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if h.Min() != 1 || h.Max() != 100 || h.Count() != 100 || h.Mean() != 50 {
		t.Errorf("min %v max %v count %d mean %v, want 1 100 100 50", h.Min(), h.Max(), h.Count(), h.Mean())
	}
}

func TestHistogramKnownMilliseconds(t *testing.T) {
	// 1ms … 1000ms: the quantiles are i·ms at rank i.
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}} {
		got := h.Quantile(tc.q)
		if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 1.0/256 {
			t.Errorf("Quantile(%v) = %v, want %v within 0.4%% (off by %.3f%%)", tc.q, got, tc.want, rel*100)
		}
	}
	if h.Quantile(1) != time.Second || h.Max() != time.Second {
		t.Errorf("Quantile(1) %v, Max %v: want exactly 1s", h.Quantile(1), h.Max())
	}
}

func TestHistogramRandomAgainstSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []time.Duration
	for range 100_000 {
		// Log-normal around 2ms: the shape of real latencies.
		d := time.Duration(math.Exp(rng.NormFloat64()*1.5) * float64(2*time.Millisecond))
		h.Record(d)
		all = append(all, d)
	}
	slices.Sort(all)
	prev := time.Duration(0)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		got, want := h.Quantile(q), exactQuantile(all, q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/256 {
			t.Errorf("Quantile(%v) = %v, exact %v: off by %.3f%%", q, got, want, rel*100)
		}
		if got < prev {
			t.Errorf("Quantile(%v) = %v below the previous quantile %v", q, got, prev)
		}
		prev = got
	}
	if h.Max() != all[len(all)-1] || h.Min() != all[0] {
		t.Errorf("min %v max %v, want %v %v", h.Min(), h.Max(), all[0], all[len(all)-1])
	}
}

func TestHistogramMergeAndReset(t *testing.T) {
	var a, b, both Histogram
	for i := range 5000 {
		d := time.Duration(i*i) * time.Microsecond
		both.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	a.Merge(&Histogram{}) // merging an empty one changes nothing
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		if a.Quantile(q) != both.Quantile(q) {
			t.Errorf("merged Quantile(%v) = %v, want %v", q, a.Quantile(q), both.Quantile(q))
		}
	}
	if a.Count() != both.Count() || a.Min() != both.Min() || a.Max() != both.Max() || a.Mean() != both.Mean() {
		t.Errorf("merged count/min/max/mean %d %v %v %v, want %d %v %v %v", a.Count(), a.Min(), a.Max(), a.Mean(), both.Count(), both.Min(), both.Max(), both.Mean())
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 {
		t.Errorf("after Reset: count %d p50 %v max %v", a.Count(), a.Quantile(0.5), a.Max())
	}
	a.Record(7 * time.Second)
	if a.Min() != 7*time.Second || a.Quantile(0.5) != 7*time.Second {
		t.Errorf("one sample after Reset: min %v p50 %v, want 7s", a.Min(), a.Quantile(0.5))
	}
}

func TestHistogramEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Quantile(0.99) != 0 || h.Max() != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Errorf("empty histogram: p99 %v max %v mean %v count %d", h.Quantile(0.99), h.Max(), h.Mean(), h.Count())
	}
	h.Record(-time.Second)
	if h.Quantile(0.5) != 0 || h.Min() != 0 {
		t.Errorf("a negative sample: p50 %v min %v, want 0", h.Quantile(0.5), h.Min())
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in a bucket that holds it, of width at most 1/128
	// of its low end, and bucket indexes grow with the value.
	prev := -1
	check := func(v uint64) {
		i := bucketOf(v)
		lo, width := bucketRange(i)
		if v < lo || v >= lo+width {
			t.Fatalf("value %d in bucket %d = [%d, %d)", v, i, lo, lo+width)
		}
		if lo >= histExact && width*128 > lo {
			t.Fatalf("bucket %d [%d, +%d) wider than 1/128", i, lo, width)
		}
		if i < prev || i >= histBuckets {
			t.Fatalf("value %d: bucket %d after %d (of %d)", v, i, prev, histBuckets)
		}
		prev = i
	}
	for v := uint64(0); v < 1<<16; v++ {
		check(v)
	}
	for v := uint64(1 << 16); v < math.MaxInt64/3; v = v*3/2 + 1 {
		check(v)
	}
	check(math.MaxInt64)
}
