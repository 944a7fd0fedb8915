package flightsvc

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// putReader reads the batches of a DoPut stream as arrow-go's flight.Reader
// does, but hands the IPC reader each message body as a reference-counted
// buffer of bodies (which bodyCodec allocated it from): arrow-go's IPC
// reader slices a batch's arrays out of the body with memory.SliceBuffer,
// which holds a reference, so the body goes back to bodies once the last
// array over it is released (the write path copies what it keeps: the WAL
// record and the buffer's chunks are its own memory). With bodies nil (no
// bodyCodec) bodies are plain Go memory, as flight.Reader makes them.
type putReader struct {
	*ipc.Reader
	msgs *putMessages
}

// newPutReader returns a reader of stream, whose first message (the
// schema) it reads now.
func newPutReader(stream flight.DataStreamReader, bodies memory.Allocator, opts ...ipc.Option) (*putReader, error) {
	m := &putMessages{stream: stream, bodies: bodies}
	m.refs.Store(1)
	r, err := ipc.NewReaderFromMessageReader(m, opts...)
	if err != nil {
		m.Release()
		return nil, err
	}
	return &putReader{Reader: r, msgs: m}, nil
}

func (r *putReader) Retain() {
	r.Reader.Retain()
	r.msgs.Retain()
}

func (r *putReader) Release() {
	r.Reader.Release()
	r.msgs.Release()
}

func (r *putReader) LatestAppMetadata() []byte                        { return r.msgs.appMetadata }
func (r *putReader) LatestFlightDescriptor() *flight.FlightDescriptor { return r.msgs.descr }

func (r *putReader) Chunk() flight.StreamChunk {
	return flight.StreamChunk{Data: r.RecordBatch(), Desc: r.msgs.descr, AppMetadata: r.msgs.appMetadata}
}

// putMessages is the ipc.MessageReader of a putReader.
type putMessages struct {
	stream flight.DataStreamReader
	bodies memory.Allocator
	refs   atomic.Int64
	// msg is the last message handed out. The IPC reader never releases
	// the messages it reads (it holds references to their bodies through
	// the arrays it makes); the reader's own reference is dropped when the
	// next message is read, or at Release.
	msg         *ipc.Message
	appMetadata []byte
	descr       *flight.FlightDescriptor
}

func (m *putMessages) Message() (*ipc.Message, error) {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
	fd, err := m.stream.Recv()
	if err != nil {
		m.appMetadata = nil
		return nil, err
	}
	m.appMetadata = fd.AppMetadata
	if fd.FlightDescriptor != nil {
		m.descr = fd.FlightDescriptor
	}
	body := memory.NewBufferBytes(fd.DataBody)
	if m.bodies != nil && fd.DataBody != nil {
		body = memory.NewBufferWithAllocator(fd.DataBody, m.bodies)
	}
	m.msg = ipc.NewMessage(memory.NewBufferBytes(fd.DataHeader), body)
	// NewMessage retains what it is given: drop the references made here.
	body.Release()
	return m.msg, nil
}

func (m *putMessages) Retain() { m.refs.Add(1) }

func (m *putMessages) Release() {
	if m.refs.Add(-1) == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}
