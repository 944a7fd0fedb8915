//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// reader streams a DuckDB streaming result as Arrow record batches.
type reader struct {
	refs   atomic.Int64
	ctx    context.Context
	schema *arrow.Schema
	conn   duck.Connection
	onDone func() // gives the connection back; called once
	// keep, if set, keeps the statement for the next query of its text
	// (conn.keepPlan) when the query ended without error.
	keep func(*duck.PreparedStatement)

	stmt    duck.PreparedStatement
	pending duck.PendingResult
	res     duck.Result
	opts    duck.ArrowOptions
	stop    func() bool // stops the cancellation watcher

	cur  arrow.RecordBatch
	err  error
	done bool // the DuckDB objects are gone and the connection returned

	// mu orders the cancellation watcher's interrupt before the
	// connection goes back to the pool.
	mu       sync.Mutex
	finished bool
}

// execute runs a prepared statement as a streaming query on c and returns
// its reader, which owns stmt.
func (e *Engine) execute(ctx context.Context, c *conn, stmt duck.PreparedStatement) (*reader, error) {
	if err := c.begin(); err != nil {
		duck.DestroyPrepare(&stmt)
		return nil, err
	}
	untrack := e.track(c)
	// Fetches of persisted files stop when the query's context ends.
	stopLink := func() bool { return false }
	if qs, ok := e.qstate.Load(c.id); ok {
		stopLink = context.AfterFunc(ctx, qs.(*queryState).cancel)
	}
	r, err := runStreaming(ctx, c.c, stmt)
	if err != nil {
		stopLink()
		untrack()
		return nil, err
	}
	r.keep = c.keepPlan
	r.onDone = func() {
		stopLink()
		untrack()
		e.release(c)
	}
	return r, nil
}

// runStreaming executes stmt on conn. On error stmt is destroyed and
// the connection is free again.
func runStreaming(ctx context.Context, conn duck.Connection, stmt duck.PreparedStatement) (*reader, error) {
	r := &reader{ctx: ctx, conn: conn, stmt: stmt}
	r.refs.Store(1)
	r.stop = context.AfterFunc(ctx, r.interrupt)
	fail := func(err error) (*reader, error) {
		r.finish()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if duck.PendingPreparedStreaming(stmt, &r.pending) == duck.StateError {
		return fail(classify(duck.PendingError(r.pending)))
	}
	if duck.ExecutePending(r.pending, &r.res) == duck.StateError {
		return fail(classify(duck.ResultError(&r.res)))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	r.opts = duck.ResultGetArrowOptions(&r.res)
	n := duck.ColumnCount(&r.res)
	names := make([]string, n)
	types := make([]duck.LogicalType, n)
	for i := range n {
		names[i] = duck.ColumnName(&r.res, i)
		types[i] = duck.ColumnLogicalType(&r.res, i)
	}
	schema, ed := duck.NewArrowSchema(r.opts, types, names)
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	if err := errorData(ed); err != nil {
		return fail(fmt.Errorf("%w: result schema: %w", ErrExecution, err))
	}
	r.schema = schema
	return r, nil
}

// errorData turns (and destroys) a DuckDB error data.
func errorData(ed duck.ErrorData) error {
	defer duck.DestroyErrorData(&ed)
	if ed.Ptr == nil || !duck.ErrorDataHasError(ed) {
		return nil
	}
	return errors.New(duck.ErrorDataMessage(ed))
}

func (r *reader) interrupt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		duck.Interrupt(r.conn)
	}
}

// finish destroys the DuckDB objects and returns the connection. It runs
// on the reader's goroutine only.
func (r *reader) finish() {
	if r.done {
		return
	}
	r.done = true
	r.stop()
	// If the watcher is interrupting, wait for it to be done.
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	if r.res != (duck.Result{}) {
		duck.DestroyResult(&r.res)
	}
	duck.DestroyArrowOptions(&r.opts)
	duck.DestroyPending(&r.pending)
	if r.keep != nil && r.err == nil && r.ctx.Err() == nil {
		r.keep(&r.stmt)
	}
	duck.DestroyPrepare(&r.stmt)
	if r.onDone != nil {
		r.onDone()
	}
}

func (r *reader) Retain() { r.refs.Add(1) }

func (r *reader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.finish()
}

func (r *reader) Schema() *arrow.Schema { return r.schema }

func (r *reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.err != nil {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		r.finish()
		return false
	}
	for {
		chunk := duck.FetchChunk(r.res)
		if chunk.Ptr == nil {
			if msg := duck.ResultError(&r.res); msg != "" {
				r.err = classify(msg)
				if err := r.ctx.Err(); err != nil {
					r.err = err
				}
			}
			r.finish()
			return false
		}
		if duck.DataChunkGetSize(chunk) == 0 {
			duck.DestroyDataChunk(&chunk)
			continue
		}
		rec, ed := duck.DataChunkToArrowArray(r.opts, r.schema, chunk)
		duck.DestroyDataChunk(&chunk)
		if err := errorData(ed); err != nil {
			r.err = fmt.Errorf("%w: converting a result chunk: %w", ErrExecution, err)
			r.finish()
			return false
		}
		r.cur = rec
		return true
	}
}

func (r *reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch, for the older RecordReader interface.
func (r *reader) Record() arrow.RecordBatch { return r.cur }

func (r *reader) Err() error { return r.err }
