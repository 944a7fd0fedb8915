package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/apron-db/apron/buffer"
)

// readiness is the body of /readyz.
type readiness struct {
	Ready bool   `json:"ready"`
	WAL   string `json:"wal"` // "ok", or the WAL's error: writes are refused until a restart
	// Persist is "ok", "waiting" (closed segments being persisted) or
	// "failing" (attempts fail; the fields below say since when and why).
	Persist         string     `json:"persist"`
	SegmentsWaiting int        `json:"segments_waiting"`
	FailingSince    *time.Time `json:"failing_since,omitempty"`
	FailedAttempts  int        `json:"failed_attempts,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
}

// readyz answers /readyz on the metrics listener: 200 while writes work,
// 503 once the WAL has failed (a restart is needed); the JSON body also
// says whether persisting to the object store keeps up or fails, since
// when, and the last error (reads and writes go on while it fails, until
// --buffer-mem-limit).
func readyz(wb *buffer.WriteBuffer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := readiness{Ready: true, WAL: "ok", Persist: "ok"}
		if err := wb.WALError(); err != nil {
			r.Ready, r.WAL = false, err.Error()
		}
		h := wb.PersistHealth()
		r.SegmentsWaiting = h.Waiting
		switch {
		case h.LastErr != nil:
			since := h.Since.UTC()
			r.Persist, r.FailingSince, r.FailedAttempts, r.LastError = "failing", &since, h.Failures, h.LastErr.Error()
		case h.Waiting > 0:
			r.Persist = "waiting"
		}
		w.Header().Set("Content-Type", "application/json")
		if !r.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(r)
	})
}
