//go:build duckdb_arrow

package query

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// A bug in the code that starts a query (a direct scan's picking, a
// pruning, a metadata answer: Go run in the caller's goroutine, with the
// query's connection, slot and View held) must fail that query, not the
// server, and must not leave what it held behind: a panic recovered by
// gRPC's handler alone kept the connection's slot for good, so that
// after --max-concurrent-queries of them every query waited in the
// queue and timed out, and kept the View's segments in memory.
//
// recoverStart, deferred by start, turns a panic into an error of kind
// ErrInternal and marks c broken: its DuckDB state (a transaction, a
// prepared statement) is unknown, so release closes it instead of
// reusing it. The caller releases c on the error, as on any other. The
// stack goes to the log; the statement's text does not (it may carry
// secrets in literals): system.queries shows it while it runs.
func (e *Engine) recoverStart(c *conn, err *error) {
	r := recover()
	if r == nil {
		return
	}
	e.panics.Add(1)
	e.log.Error("internal error starting a query: the query fails and its connection is closed; please report this with the stack",
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	c.broken = true
	*err = newError(ErrInternal, "internal error starting the query (a bug, logged by the server with its stack): %v; the query may be retried, and if it fails again, please report it with the server's log", r)
}

// The engine's background goroutines (the read-ahead of files' latest
// rows, the fill of last-value caches) do what queries could do later or
// by other means: a bug in a step of theirs (or a decoder's panic on a
// damaged file) must not take down the server and every write in flight
// with it. recoverBackground, deferred by such a step, logs the panic
// with its stack and counts it; guarded returns it as the step's error
// (the fill is retried).
func (e *Engine) recoverBackground(what string) {
	if r := recover(); r != nil {
		e.panicked(what, r)
	}
}

func (e *Engine) guarded(what string, step func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e.panicked(what, r)
			err = fmt.Errorf("internal error %s: %v", what, r)
		}
	}()
	return step()
}

func (e *Engine) panicked(what string, r any) {
	e.panics.Add(1)
	e.log.Error("internal error "+what+"; please report this with the stack",
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// panicHooks are called, when set, where a test panics as a bug would
// (TestPanicFailsQuery, TestPanicInReadAhead, TestPanicInFill).
type panicHooks struct {
	reader    func(*directScan) // newDirectReader begins
	built     func(*directScan) // the reader holds the View
	readAhead func()            // a file's latest rows are read ahead
	fill      func()            // a last-value cache is filled
}

var panicTestHooks atomic.Pointer[panicHooks]
