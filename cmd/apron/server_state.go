package main

import (
	"fmt"
	"sync/atomic"

	"github.com/apron-db/apron/buffer"
)

// phase is where a server is in its life, for /readyz, the gRPC health
// service and the answer of calls that come too early or too late.
type phase int32

const (
	phaseStarting phase = iota // listening: the WAL replays, or the rest opens
	phaseReady                 // serving Flight
	phaseStopping              // SIGTERM: draining
)

func (p phase) String() string {
	switch p {
	case phaseReady:
		return "ready"
	case phaseStopping:
		return "shutting_down"
	}
	return "starting"
}

// lifecycle is the state a server shares with its endpoints while it
// starts and stops. Safe for concurrent use.
type lifecycle struct {
	phase  atomic.Int32
	replay buffer.ReplayProgress              // updated by buffer.Open
	wb     atomic.Pointer[buffer.WriteBuffer] // once open
}

func (l *lifecycle) now() phase                  { return phase(l.phase.Load()) }
func (l *lifecycle) set(p phase)                 { l.phase.Store(int32(p)) }
func (l *lifecycle) buffer() *buffer.WriteBuffer { return l.wb.Load() }

// replayState is "pending" (the object store is read first), "running"
// or "done".
func (l *lifecycle) replayState(s buffer.ReplaySnapshot) string {
	switch {
	case s.Done:
		return "done"
	case s.Started:
		return "running"
	}
	return "pending"
}

// startingMessage says why a call made before the server is ready is
// refused, and how far the startup has come.
func (l *lifecycle) startingMessage() string {
	s := l.replay.Snapshot()
	switch l.replayState(s) {
	case "running":
		return fmt.Sprintf("apron is starting: replaying the WAL (%.0f%%, %d of %d files), try again shortly", s.Percent, s.Files, s.FilesTotal)
	case "done":
		return "apron is starting: the WAL is replayed and the query engine opening, try again shortly"
	}
	return "apron is starting: reading the object store before replaying the WAL, try again shortly"
}
