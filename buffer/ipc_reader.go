package buffer

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sliceMessageReader reads the Arrow IPC stream of a WAL entry in place:
// messages' metadata and bodies are slices of the payload, not copies. The
// arrays decoded from it alias the payload, which the WAL reader reuses for
// the next record, so they must not outlive the replay callback; the buffer
// copies rows out of them, so they need not.
type sliceMessageReader struct {
	b   []byte
	msg *ipc.Message
}

var emptyBody = memory.NewBufferBytes([]byte{})

func (r *sliceMessageReader) Message() (msg *ipc.Message, err error) {
	defer func() {
		// Bytes that passed the WAL checksum were written by this server,
		// but a flatbuffer decoder panics on garbage: fail, never crash.
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("arrow/ipc: invalid message: %v", p)
		}
	}()
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	if len(r.b) < 4 {
		return nil, io.EOF
	}
	n := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	if n == 0xFFFFFFFF {
		if len(r.b) < 4 {
			return nil, io.ErrUnexpectedEOF
		}
		n = binary.LittleEndian.Uint32(r.b)
		r.b = r.b[4:]
	}
	if n == 0 {
		return nil, io.EOF
	}
	if int64(n) > int64(len(r.b)) {
		return nil, fmt.Errorf("arrow/ipc: message metadata of %d bytes, %d left", n, len(r.b))
	}
	meta := memory.NewBufferBytes(r.b[:n])
	r.b = r.b[n:]
	bodyLen := ipc.NewMessage(meta, emptyBody).BodyLen()
	if bodyLen < 0 || bodyLen > int64(len(r.b)) {
		return nil, fmt.Errorf("arrow/ipc: message body of %d bytes, %d left", bodyLen, len(r.b))
	}
	body := memory.NewBufferBytes(r.b[:bodyLen])
	r.b = r.b[bodyLen:]
	r.msg = ipc.NewMessage(meta, body)
	return r.msg, nil
}

func (r *sliceMessageReader) Retain() {}

func (r *sliceMessageReader) Release() {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}
