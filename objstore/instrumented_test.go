package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

// TestInstrumentedSuite: the instrumented store is still a Store.
func TestInstrumentedSuite(t *testing.T) {
	objstoretest.RunSuite(t, func(t *testing.T) objstore.Store {
		l, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := objstore.Instrument(l, prometheus.NewRegistry())
		t.Cleanup(func() { s.Close() })
		return s
	})
}

type cleaner interface {
	Clean(context.Context, time.Duration) (int, error)
}

// TestInstrumentKeepsCapabilities: Local's Clean survives the wrapper
// (buffer.Open looks for it), a store without it does not gain it, no
// store stays none and no registry leaves the store as it is.
func TestInstrumentKeepsCapabilities(t *testing.T) {
	l, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	if _, ok := objstore.Instrument(l, reg).(cleaner); !ok {
		t.Error("the instrumented Local cannot Clean")
	}
	if _, ok := objstore.Instrument(objstore.NewMemory(), reg).(cleaner); ok {
		t.Error("the instrumented Memory can Clean")
	}
	if s := objstore.Instrument(nil, reg); s != nil {
		t.Errorf("Instrument(nil) = %#v, want nil", s)
	}
	if s := objstore.Instrument(l, nil); s != objstore.Store(l) {
		t.Errorf("Instrument(s, nil) = %#v, want s", s)
	}
	uri := l.URI("a/b")
	if got := objstore.Instrument(l, reg).URI("a/b"); got != uri {
		t.Errorf("URI = %q, want %q (the query engine reads a local file in place by it)", got, uri)
	}
}

// failingReader gives n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("caller's reader broke")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// TestInstrumentMetrics: requests by op and result, bytes each way as
// read through the readers, and durations, over a local store.
func TestInstrumentMetrics(t *testing.T) {
	ctx := context.Background()
	l, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := objstore.Instrument(l, reg)
	defer s.Close()
	data := objstoretest.Data(1, 10_000)
	objstoretest.MustPut(t, s, "a/one", data, objstore.PutOptions{})
	objstoretest.MustPut(t, s, "a/two", data[:1000], objstore.PutOptions{})
	if err := s.Put(ctx, "a/one", bytes.NewReader(data), 10_000, objstore.PutOptions{MustNotExist: true}); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("put over an existing name: %v", err)
	}
	if err := s.Put(ctx, "a/broken", &failingReader{n: 500}, -1, objstore.PutOptions{}); err == nil {
		t.Fatal("a put from a failing reader succeeded")
	}
	if got := objstoretest.MustGet(t, s, "a/one"); !bytes.Equal(got, data) {
		t.Fatal("get: wrong bytes")
	}
	rc, err := s.GetRange(ctx, "a/one", 100, 50)
	if err != nil {
		t.Fatal(err)
	}
	var sink bytes.Buffer
	if _, err := io.Copy(&sink, rc); err != nil || sink.Len() != 50 {
		t.Fatalf("get_range: %d bytes, %v", sink.Len(), err)
	}
	rc.Close()
	if _, err := s.Get(ctx, "a/missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get of a missing name: %v", err)
	}
	if _, err := s.Attributes(ctx, "a/two"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, "a/"); err != nil || len(l) != 2 {
		t.Fatalf("list: %v, %v", l, err)
	}
	if err := s.Delete(ctx, "a/two"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(cleaner).Clean(ctx, 0); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP apron_objstore_requests_total Object store requests, by operation and result (ok or the error class).
# TYPE apron_objstore_requests_total counter
apron_objstore_requests_total{op="attributes",result="ok"} 1
apron_objstore_requests_total{op="clean",result="ok"} 1
apron_objstore_requests_total{op="delete",result="ok"} 1
apron_objstore_requests_total{op="get",result="not_found"} 1
apron_objstore_requests_total{op="get",result="ok"} 1
apron_objstore_requests_total{op="get_range",result="ok"} 1
apron_objstore_requests_total{op="list",result="ok"} 1
apron_objstore_requests_total{op="put",result="exists"} 1
apron_objstore_requests_total{op="put",result="ok"} 2
apron_objstore_requests_total{op="put",result="other"} 1
# HELP apron_objstore_bytes_total Bytes uploaded by puts and downloaded through get readers, by operation and direction.
# TYPE apron_objstore_bytes_total counter
apron_objstore_bytes_total{direction="download",op="get"} 10000
apron_objstore_bytes_total{direction="download",op="get_range"} 50
apron_objstore_bytes_total{direction="upload",op="put"} 21500
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apron_objstore_requests_total", "apron_objstore_bytes_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "apron_objstore_request_duration_seconds"); err != nil || n != 7 {
		t.Errorf("apron_objstore_request_duration_seconds: %d series (%v), want one per op, 7", n, err)
	}

	// A second store on the registry counts into the same series.
	s2 := objstore.Instrument(objstore.NewMemory(), reg)
	objstoretest.MustPut(t, s2, "x", []byte("abc"), objstore.PutOptions{})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP apron_objstore_bytes_total Bytes uploaded by puts and downloaded through get readers, by operation and direction.
# TYPE apron_objstore_bytes_total counter
apron_objstore_bytes_total{direction="download",op="get"} 10000
apron_objstore_bytes_total{direction="download",op="get_range"} 50
apron_objstore_bytes_total{direction="upload",op="put"} 21503
`), "apron_objstore_bytes_total"); err != nil {
		t.Error(err)
	}
}
