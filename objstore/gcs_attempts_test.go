package objstore

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestGCSAttemptErrorsObserved: every error of a request the storage
// client retries by itself reaches OnAttemptError (an outage is seen at
// its first failed attempt, not once the client gives up), classified.
func TestGCSAttemptErrorsObserved(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": {"code": 503, "message": "backend unavailable"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var mu sync.Mutex
	var seen []string
	g, err := NewGCS(context.Background(), GCSConfig{Bucket: "b", Endpoint: srv.URL + "/storage/v1/", MaxAttempts: 3,
		OnAttemptError: func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, op+" "+ErrorClass(err))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// The client retries an upload for its chunk retry deadline (32s),
	// whatever MaxAttempts says: the caller's deadline ends it here.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	data := []byte("hello")
	err = g.Put(ctx, "x", bytes.NewReader(data), int64(len(data)), PutOptions{MustNotExist: true})
	if err == nil {
		t.Fatal("a put to a store answering 503 succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("attempt errors seen: %q, want one per retried attempt", seen)
	}
	for _, s := range seen {
		if !bytes.HasSuffix([]byte(s), []byte(" unavailable")) {
			t.Errorf("attempt error %q: want class unavailable", s)
		}
	}
}

// TestGCSAttemptAnswersNotReported: a lookup answered "not found" (the
// readiness probe, a lookup before an upload) is an answer, not a failed
// attempt: OnAttemptError is not called, so it is neither counted nor
// reported as the last persist error.
func TestGCSAttemptAnswersNotReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error": {"code": 404, "message": "Not Found", "errors": [{"reason": "notFound"}]}}`))
	}))
	defer srv.Close()
	var mu sync.Mutex
	var seen []string
	g, err := NewGCS(context.Background(), GCSConfig{Bucket: "b", Endpoint: srv.URL + "/storage/v1/", MaxAttempts: 3,
		OnAttemptError: func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, op+" "+err.Error())
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Attributes(context.Background(), "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Attributes of a missing object: %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("a not-found answer reported as attempt errors: %q", seen)
	}
}
