package objstore

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrument returns s with every request counted and timed in reg:
//
//   - apron_objstore_requests_total{op,result}: op put, get, get_range,
//     list, delete, attributes or clean; result ok or the ErrorClass of
//     the error (not_found is the answer of a Get of a missing name, not a
//     fault). A Get or GetRange is counted when its reader is closed,
//     with the class of the error a read of it failed with, if one did.
//   - apron_objstore_request_duration_seconds{op}: to the answer; for a
//     Get or GetRange, to the reader (reading is the caller's pace).
//   - apron_objstore_bytes_total{op,direction}: bytes a Put read from its
//     caller (direction upload) and the callers read from Get and
//     GetRange readers (download), counted as they go.
//
// These count the calls of the Store interface, by everyone (persist,
// the query engine's file cache, plain Flight reads), once each. The
// buffer's apron_objstore_failures_total{op,class} is another thing: the
// failed attempts of the persist requests, those the storage client
// retries inside one call included.
//
// The returned store keeps the optional capability of s that callers look
// for (Clean, of Local). A nil s is returned as nil (no store), a nil reg
// leaves s as it is.
func Instrument(s Store, reg prometheus.Registerer) Store {
	if s == nil || reg == nil {
		return s
	}
	in := &instrumented{inner: s, m: newStoreMetrics(reg)}
	if c, ok := s.(cleaner); ok {
		return &instrumentedCleaner{instrumented: in, c: c}
	}
	return in
}

// cleaner is Local's removal of the temporary files a crash left.
type cleaner interface {
	Clean(ctx context.Context, minAge time.Duration) (int, error)
}

type storeMetrics struct {
	requests *prometheus.CounterVec   // op, result
	duration *prometheus.HistogramVec // op
	bytes    *prometheus.CounterVec   // op, direction
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_objstore_requests_total",
			Help: "Object store requests, by operation and result (ok or the error class).",
		}, []string{"op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apron_objstore_request_duration_seconds",
			Help:    "Duration of object store requests, by operation (a get to its reader, not to its last byte).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18), // 0.5ms .. 65s
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apron_objstore_bytes_total",
			Help: "Bytes uploaded by puts and downloaded through get readers, by operation and direction.",
		}, []string{"op", "direction"}),
	}
	// A second store on one registry (a test, a reopened store) shares
	// the first one's metrics.
	reuse(reg, &m.requests)
	reuse(reg, &m.duration)
	reuse(reg, &m.bytes)
	return m
}

// reuse registers *c, or makes *c the equal collector registered already.
// Any other registration error (a metric of that name with other labels)
// leaves *c counting unregistered: metrics never stop the store.
func reuse[T prometheus.Collector](reg prometheus.Registerer, c *T) {
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(*c); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
		}
	}
}

// done counts a finished request of op that took d.
func (m *storeMetrics) done(op string, err error, d time.Duration) {
	m.duration.WithLabelValues(op).Observe(d.Seconds())
	m.count(op, err)
}

func (m *storeMetrics) count(op string, err error) {
	result := "ok"
	if err != nil {
		result = ErrorClass(err)
	}
	m.requests.WithLabelValues(op, result).Inc()
}

type instrumented struct {
	inner Store
	m     *storeMetrics
}

var _ Store = (*instrumented)(nil)

func (s *instrumented) Put(ctx context.Context, name string, data io.Reader, size int64, opts PutOptions) error {
	start := time.Now()
	var r io.Reader
	if data != nil { // a nil reader is the inner store's to refuse
		r = &countingReader{r: data, bytes: s.m.bytes.WithLabelValues("put", "upload")}
	}
	err := s.inner.Put(ctx, name, r, size, opts)
	s.m.done("put", err, time.Since(start))
	return err
}

func (s *instrumented) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := s.inner.Get(ctx, name)
	return s.reader("get", rc, err, time.Since(start))
}

func (s *instrumented) GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := s.inner.GetRange(ctx, name, off, n)
	return s.reader("get_range", rc, err, time.Since(start))
}

// reader counts a failed get at once, a successful one when its reader
// is closed.
func (s *instrumented) reader(op string, rc io.ReadCloser, err error, d time.Duration) (io.ReadCloser, error) {
	s.m.duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		s.m.count(op, err)
		return nil, err
	}
	return &countingReadCloser{rc: rc, op: op, m: s.m, bytes: s.m.bytes.WithLabelValues(op, "download")}, nil
}

func (s *instrumented) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	start := time.Now()
	l, err := s.inner.List(ctx, prefix)
	s.m.done("list", err, time.Since(start))
	return l, err
}

func (s *instrumented) Delete(ctx context.Context, name string) error {
	start := time.Now()
	err := s.inner.Delete(ctx, name)
	s.m.done("delete", err, time.Since(start))
	return err
}

func (s *instrumented) Attributes(ctx context.Context, name string) (Attrs, error) {
	start := time.Now()
	a, err := s.inner.Attributes(ctx, name)
	s.m.done("attributes", err, time.Since(start))
	return a, err
}

func (s *instrumented) URI(name string) string { return s.inner.URI(name) }

func (s *instrumented) Close() error { return s.inner.Close() }

// Unwrap is the instrumented store.
func (s *instrumented) Unwrap() Store { return s.inner }

// instrumentedCleaner is an instrumented store that can Clean.
type instrumentedCleaner struct {
	*instrumented
	c cleaner
}

func (s *instrumentedCleaner) Clean(ctx context.Context, minAge time.Duration) (int, error) {
	start := time.Now()
	n, err := s.c.Clean(ctx, minAge)
	s.m.done("clean", err, time.Since(start))
	return n, err
}

// countingReader counts the bytes a Put reads from its caller.
type countingReader struct {
	r     io.Reader
	bytes prometheus.Counter
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.bytes.Add(float64(n))
	}
	return n, err
}

// countingReadCloser counts the bytes read from a get's reader and, at
// Close, the request with the first read error other than EOF.
type countingReadCloser struct {
	rc     io.ReadCloser
	op     string
	m      *storeMetrics
	bytes  prometheus.Counter
	err    error
	closed bool
}

func (c *countingReadCloser) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.note(int64(n), err)
	return n, err
}

// WriteTo keeps io.Copy's fast paths of the inner reader (a local file
// copied to a file: copy_file_range).
func (c *countingReadCloser) WriteTo(w io.Writer) (int64, error) {
	n, err := io.Copy(w, c.rc)
	c.note(n, err)
	return n, err
}

func (c *countingReadCloser) note(n int64, err error) {
	if n > 0 {
		c.bytes.Add(float64(n))
	}
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
}

func (c *countingReadCloser) Close() error {
	err := c.rc.Close()
	if !c.closed {
		c.closed = true
		res := c.err
		if res == nil {
			res = err
		}
		c.m.count(c.op, res)
	}
	return err
}
