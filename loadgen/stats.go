package loadgen

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/internal/grpccode"
)

// counters are what is counted of one kind of operation over a span of
// time.
type counters struct {
	hist   Histogram // latency of the operations that succeeded
	rows   int64
	bytes  int64
	errors int64
	codes  map[codes.Code]int64
}

func (c *counters) reset() {
	c.hist.Reset()
	c.rows, c.bytes, c.errors = 0, 0, 0
	clear(c.codes)
}

func (c *counters) merge(o *counters) {
	c.hist.Merge(&o.hist)
	c.rows += o.rows
	c.bytes += o.bytes
	c.errors += o.errors
	for k, v := range o.codes {
		c.addCode(k, v)
	}
}

func (c *counters) addCode(code codes.Code, n int64) {
	if c.codes == nil {
		c.codes = map[codes.Code]int64{}
	}
	c.codes[code] += n
}

// kindStats is one kind's counters: those of the current interval, and
// the first error message of each code for the summary. Workers record
// into it concurrently; the interval loop takes the interval's counters.
type kindStats struct {
	name string
	mu   struct {
		sync.Mutex
		cur      *counters
		firstErr map[codes.Code]string
	}
}

func (k *kindStats) ok(lat time.Duration, rows, bytes int64) {
	k.mu.Lock()
	c := k.mu.cur
	c.hist.Record(lat)
	c.rows += rows
	c.bytes += bytes
	k.mu.Unlock()
}

// fail counts n failed operations of err.
func (k *kindStats) fail(err error, n int64) {
	code, msg := errorCode(err)
	k.mu.Lock()
	k.mu.cur.errors += n
	k.mu.cur.addCode(code, n)
	if _, ok := k.mu.firstErr[code]; !ok {
		if k.mu.firstErr == nil {
			k.mu.firstErr = map[codes.Code]string{}
		}
		k.mu.firstErr[code] = msg
	}
	k.mu.Unlock()
}

// take returns the counters since the last take and puts spare, reset,
// in their place.
func (k *kindStats) take(spare *counters) *counters {
	spare.reset()
	k.mu.Lock()
	c := k.mu.cur
	k.mu.cur = spare
	k.mu.Unlock()
	return c
}

func (k *kindStats) firstErrors() map[codes.Code]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[codes.Code]string, len(k.mu.firstErr))
	for c, m := range k.mu.firstErr {
		out[c] = m
	}
	return out
}

// recorder holds the kinds of a run, in report order.
type recorder struct {
	kinds  []*kindStats
	byName map[string]*kindStats
}

func newRecorder(names []string) *recorder {
	r := &recorder{byName: map[string]*kindStats{}}
	for _, n := range names {
		if r.byName[n] != nil {
			continue
		}
		k := &kindStats{name: n}
		k.mu.cur = &counters{}
		r.kinds = append(r.kinds, k)
		r.byName[n] = k
	}
	return r
}

func (r *recorder) kind(name string) *kindStats { return r.byName[name] }

// errorCode is the gRPC code of err and its message: that of a status
// anywhere in the chain, else CANCELLED or DEADLINE_EXCEEDED of a
// context error, else UNKNOWN.
func errorCode(err error) (codes.Code, string) {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st.Code(), st.Message()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, err.Error()
	}
	if st, ok := status.FromError(err); ok {
		return codes.Unknown, st.Message()
	}
	return codes.Unknown, err.Error()
}

// callError is a failed call's error as people read it, "CODE:
// message", rather than gRPC's "rpc error: code = … desc = …".
type callError struct{ err error }

func (e callError) Error() string {
	code, msg := errorCode(e.err)
	return CodeName(code) + ": " + msg
}

func (e callError) Unwrap() error { return e.err }

// CodeName is the canonical name of a gRPC code (UNAVAILABLE, …).
func CodeName(c codes.Code) string { return grpccode.Name(c) }

// formatCodes is m as "CODE=n;CODE=n", codes in numeric order.
func formatCodes(m map[codes.Code]int64) string {
	keys := make([]codes.Code, 0, len(m))
	for c, n := range m {
		if n > 0 {
			keys = append(keys, c)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, c := range keys {
		parts[i] = CodeName(c) + "=" + strconv.FormatInt(m[c], 10)
	}
	return strings.Join(parts, ";")
}
