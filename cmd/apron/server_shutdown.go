package main

import (
	"context"
	"errors"
	"time"
)

// Run serves until ctx ends (SIGTERM, SIGINT) or the gRPC server fails,
// then shuts the server down (shutdown). Close must be called after it.
func (s *server) Run(ctx context.Context) error {
	select {
	case err := <-s.served:
		s.log.Error("gRPC server stopped", "err", err)
		return errors.Join(err, s.shutdown())
	case <-ctx.Done():
		return s.shutdown()
	}
}

// shutdownReserve is the part of --shutdown-timeout kept for the steps
// after the in-flight calls: a fifth, at most 3s. Calls get the rest;
// queries and a persist in progress get half the reserve more; closing
// the WAL and the catalog gets the other half.
func shutdownReserve(timeout time.Duration) time.Duration { return min(timeout/5, 3*time.Second) }

// shutdown drains the server within --shutdown-timeout, one deadline for
// every step:
//
//  1. /readyz and the gRPC health service say NOT_SERVING / shutting_down.
//  2. The persister starts nothing new; the persist in progress runs on to
//     its commit point (buffer.FinishPersist), alongside the steps below,
//     until the deadline less the reserve.
//  3. Running reads (DoGet) are cancelled: their clients get UNAVAILABLE;
//     DuckDB is interrupted and the engine takes no new query.
//  4. The gRPC server takes no new call; those in flight (writes) finish
//     until the deadline less the reserve, then are cut off.
//  5. Every query has given its connection back and no View of the buffer
//     is held, or else (at the deadline less half the reserve) they are
//     logged and left running: Close then frees neither the memory they
//     read nor DuckDB, which the process exit does.
//
// Close then closes the rest (the WAL, the catalog, the store) by the
// deadline.
func (s *server) shutdown() error {
	timeout := s.f.shutdownTimeout
	start := time.Now()
	s.deadline = start.Add(timeout)
	reserve := shutdownReserve(timeout)
	graceCtx, cancelGrace := context.WithDeadline(context.Background(), s.deadline.Add(-reserve))
	defer cancelGrace()
	drainCtx, cancelDrain := context.WithDeadline(context.Background(), s.deadline.Add(-reserve/2))
	defer cancelDrain()

	s.life.set(phaseStopping)
	s.health.Shutdown()
	persisted := make(chan error, 1)
	go func() { persisted <- s.wb.FinishPersist(graceCtx) }()
	reads := s.calls.cancelAll()
	drained := make(chan error, 1)
	go func() { drained <- s.eng.Drain(drainCtx) }()
	s.log.Info("shutting down: health NOT_SERVING, no new calls, reads cancelled; in-flight writes and the persist in progress may finish",
		"timeout", timeout, "reads_cancelled", reads)

	if !s.stopGRPC(graceCtx, drainCtx) {
		s.log.Warn("calls still in flight were cut off, their connections closed: cancelled reads whose client stopped reading, or writes past the grace deadline",
			"after", time.Since(start).Round(time.Millisecond))
	}
	err := <-drained
	if err == nil {
		err = s.wb.WaitReaders(drainCtx)
	}
	if err != nil {
		s.leaked = true
		s.log.Error("queries did not stop in time: the buffer memory they read and the query engine are left to the process exit, not freed under them", "err", err)
	}
	<-persisted // FinishPersist logs what it did
	s.log.Info("shutdown drained; closing the WAL", "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// readsCutAfter is how long cancelled reads may take to end by themselves
// once no other call is in flight; one still running then is stuck
// sending to a client that stopped reading, and its connection is closed.
const readsCutAfter = 500 * time.Millisecond

// stopGRPC stops the gRPC server gracefully until grace ends, or until
// only cancelled reads have been left for readsCutAfter, then cuts the
// remaining calls off, waiting for that until hard ends. It reports
// whether every call finished by itself.
func (s *server) stopGRPC(grace, hard context.Context) bool {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var onlyReadsSince time.Time
wait:
	for {
		select {
		case <-done:
			return true
		case <-grace.Done():
			break wait
		case now := <-tick.C:
			switch {
			case s.calls.othersInFlight() > 0:
				onlyReadsSince = time.Time{}
			case onlyReadsSince.IsZero():
				onlyReadsSince = now
			case now.Sub(onlyReadsSince) >= readsCutAfter:
				break wait
			}
		}
	}
	s.grpc.Stop()
	select {
	case <-done:
	case <-hard.Done():
	}
	return false
}
