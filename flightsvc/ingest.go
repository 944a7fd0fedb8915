package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// ingestWindow is how many batches of one stream may wait for their fsync
// while the next ones are decoded and queued.
const ingestWindow = 4

// writeStream writes the batches of one stream into db.table, pipelined:
// while batch n waits for its fsync, batch n+1 is read, validated and
// queued to the WAL, so one stream keeps both the CPU and the disk busy.
// A second goroutine, the waiter, waits for each batch in order, counts it
// and acknowledges it (ack, if not nil) once durable; a client that waits
// for each acknowledgement gets it without delay.
type writeStream struct {
	s         *SQLServer
	ctx       context.Context
	db, table string
	opts      catalog.WriteOptions // for the first batch; later ones append
	ack       func(buffer.WriteResult, int64) error
	who       *auth.Principal
	call      *call // counts the rows received
	// rep is the replace the stream writes (replace), nil for an
	// ordinary stream.
	rep *buffer.Replace

	pending chan *buffer.PendingWrite
	done    chan struct{} // closed when the waiter has returned
	failedc chan struct{} // closed when a batch failed (waitErr is set)
	batches int           // submitted; the submitter's

	// mu orders submits with the waiter's failure: once failed is set, no
	// batch is submitted, so the rows the error counts are all there are.
	mu     sync.Mutex
	failed bool

	total   int64 // durable rows; the waiter's until done or failedc is closed
	waitErr error // likewise
}

func (s *SQLServer) newWriteStream(ctx context.Context, db, table string, opts catalog.WriteOptions, ack func(buffer.WriteResult, int64) error) *writeStream {
	w := &writeStream{s: s, ctx: ctx, db: db, table: table, opts: opts, ack: ack, who: auth.FromContext(ctx), call: callFrom(ctx),
		pending: make(chan *buffer.PendingWrite, ingestWindow-1), done: make(chan struct{}), failedc: make(chan struct{})}
	go w.wait()
	return w
}

// wait is the waiter: every pending write is waited for, even after a
// failure.
func (w *writeStream) wait() {
	defer close(w.done)
	for p := range w.pending {
		res, err := p.Wait()
		if w.waitErr != nil {
			continue
		}
		if err == nil {
			w.total += res.Rows
			if w.ack != nil {
				err = w.ack(res, w.total)
			}
		} else if w.rep != nil {
			err = fmt.Errorf("database %q table %q: a batch failed: %w", w.db, w.table, err)
		} else {
			err = fmt.Errorf("database %q table %q: %d rows of this stream written before a batch failed: %w", w.db, w.table, w.total, err)
		}
		if err != nil {
			w.waitErr = err
			w.mu.Lock()
			w.failed = true
			w.mu.Unlock()
			close(w.failedc)
		}
	}
}

// errStreamFailed: a batch before failed; nothing more is submitted.
var errStreamFailed = errors.New("an earlier batch of the stream failed")

// submit checks the token (a token revoked or expired while the stream is
// open writes no further batch) and queues rec.
func (w *writeStream) submit(rec arrow.RecordBatch) error {
	w.call.received(rec.NumRows())
	if err := w.who.Check(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.failed {
		w.mu.Unlock()
		return errStreamFailed
	}
	var p *buffer.PendingWrite
	var err error
	if w.rep != nil {
		p, err = w.rep.Submit(w.ctx, rec)
	} else {
		p, err = w.s.wb.Submit(w.ctx, w.db, w.table, rec, w.opts)
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	w.batches++
	w.opts.IfExists = catalog.AppendIfExists
	// Not under mu: with the window full this waits for the waiter,
	// which takes mu when a batch fails.
	w.pending <- p
	return nil
}

// finish stops the waiter and returns what it counted.
func (w *writeStream) finish() (int64, error) {
	close(w.pending)
	<-w.done
	return w.total, w.waitErr
}

// rejected finishes a stream whose batch err refused: batches before it
// count once durable, and the error says how many rows that made.
func (w *writeStream) rejected(err error) (int64, error) {
	n, werr := w.finish()
	if werr != nil || errors.Is(err, errStreamFailed) {
		return n, werr
	}
	if w.rep != nil {
		return n, fmt.Errorf("database %q table %q: batch %d rejected: %w", w.db, w.table, w.batches+1, err)
	}
	return n, fmt.Errorf("database %q table %q: batch %d rejected, %d rows of this stream written before it: %w",
		w.db, w.table, w.batches+1, n, err)
}

// run reads and submits every batch of rdr, then finishes the stream. An
// empty stream still defines the table (ADBC create mode with no rows).
func (w *writeStream) run(rdr flight.MessageReader) (int64, error) {
	for rdr.Next() {
		if err := w.submit(rdr.RecordBatch()); err != nil {
			return w.rejected(err)
		}
	}
	if err := rdr.Err(); err != nil {
		n, werr := w.finish()
		if werr != nil {
			return n, werr
		}
		return n, fmt.Errorf("%w: database %q table %q: reading the stream after %d rows: %w", errInvalidRequest, w.db, w.table, n, err)
	}
	if w.batches == 0 {
		sc := rdr.Schema()
		if sc == nil {
			w.finish()
			return 0, fmt.Errorf("%w: the stream has no schema", errInvalidRequest)
		}
		rec := array.NewRecordBatch(sc, emptyColumns(w.s.mem, sc), 0)
		defer rec.Release()
		if err := w.submit(rec); err != nil {
			return w.rejected(err)
		}
	}
	return w.finish()
}

// ingest writes every batch of a stream into db.table (Flight SQL bulk
// ingest: the client sends its whole stream before it reads the result).
// opts apply to the first batch; later ones append to the table it
// created or found. It returns the rows durably written, also when it
// fails part way; after a failed batch the next one read ends it.
func (s *SQLServer) ingest(ctx context.Context, db, table string, opts catalog.WriteOptions, rdr flight.MessageReader) (int64, error) {
	callFrom(ctx).setDatabase(db)
	if err := auth.FromContext(ctx).Write(db); err != nil {
		return 0, err
	}
	return s.newWriteStream(ctx, db, table, opts, nil).run(rdr)
}

// replace writes every batch of a stream as the whole new content of
// db.table (Flight SQL if_exists REPLACE, ADBC ingest mode replace; see
// buffer/replace.go): readers see the old table until every batch is
// durable and the stream has ended, then the new one, with the batches'
// columns. A stream that fails, or a client that goes away before the
// end, leaves the table as it was: the error says so, and no row of the
// stream stays. Without a table, ifNotExists says whether the replace
// creates it.
func (s *SQLServer) replace(ctx context.Context, db, table string, ifNotExists catalog.IfNotExists, rdr flight.MessageReader) (int64, error) {
	callFrom(ctx).setDatabase(db)
	if err := auth.FromContext(ctx).Write(db); err != nil {
		return 0, err
	}
	rep, err := s.wb.BeginReplace(db, table, ifNotExists)
	if err != nil {
		return 0, err
	}
	w := s.newWriteStream(ctx, db, table, catalog.WriteOptions{}, nil)
	w.rep = rep
	n, err := w.run(rdr)
	if err == nil {
		// The client may have given up after its last batch: it would
		// not learn that the table changed.
		err = ctx.Err()
	}
	if err == nil {
		err = rep.Commit()
	}
	if err != nil {
		rep.Abort()
		return 0, fmt.Errorf("replace of table %q in database %q aborted after %d rows: the table is as it was, and no row of the stream is kept: %w", table, db, n, err)
	}
	return n, nil
}

// ingestAcked is ingest for clients that may wait for each batch's
// acknowledgement (ack, called in order once a batch is durable) before
// they send the next: a plain Flight DoPut. A failed batch ends the
// stream at once, whatever the client does next: the batches are read by
// a goroutine of their own, so that the call can return while it waits
// for a message that will not come. That goroutine owns rdr (it releases
// it); it ends once the call has (gRPC then cancels the stream's Recv).
func (s *SQLServer) ingestAcked(ctx context.Context, db, table string, opts catalog.WriteOptions, rdr flight.MessageReader, ack func(buffer.WriteResult, int64) error) (int64, error) {
	callFrom(ctx).setDatabase(db)
	if err := auth.FromContext(ctx).Write(db); err != nil {
		rdr.Release()
		return 0, err
	}
	w := s.newWriteStream(ctx, db, table, opts, ack)
	type result struct {
		n   int64
		err error
	}
	read := make(chan result, 1)
	go func() {
		defer rdr.Release()
		n, err := w.run(rdr)
		read <- result{n, err}
	}()
	select {
	case r := <-read:
		return r.n, r.err
	case <-w.failedc:
		// total and waitErr are final once failedc is closed.
		return w.total, w.waitErr
	}
}
