package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/apron-db/apron/objstore"
)

// countingStore counts Attributes calls and fails them on demand.
type countingStore struct {
	objstore.Store
	calls int
	err   error
}

func (c *countingStore) Attributes(ctx context.Context, name string) (objstore.Attrs, error) {
	c.calls++
	if c.err != nil {
		return objstore.Attrs{}, c.err
	}
	return c.Store.Attributes(ctx, name)
}

func getReadiness(t *testing.T, h http.Handler) (int, readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var r readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, r
}

// TestReadyzPhases: 503 while starting and stopping, with the state and
// the replay; 200 only when ready.
func TestReadyzPhases(t *testing.T) {
	life := &lifecycle{}
	h := readyz(life, nil)
	if code, r := getReadiness(t, h); code != 503 || r.Ready || r.State != "starting" || r.Replay != "pending" || r.ReplayProgress != nil {
		t.Fatalf("before the replay: %d %+v", code, r)
	}
	life.replay.Snapshot() // the zero value is usable
	life.set(phaseReady)
	if code, r := getReadiness(t, h); code != 200 || !r.Ready || r.State != "ready" {
		t.Fatalf("ready: %d %+v", code, r)
	}
	life.set(phaseStopping)
	if code, r := getReadiness(t, h); code != 503 || r.Ready || r.State != "shutting_down" {
		t.Fatalf("stopping: %d %+v", code, r)
	}
}

// TestStoreProbe: an unreachable store makes /readyz 503; probes are
// cached, not made at every request.
func TestStoreProbe(t *testing.T) {
	mem := objstore.NewMemory()
	defer mem.Close()
	st := &countingStore{Store: mem}
	life := &lifecycle{}
	life.set(phaseReady)
	h := readyz(life, newStoreProbe(st))
	for range 3 {
		if code, r := getReadiness(t, h); code != 200 || r.Store != "ok" {
			t.Fatalf("store up: %d %+v", code, r)
		}
	}
	if st.calls != 1 {
		t.Fatalf("%d probes for 3 requests, want 1 (cached)", st.calls)
	}
	st.err = errors.New("connection refused")
	probe := newStoreProbe(st)
	h = readyz(life, probe)
	if code, r := getReadiness(t, h); code != 503 || r.Ready || r.Store != "connection refused" {
		t.Fatalf("store down: %d %+v", code, r)
	}
}
