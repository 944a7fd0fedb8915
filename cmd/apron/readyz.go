package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/objstore"
)

// readiness is the body of /readyz.
type readiness struct {
	Ready bool `json:"ready"`
	// State is "starting" (listening while the WAL replays, or the rest
	// opens), "ready" or "shutting_down".
	State string `json:"state"`
	// Replay is "pending" (the object store is read first), "running" or
	// "done"; ReplayProgress says how far it has come (or how long it took).
	Replay         string          `json:"replay"`
	ReplayProgress *replayProgress `json:"replay_progress,omitempty"`
	// The fields below come once the WAL is replayed.
	WAL string `json:"wal,omitempty"` // "ok", or the WAL's error: writes are refused until a restart
	// Persist is "ok", "waiting" (closed segments being persisted) or
	// "failing" (attempts fail; the fields below say since when and why).
	Persist           string     `json:"persist,omitempty"`
	SegmentsWaiting   int        `json:"segments_waiting"`
	PersistingSegment uint64     `json:"persisting_segment,omitempty"`
	FailingSince      *time.Time `json:"failing_since,omitempty"`
	FailedAttempts    int        `json:"failed_attempts,omitempty"`
	LastError         string     `json:"last_error,omitempty"`
	// Store is "ok" when the object store answered its last probe, else
	// the probe's error; absent without an object store.
	Store string `json:"store,omitempty"`
}

// replayProgress is a buffer.ReplaySnapshot in JSON.
type replayProgress struct {
	Files            int64   `json:"files"`
	FilesTotal       int64   `json:"files_total"`
	Bytes            int64   `json:"bytes"`
	BytesTotal       int64   `json:"bytes_total"`
	Percent          float64 `json:"percent"`
	Rows             int64   `json:"rows"`
	MBPerSecond      float64 `json:"mb_per_s"`
	ElapsedSeconds   float64 `json:"elapsed_s"`
	RemainingSeconds float64 `json:"remaining_s,omitempty"`
}

func progressJSON(s buffer.ReplaySnapshot) *replayProgress {
	if !s.Started {
		return nil
	}
	return &replayProgress{Files: s.Files, FilesTotal: s.FilesTotal, Bytes: s.Bytes, BytesTotal: s.BytesTotal,
		Percent: round1(s.Percent), Rows: s.Rows, MBPerSecond: round1(s.MBPerSecond),
		ElapsedSeconds: round1(s.Elapsed.Seconds()), RemainingSeconds: round1(s.Remaining.Seconds())}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// readyz answers /readyz on the metrics listener: 200 once the WAL is
// replayed and the server serves, while writes work (the WAL has not
// failed) and the object store answers; 503 before, during a shutdown,
// once the WAL has failed (a restart is needed) or while the store does
// not answer. The JSON body says which, how far a replay has come, and
// whether persisting keeps up or fails, since when, and the last error
// (reads and writes go on while it fails, until --buffer-mem-limit).
func readyz(life *lifecycle, probe *storeProbe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ph := life.now()
		snap := life.replay.Snapshot()
		r := readiness{Ready: ph == phaseReady, State: ph.String(), Replay: life.replayState(snap), ReplayProgress: progressJSON(snap)}
		if wb := life.buffer(); wb != nil {
			r.WAL, r.Persist = "ok", "ok"
			if err := wb.WALError(); err != nil {
				r.Ready, r.WAL = false, err.Error()
			}
			h := wb.PersistHealth()
			r.SegmentsWaiting, r.PersistingSegment = h.Waiting, h.Persisting
			switch {
			case h.LastErr != nil:
				since := h.Since.UTC()
				r.Persist, r.FailingSince, r.FailedAttempts, r.LastError = "failing", &since, h.Failures, h.LastErr.Error()
			case h.Waiting > 0:
				r.Persist = "waiting"
			}
		}
		if probe != nil && ph == phaseReady {
			r.Store = "ok"
			if err := probe.check(); err != nil {
				r.Ready, r.Store = false, err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !r.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(r)
	})
}

// healthz answers /healthz: 200 as long as the process serves HTTP, from
// before the WAL replays until it exits. It is the liveness check; a
// process that answers it but not /readyz is starting or stopping, and
// killing it would only make a restart longer.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// Probing the object store for /readyz: at most once per storeProbeEvery
// (a readiness probe every second must not become a request to the store
// every second), each probe bounded by storeProbeTimeout.
const (
	storeProbeEvery   = 10 * time.Second
	storeProbeTimeout = 2 * time.Second
	// storeProbeObject is looked up, never written: "not found" is the
	// answer of a store that works.
	storeProbeObject = "readyz-probe"
)

// storeProbe says whether the object store answers, cached. Safe for
// concurrent use.
type storeProbe struct {
	store objstore.Store
	mu    sync.Mutex // held during a probe: concurrent checks wait for it
	at    time.Time
	err   error
}

func newStoreProbe(st objstore.Store) *storeProbe {
	if st == nil {
		return nil
	}
	return &storeProbe{store: st}
}

// check returns the result of the last probe, probing again if it is
// older than storeProbeEvery. The probe does not take the request's
// context: a prober that hangs up must not leave its cancellation cached
// as the store's failure.
func (p *storeProbe) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < storeProbeEvery {
		return p.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeProbeTimeout)
	defer cancel()
	_, err := p.store.Attributes(ctx, storeProbeObject)
	if errors.Is(err, objstore.ErrNotFound) {
		err = nil
	}
	if err != nil && ctx.Err() != nil {
		err = errors.New("the object store did not answer within " + storeProbeTimeout.String())
	}
	p.at, p.err = time.Now(), err
	return err
}
