package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts durations in log-spaced buckets, as HDR histograms do:
// exact below 256ns, then 128 buckets per power of two, so a quantile is
// within 0.4% of the true sample (the bucket's middle). Memory is fixed
// (~60 KB) however many samples it holds and however long the run, which
// keeping every sample would not be. The zero value is empty and ready.
type Histogram struct {
	counts   []uint64
	n        uint64
	min, max time.Duration
	sum      time.Duration
}

const (
	histSubBits = 8
	histExact   = 1 << histSubBits        // values below are their own bucket
	histHalf    = histExact / 2           // buckets per power of two above
	histBuckets = histExact + 56*histHalf // up to 2^63 ns
)

// bucketOf is the bucket of v ns.
func bucketOf(v uint64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits // ≥ 1
	mantissa := v >> shift               // in [histHalf, histExact)
	return histExact + (shift-1)*histHalf + int(mantissa-histHalf)
}

// bucketRange is the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width uint64) {
	if i < histExact {
		return uint64(i), 1
	}
	k := i - histExact
	shift := k/histHalf + 1
	mantissa := uint64(k%histHalf + histHalf)
	return mantissa << shift, 1 << shift
}

// Record adds one sample; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += d
}

// Merge adds the samples of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Reset empties h, keeping its buckets for reuse.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.n, h.min, h.max, h.sum = 0, 0, 0, 0
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are the exact smallest and largest samples (0 when empty).
func (h *Histogram) Min() time.Duration { return h.min }
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile is the q-quantile (0 < q ≤ 1) by nearest rank: the sample at
// rank ⌈q·n⌉, as the middle of its bucket, kept within [Min, Max] so that
// quantiles never pass the exact extremes (p50 ≤ p99 ≤ max always holds).
// It is 0 when h is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, width := bucketRange(i)
			v := time.Duration(lo + (width-1)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}
