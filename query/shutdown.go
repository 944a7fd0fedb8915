//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"time"

	duck "github.com/duckdb/duckdb-go-bindings"
)

// Drain is the first half of a bounded shutdown: the engine takes no new
// query (ErrClosed), every running one is interrupted, and Drain waits
// until each has given its connection back (its reader released), or ctx
// ends. Only then may the buffer's memory be freed and Close be called:
// DuckDB threads of a query still running read buffered Arrow data and
// DuckDB's own state. When ctx ends first, Drain says how many queries
// still run, and the caller must call neither Close nor free what they
// read: it leaves them to the process exit.
//
// A direct scan (direct.go) is not DuckDB's to interrupt: it stops when
// its context does, which is the caller's to cancel (the gRPC call).
func (e *Engine) Drain(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		e.mu.Lock()
		e.mu.closed = true
		n := len(e.mu.active)
		// Every round, every connection: DuckDB forgets an interrupt
		// that comes before its query starts executing (a query between
		// taking its slot and running), and a connection given back is
		// closed, not rolled back (release), so a late one harms nothing.
		for c := range e.mu.active {
			duck.Interrupt(c.c)
		}
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("query: %d queries still hold a connection: %w", n, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
