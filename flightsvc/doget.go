package flightsvc

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Query results are streamed here rather than by arrow-go's Flight SQL
// DoGet, which does the same with a record writer of its own
// (flight.NewRecordWriter). That writer serializes each message's body
// into a bytes.Buffer it makes for the stream and grows by doubling: in
// a loop of one host's last 10 minutes over persisted files (694 rows,
// ~60 KB a result), 185 KB of the server's 632 KB allocated per query,
// which the garbage collector then paid for in every query's tail. The
// buffers here come from a pool and keep their size from stream to
// stream.

// bodyBuffers holds the message body buffers of finished streams.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody bounds a body buffer kept for the next stream: a result's
// messages are gathered up to maxChunkBytes, and a buffer grown past
// that by a larger one is let go rather than held.
const maxPooledBody = 2 * maxChunkBytes

// pooledPayloadWriter sends IPC payloads as FlightData messages, each
// body serialized into one reused buffer. Reusing it after Send returns is
// safe: gRPC marshals the message (bodyCodec's Marshal is proto's, which
// copies) before Send returns, as arrow-go's writer relies on too.
type pooledPayloadWriter struct {
	w   flight.DataStreamWriter
	fd  flight.FlightData
	buf *bytes.Buffer
}

func (p *pooledPayloadWriter) Start() error { return nil }

func (p *pooledPayloadWriter) WritePayload(payload ipc.Payload) error {
	m := payload.Meta()
	defer m.Release()
	p.fd.DataHeader = m.Bytes()
	p.buf.Reset()
	if err := payload.SerializeBody(p.buf); err != nil {
		return err
	}
	p.fd.DataBody = p.buf.Bytes()
	err := p.w.Send(&p.fd)
	p.fd.DataHeader, p.fd.DataBody = nil, nil
	return err
}

func (p *pooledPayloadWriter) Close() error { return nil }

// recordStreamWriter writes record batches to a Flight data stream (what
// flight.Writer does) through a pooledPayloadWriter; close ends the stream
// and gives its buffer back. The schema message is the kept encoding of
// the schema (schemacache.go), and each batch is encoded alone
// (ipc.GetRecordBatchPayload): ipc.Writer would encode the schema anew
// for every stream. A schema with dictionaries goes through ipc.Writer,
// which sends each dictionary before the batches that use it.
type recordStreamWriter struct {
	pw      *pooledPayloadWriter
	enc     *schemaEncoding
	mem     memory.Allocator
	ipc     *ipc.Writer // a schema with dictionaries only
	started bool        // the schema was sent
	err     error       // the first failure: nothing more is sent
}

func newRecordStreamWriter(w flight.DataStreamWriter, enc *schemaEncoding, mem memory.Allocator) *recordStreamWriter {
	pw := &pooledPayloadWriter{w: w, buf: bodyBuffers.Get().(*bytes.Buffer)}
	rw := &recordStreamWriter{pw: pw, enc: enc, mem: mem}
	if enc.dictionaries {
		rw.ipc = ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(enc.schema), ipc.WithAllocator(mem))
	}
	return rw
}

// writeWithAppMetadata writes rec with appMeta in its message (and in the
// schema's, when rec is the first).
func (w *recordStreamWriter) writeWithAppMetadata(rec arrow.RecordBatch, appMeta []byte) error {
	w.pw.fd.AppMetadata = appMeta
	defer func() { w.pw.fd.AppMetadata = nil }()
	if w.ipc != nil {
		return w.ipc.Write(rec)
	}
	if w.err != nil {
		return w.err
	}
	if err := w.start(); err != nil {
		return err
	}
	if !rec.Schema().Equal(w.enc.schema) { // ipc.Writer's check
		w.err = fmt.Errorf("flightsvc: a batch of schema %s in a stream of schema %s", rec.Schema(), w.enc.schema)
		return w.err
	}
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(w.mem))
	if err != nil {
		w.err = fmt.Errorf("flightsvc: encoding a batch: %w", err)
		return w.err
	}
	defer p.Release()
	if err := w.pw.WritePayload(p); err != nil {
		w.err = err
	}
	return w.err
}

// start sends the schema message, once.
func (w *recordStreamWriter) start() error {
	if w.started {
		return nil
	}
	w.started = true
	w.pw.fd.DataHeader = w.enc.message
	err := w.pw.w.Send(&w.pw.fd)
	w.pw.fd.DataHeader = nil
	if err != nil {
		w.err = err
	}
	return err
}

// close ends the IPC stream (a stream of no batches still gets its
// schema, as from ipc.Writer) and gives the body buffer back.
func (w *recordStreamWriter) close() error {
	var err error
	switch {
	case w.ipc != nil:
		err = w.ipc.Close()
	case w.err == nil:
		err = w.start()
	}
	if w.pw.buf != nil {
		if w.pw.buf.Cap() <= maxPooledBody {
			w.pw.buf.Reset()
			bodyBuffers.Put(w.pw.buf)
		}
		w.pw.buf = nil
	}
	return err
}

// sqlQueryTicket reads a Flight SQL ticket that carries a query: a
// statement's (TicketStatementQuery) or a prepared statement's
// (CommandPreparedStatementQuery). ok is false for any other ticket,
// which arrow-go's Flight SQL server then answers.
func sqlQueryTicket(raw []byte) (proto.Message, bool) {
	var a anypb.Any
	if proto.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	switch {
	case a.MessageIs((*flightpb.TicketStatementQuery)(nil)):
		var t flightpb.TicketStatementQuery
		if a.UnmarshalTo(&t) != nil {
			return nil, false
		}
		return &t, true
	case a.MessageIs((*flightpb.CommandPreparedStatementQuery)(nil)):
		var c flightpb.CommandPreparedStatementQuery
		if a.UnmarshalTo(&c) != nil {
			return nil, false
		}
		return &c, true
	}
	return nil, false
}

// doGetSQL streams the result of a query ticket (sqlQueryTicket) as
// arrow-go's Flight SQL DoGet does: the schema, then each batch, the
// stream's chunks drained and released whatever happens.
func (s *Service) doGetSQL(cmd proto.Message, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	var (
		sc  *arrow.Schema
		cc  <-chan flight.StreamChunk
		err error
	)
	switch c := cmd.(type) {
	case *flightpb.TicketStatementQuery:
		sc, cc, err = s.sql.DoGetStatement(ctx, c)
	case *flightpb.CommandPreparedStatementQuery:
		sc, cc, err = s.sql.DoGetPreparedStatement(ctx, c)
	default:
		return statusOf(fmt.Errorf("%w: a ticket of %T is not a query", errInvalidRequest, cmd))
	}
	if err != nil {
		return statusOf(err)
	}
	// A cancelled call, or an encoding error, gets its gRPC code here
	// (the chunks' errors and Send's have theirs already).
	return statusOf(writeChunks(ctx, stream, s.sql.schemas.of(sc), cc, s.sql.mem))
}

// writeChunks writes the chunks of cc to stream until cc closes, a chunk
// carries an error, or ctx ends; the chunks not written are released.
func writeChunks(ctx context.Context, stream flight.DataStreamWriter, sc *schemaEncoding, cc <-chan flight.StreamChunk, mem memory.Allocator) error {
	defer func() {
		for chunk := range cc {
			if chunk.Data != nil {
				chunk.Data.Release()
			}
		}
	}()
	w := newRecordStreamWriter(stream, sc, mem)
	defer w.close()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case chunk, ok := <-cc:
			if !ok {
				return nil
			}
			if chunk.Err != nil {
				return chunk.Err
			}
			err := w.writeWithAppMetadata(chunk.Data, chunk.AppMetadata)
			chunk.Data.Release()
			if err != nil {
				return err
			}
		}
	}
}
