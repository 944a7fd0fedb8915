//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// systemSlots are the connections kept for statements that read only the
// system tables (system.queries, …): with every one of MaxConcurrent held
// by clients' queries, an operator can still see what runs.
const systemSlots = 2

// systemOnly says whether a statement reads nothing but system tables.
func (a *admitted) systemOnly() bool {
	for _, d := range a.databases {
		if d != SystemSchema {
			return false
		}
	}
	return len(a.databases) > 0
}

// acquire takes a connection, waiting up to QueueTimeout for a slot: one
// of MaxConcurrent, or of the system slots when system is set. database
// is the one the caller will make current (conn.use): see pickIdle.
func (e *Engine) acquire(ctx context.Context, system bool, database string) (*conn, error) {
	sem := e.sem
	if system {
		sem = e.sysSem
	}
	select {
	case sem <- struct{}{}:
	default:
		t := time.NewTimer(e.cfg.QueueTimeout)
		defer t.Stop()
		select {
		case sem <- struct{}{}:
		case <-t.C:
			if system {
				return nil, fmt.Errorf("%w: %d queries of the system tables are running and none finished within %s",
					ErrTooManyQueries, cap(sem), e.cfg.QueueTimeout)
			}
			return nil, fmt.Errorf("%w: %d queries are running (--max-concurrent-queries) and none finished within %s",
				ErrTooManyQueries, cap(sem), e.cfg.QueueTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		<-sem
		return nil, ErrClosed
	}
	c := e.pickIdle(database)
	if c == nil {
		c = &conn{switches: &e.dbSwitches}
		if duck.Connect(e.db, &c.c) == duck.StateError {
			e.mu.Unlock()
			<-sem
			return nil, errors.New("query: connecting to DuckDB failed")
		}
		if err := exec(c.c, "USE "+Catalog); err != nil {
			duck.Disconnect(&c.c)
			e.mu.Unlock()
			<-sem
			return nil, fmt.Errorf("query: new connection: %w", err)
		}
		var cc duck.ClientContext
		duck.ConnectionGetClientContext(c.c, &cc)
		c.id = uint64(duck.ClientContextGetConnectionId(cc))
		duck.DestroyClientContext(&cc)
		e.pooled.Store(c.id, struct{}{})
		e.mu.open++
	}
	c.sem = sem
	e.mu.active[c] = struct{}{}
	e.mu.Unlock()
	e.procs.enter()
	return c, nil
}

// pickIdle takes out of the idle connections the one the next query of
// database runs on, nil for a new one. The caller holds e.mu.
//
// A connection whose current database is another one must switch (SET
// search_path: a statement DuckDB parses and runs, about 0.2 ms on the
// 2-vCPU VM, as much as the rest of a count(*) answered from metadata).
// Clients of different databases interleaved (a query ticket naming its
// database between Flight SQL statements of a session without one, as
// the peer benchmark sends them) switched the one idle connection at
// every query. So the most recently released connection of database is
// taken; failing that, a new one while fewer are open than queries can
// run at once (every slot, the system ones included: what the pool
// reaches under concurrent queries anyway); failing that, the most
// recently released, which switches.
func (e *Engine) pickIdle(database string) *conn {
	n := len(e.mu.idle)
	if n == 0 {
		return nil
	}
	i := n - 1
	for j := n - 1; j >= 0; j-- {
		if e.mu.idle[j].schema == database {
			i = j
			break
		}
	}
	if e.mu.idle[i].schema != database && e.mu.open < cap(e.sem)+cap(e.sysSem) {
		return nil
	}
	c := e.mu.idle[i]
	e.mu.idle = append(e.mu.idle[:i], e.mu.idle[i+1:]...)
	return c
}

// release returns a connection to the pool.
func (e *Engine) release(c *conn) {
	e.dropState(c.id)
	c.plan, c.planSchema = nil, nil
	sem := c.sem
	e.mu.Lock()
	closing := e.mu.closed
	e.mu.Unlock()
	// Once the engine closes no connection is reused: it is closed rather
	// than rolled back (Drain's interrupts may fall on the ROLLBACK).
	var err error
	if !closing && !c.broken {
		err = c.end()
	}
	if closing || c.broken || err != nil {
		if err != nil {
			// The connection's state is unknown: it is not reused.
			e.log.Warn("ending a query's transaction failed; the connection is closed", "err", err)
		}
		e.mu.Lock()
		delete(e.mu.active, c)
		e.mu.open--
		e.mu.Unlock()
		e.pooled.Delete(c.id)
		c.close()
		e.procs.exit()
		<-sem
		return
	}
	e.mu.Lock()
	delete(e.mu.active, c)
	e.mu.idle = append(e.mu.idle, c)
	e.mu.Unlock()
	e.procs.exit()
	<-sem
}

// errQueryTimeout is the cause of a query stopped by Config.Timeout.
var errQueryTimeout = fmt.Errorf("%w: the query ran longer than the query timeout (--query-timeout; 30s at most for one that reads only system tables) and was cancelled", context.DeadlineExceeded)

// systemTimeout bounds a statement that runs in a system slot: a client
// sending heavy queries of the system tables holds those slots for that
// long at most.
const systemTimeout = 30 * time.Second

// withTimeout bounds ctx by Config.Timeout (and systemTimeout for a
// statement of the system slots); the caller calls cancel once the query
// is over.
func (e *Engine) withTimeout(ctx context.Context, a *admitted) (context.Context, context.CancelFunc) {
	d := e.cfg.Timeout
	if a.systemOnly() && (d <= 0 || d > systemTimeout) {
		d = systemTimeout
	}
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w (%s)", errQueryTimeout, d))
}

// causeOf is err, or why ctx ended when it did.
func causeOf(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// timedReader is a query's reader that ends its timeout when released,
// and says why it stopped when its context ended.
type timedReader struct {
	array.RecordReader
	ctx    context.Context
	cancel context.CancelFunc
	refs   atomic.Int64
}

func timed(ctx context.Context, r array.RecordReader, cancel context.CancelFunc) array.RecordReader {
	t := &timedReader{RecordReader: r, ctx: ctx, cancel: cancel}
	t.refs.Store(1)
	return t
}

func (t *timedReader) Retain() {
	t.refs.Add(1)
	t.RecordReader.Retain()
}

func (t *timedReader) Release() {
	t.RecordReader.Release()
	if t.refs.Add(-1) == 0 {
		t.cancel()
	}
}

func (t *timedReader) Err() error {
	if err := t.RecordReader.Err(); err != nil {
		return causeOf(t.ctx, err)
	}
	return nil
}

func (t *timedReader) Record() arrow.RecordBatch { return t.RecordReader.RecordBatch() }
