package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

// WriteMode is how the writers send their batches.
type WriteMode string

const (
	// ModePut is one long plain Flight DoPut a writer, PATH [db, table],
	// every batch acknowledged by its own PutResult.
	ModePut WriteMode = "put"
	// ModeIngest is one Flight SQL CommandStatementIngest a batch.
	ModeIngest WriteMode = "ingest"
)

// WriteConfig is the writers of a run.
type WriteConfig struct {
	Writers   int
	BatchRows int
	// Hosts is the number of distinct hosts (series) written.
	Hosts int
	// InFlight is how many batches a writer sends before waiting for the
	// oldest one's acknowledgement (ModePut; ModeIngest has one call at a
	// time).
	InFlight int
	Mode     WriteMode
	// Rows, if more than 0, ends the writing once this many rows are
	// sent, in whole batches (rounded up to BatchRows), and the run
	// with it: to fill a table of a known size.
	Rows int64
	// Span, if more than 0 (with Rows), spreads the rows' times evenly
	// over the Span before the run starts instead of following the clock
	// (the rows of a batch one tick apart at its place among all rows):
	// a backfill, so that a query over the last minutes reads the slice a
	// day's dashboards would, not every row written in a second.
	Span time.Duration
}

// DefaultWriteConfig is what apron bench write runs without flags.
func DefaultWriteConfig() WriteConfig {
	return WriteConfig{Writers: 4, BatchRows: 1000, Hosts: 1000, InFlight: 4, Mode: ModePut}
}

// Validate says what is wrong with c.
func (c WriteConfig) Validate() error {
	var errs []error
	if c.Writers < 1 {
		errs = append(errs, fmt.Errorf("writers %d: want at least 1", c.Writers))
	}
	if c.BatchRows < 1 {
		errs = append(errs, fmt.Errorf("batch rows %d: want at least 1", c.BatchRows))
	}
	if c.Hosts < 1 {
		errs = append(errs, fmt.Errorf("hosts (tags) %d: want at least 1", c.Hosts))
	}
	if c.InFlight < 1 {
		errs = append(errs, fmt.Errorf("in flight %d: want at least 1", c.InFlight))
	}
	if c.Rows < 0 {
		errs = append(errs, fmt.Errorf("rows %d: want 0 (no limit) or more", c.Rows))
	}
	if c.Span < 0 || (c.Span > 0 && c.Rows == 0) {
		errs = append(errs, fmt.Errorf("time span %s: want 0, or more with a number of rows to spread over it", c.Span))
	}
	if c.Mode != ModePut && c.Mode != ModeIngest {
		errs = append(errs, fmt.Errorf("mode %q: want %q or %q", c.Mode, ModePut, ModeIngest))
	}
	return errors.Join(errs...)
}

// KindWrite is the kind of the writers' batches in reports.
const KindWrite = "write"

// writer is one writer of a run: its client, its generator, and where it
// counts.
type writer struct {
	cfg     WriteConfig
	db      string
	table   string
	cl      *flightsql.Client
	sent    *countingClient
	mem     memory.Allocator
	gen     *Generator
	stats   *kindStats
	onAck   func()        // after every acknowledged batch
	budget  *atomic.Int64 // rows left to send of all writers (WriteConfig.Rows); nil: no limit
	backoff backoff
}

// take reserves the rows of one more batch; false: the rows to send are
// all sent. The one batch that crosses the limit is sent whole.
func (w *writer) take() bool {
	if w.budget == nil {
		return true
	}
	n := int64(w.gen.Rows())
	return w.budget.Add(-n)+n > 0
}

// spent tells whether every row to send has been sent.
func (w *writer) spent() bool { return w.budget != nil && w.budget.Load() <= 0 }

// run writes until stop is closed, reopening the stream after a failure.
// ctx bounds the calls: it outlives stop by the drain.
func (w *writer) run(ctx context.Context, stop <-chan struct{}) {
	defer w.gen.Release()
	for !closed(stop) && ctx.Err() == nil && !w.spent() {
		var err error
		if w.cfg.Mode == ModeIngest {
			err = w.ingest(ctx, stop)
		} else {
			err = w.stream(ctx, stop)
		}
		if err == nil {
			w.backoff.reset()
			continue
		}
		w.backoff.wait(stop)
	}
}

// sentBatch is a batch sent and not yet acknowledged.
type sentBatch struct {
	start time.Time
	rows  int64
	bytes int64
}

// stream writes batches on one DoPut until stop is closed or the stream
// fails; it counts the stream's successes and failures.
func (w *writer) stream(ctx context.Context, stop <-chan struct{}) error {
	st, err := w.cl.Client.DoPut(ctx)
	if err != nil {
		w.stats.fail(err, 1)
		return err
	}
	fw := flight.NewRecordWriter(st, ipc.WithSchema(Schema), ipc.WithAllocator(w.mem))
	fw.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{w.db, w.table}})

	// slots bounds the batches in flight; sent is their FIFO, which the
	// receiver matches with the PutResults, which come in order.
	slots := make(chan struct{}, w.cfg.InFlight)
	sent := make(chan sentBatch, w.cfg.InFlight)
	recvDone := make(chan struct{})
	var recvErr error
	var acked int64
	go func() {
		defer close(recvDone)
		acked, recvErr = w.receive(st, sent, slots)
	}()

	var sendErr error
	var sentN int64
send:
	for {
		select {
		case <-stop:
			break send
		case <-recvDone:
			break send
		case slots <- struct{}{}:
		}
		if !w.take() {
			break
		}
		rec := w.gen.Next()
		before := w.sent.sent.Load()
		start := time.Now()
		err := fw.Write(rec)
		rec.Release()
		if err != nil {
			// io.EOF: the server ended the stream; Recv has its error.
			if !errors.Is(err, io.EOF) {
				sendErr = err
			}
			break
		}
		sentN++
		sent <- sentBatch{start: start, rows: int64(w.gen.Rows()), bytes: w.sent.sent.Load() - before}
	}
	close(sent)
	if err := fw.Close(); err != nil && sendErr == nil && !errors.Is(err, io.EOF) {
		sendErr = err
	}
	_ = st.CloseSend()
	<-recvDone

	err = recvErr
	if err == nil {
		err = sendErr
	}
	if err == nil && acked < sentN {
		err = fmt.Errorf("the stream ended with %d of %d batches unacknowledged", sentN-acked, sentN)
	}
	if err != nil {
		w.stats.fail(err, max(sentN-acked, 1))
		return fmt.Errorf("writing %s.%s: %w", w.db, w.table, err)
	}
	return nil
}

// receive matches the stream's PutResults with the batches sent, in
// order, and counts each; it returns how many were acknowledged, and the
// stream's error (nil at its normal end).
func (w *writer) receive(st flight.FlightService_DoPutClient, sent <-chan sentBatch, slots <-chan struct{}) (int64, error) {
	var acked int64
	for {
		res, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return acked, nil
		}
		if err != nil {
			return acked, err
		}
		b, ok := <-sent
		if !ok {
			return acked, fmt.Errorf("a PutResult for no batch sent (%d acknowledged)", acked)
		}
		lat := time.Since(b.start)
		<-slots
		var md apronpb.PutResultMetadata
		if err := proto.Unmarshal(res.GetAppMetadata(), &md); err != nil {
			return acked, fmt.Errorf("decoding PutResult metadata %x: %w", res.GetAppMetadata(), err)
		}
		if md.GetRowsWritten() != b.rows {
			return acked, fmt.Errorf("PutResult says %d rows written of a batch of %d", md.GetRowsWritten(), b.rows)
		}
		acked++
		w.stats.ok(lat, b.rows, b.bytes)
		if w.onAck != nil {
			w.onAck()
		}
	}
}

// ingest writes one batch a Flight SQL ingest call until stop is closed
// or a call fails.
func (w *writer) ingest(ctx context.Context, stop <-chan struct{}) error {
	opts := &flightsql.ExecuteIngestOpts{
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend,
		},
		Table:  w.table,
		Schema: &w.db,
	}
	for !closed(stop) && w.take() {
		rec := w.gen.Next()
		rdr, err := array.NewRecordReader(Schema, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err // the generator's batches always match Schema
		}
		before := w.sent.sent.Load()
		start := time.Now()
		n, err := w.cl.ExecuteIngest(ctx, rdr, opts)
		lat := time.Since(start)
		rdr.Release()
		if err == nil && n != int64(w.gen.Rows()) {
			err = fmt.Errorf("ingest says %d rows written of a batch of %d", n, w.gen.Rows())
		}
		if err != nil {
			w.stats.fail(err, 1)
			return fmt.Errorf("ingesting into %s.%s: %w", w.db, w.table, err)
		}
		w.stats.ok(lat, n, w.sent.sent.Load()-before)
		if w.onAck != nil {
			w.onAck()
		}
	}
	return nil
}

// closed tells whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// backoff is the growing pause after consecutive failures, so that a
// server that is down is not hammered (and the errors counted stay few).
type backoff struct{ n int }

func (b *backoff) reset() { b.n = 0 }

// wait pauses 50ms, 100ms, … up to 1s, or until stop is closed.
func (b *backoff) wait(stop <-chan struct{}) {
	d := min(50*time.Millisecond<<min(b.n, 5), time.Second)
	b.n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}
