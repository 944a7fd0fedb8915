package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/input"
	apronpb "github.com/apron-db/apron/proto"
)

// pendingBatch is a batch of a file on its way to the server.
type pendingBatch struct {
	file  string
	batch input.Batch
}

// inFlightPerStream bounds the batches sent on a stream and not yet
// acknowledged: enough to keep the server busy while the client reads
// on, few enough that memory stays a few batches per stream.
const inFlightPerStream = 4

// batchWriter sends batches over parallel plain Flight DoPut streams
// (PATH [database, table]), each batch acknowledged by a PutResult once
// its WAL record is durable. Batches of one table and schema share a
// stream; another table or schema opens a new one (a DoPut stream has one
// schema).
type batchWriter struct {
	ctx    context.Context
	cancel context.CancelFunc
	cl     flight.Client
	db     string
	mem    memory.Allocator
	report func(err error) error // a server error as the CLI says it

	ch    chan pendingBatch
	wg    sync.WaitGroup
	acked atomic.Int64 // rows durably written

	errOnce sync.Once
	err     error
}

func newBatchWriter(ctx context.Context, cl flight.Client, db string, streams int, mem memory.Allocator, report func(error) error) *batchWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &batchWriter{ctx: ctx, cancel: cancel, cl: cl, db: db, mem: mem, report: report, ch: make(chan pendingBatch)}
	w.wg.Add(streams)
	for range streams {
		go w.worker()
	}
	return w
}

// send hands p to a stream; it owns p's record from then on. false:
// the writer has failed (close says why) or was cancelled.
func (w *batchWriter) send(p pendingBatch) bool {
	select {
	case w.ch <- p:
		return true
	case <-w.ctx.Done():
		p.batch.Record.Release()
		return false
	}
}

// close waits for every batch sent to be acknowledged, or for the first
// failure, and returns it.
func (w *batchWriter) close() error {
	close(w.ch)
	w.wg.Wait()
	w.cancel()
	return w.err
}

func (w *batchWriter) fail(err error) {
	w.errOnce.Do(func() {
		w.err = err
		w.cancel()
	})
}

func (w *batchWriter) worker() {
	defer w.wg.Done()
	var s *putStream
	for p := range w.ch {
		if w.ctx.Err() != nil {
			p.batch.Record.Release()
			continue
		}
		key := p.batch.Table + "\x00" + fmt.Sprint(p.batch.Record.Schema().Fingerprint())
		if s != nil && s.key != key {
			if err := s.finish(); err != nil {
				w.fail(err)
				p.batch.Record.Release()
				s = nil
				continue
			}
			s = nil
		}
		if s == nil {
			var err error
			if s, err = w.open(key, p); err != nil {
				w.fail(err)
				p.batch.Record.Release()
				continue
			}
		}
		if err := s.write(p); err != nil {
			w.fail(err)
			s.abort()
			s = nil
		}
	}
	if s != nil {
		if err := s.finish(); err != nil {
			w.fail(err)
		}
	}
}

// putStream is one DoPut stream and the batches it has sent that wait
// for their acknowledgement, oldest first (the server answers in order).
type putStream struct {
	w      *batchWriter
	key    string
	stream flight.FlightService_DoPutClient
	fw     *flight.Writer
	slots  chan struct{}

	mu      sync.Mutex
	pending []pendingBatch // their records already released: positions only

	recvDone chan struct{}
	recvErr  error
}

func (w *batchWriter) open(key string, first pendingBatch) (*putStream, error) {
	stream, err := w.cl.DoPut(w.ctx)
	if err != nil {
		return nil, w.report(err)
	}
	fw := flight.NewRecordWriter(stream, ipc.WithSchema(first.batch.Record.Schema()), ipc.WithAllocator(w.mem))
	fw.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{w.db, first.batch.Table}})
	s := &putStream{w: w, key: key, stream: stream, fw: fw, slots: make(chan struct{}, inFlightPerStream), recvDone: make(chan struct{})}
	go s.receive()
	return s, nil
}

// write sends p, waiting while inFlightPerStream batches are unanswered.
func (s *putStream) write(p pendingBatch) error {
	defer p.batch.Record.Release()
	select {
	case s.slots <- struct{}{}:
	case <-s.recvDone:
		return s.endErr()
	case <-s.w.ctx.Done():
		return s.w.ctx.Err()
	}
	s.mu.Lock()
	pos := p
	pos.batch.Record = nil
	s.pending = append(s.pending, pos)
	s.mu.Unlock()
	if err := s.fw.Write(p.batch.Record); err != nil {
		// The server ended the stream (io.EOF here); its status comes
		// with the next Recv.
		<-s.recvDone
		if s.recvErr != nil {
			return s.recvErr
		}
		return fmt.Errorf("sending %s: %w", describeBatch(pos), err)
	}
	return nil
}

// receive counts the acknowledgements until the stream ends.
func (s *putStream) receive() {
	defer close(s.recvDone)
	for {
		res, err := s.stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		s.mu.Lock()
		var front *pendingBatch
		if len(s.pending) > 0 {
			front = &s.pending[0]
		}
		s.mu.Unlock()
		if err != nil {
			if front != nil {
				s.recvErr = fmt.Errorf("the server refused the batch of %s: %w", describeBatch(*front), s.w.report(err))
			} else {
				s.recvErr = s.w.report(err)
			}
			return
		}
		var md apronpb.PutResultMetadata
		if err := proto.Unmarshal(res.GetAppMetadata(), &md); err != nil {
			s.recvErr = fmt.Errorf("the server's acknowledgement is not an Apron PutResult (%w): is %s an Apron server?", err, s.w.db)
			return
		}
		if front == nil {
			s.recvErr = errors.New("the server acknowledged a batch that was not sent")
			return
		}
		s.mu.Lock()
		s.pending = s.pending[1:]
		s.mu.Unlock()
		s.w.acked.Add(md.GetRowsWritten())
		<-s.slots
	}
}

// endErr is why the stream ended before its batches were answered.
func (s *putStream) endErr() error {
	if s.recvErr != nil {
		return s.recvErr
	}
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("the server ended the stream with %d batches unacknowledged, the first of %s", n, describeBatch(s.pending[0]))
	}
	return nil
}

// finish ends the stream and waits for the acknowledgement of every
// batch sent.
func (s *putStream) finish() error {
	werr := s.fw.Close()
	s.stream.CloseSend()
	<-s.recvDone
	if err := s.endErr(); err != nil {
		return err
	}
	if werr != nil && !errors.Is(werr, io.EOF) {
		return fmt.Errorf("ending the stream: %w", werr)
	}
	return nil
}

// abort ends the stream after a failure.
func (s *putStream) abort() {
	s.fw.Close()
	s.stream.CloseSend()
	s.w.cancel()
	<-s.recvDone
}
