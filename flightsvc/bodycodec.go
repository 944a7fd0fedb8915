package flightsvc

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
)

// bodyCodec is the server's gRPC codec: protobuf, as gRPC's own, except
// that the data_body of a FlightData (the Arrow buffers of a batch, the
// bulk of every DoPut) is copied out of the received message into memory
// from bodies. gRPC's codec would copy it into a new allocation each time;
// on a server that buffers gigabytes that allocation is fresh memory the
// kernel faults in page by page (measured: half of the copy's speed, and
// the largest single cost of bulk ingest). A DoPut read through putReader
// gives each body back to bodies once the last array over it is released,
// so the next one reuses warm memory. Bodies read another way are left to
// the garbage collector, as gRPC's would be.
//
// Replies are marshalled as gRPC's codec does, but into buffers of the
// server's pool (framePool) rather than gRPC's default pool, which the
// codec uses whatever the server's pool is and which zeroes each buffer
// it hands out, whole: a reply of more than 32 KiB (one host's last 10
// minutes, 694 rows) came in a 1 MiB buffer zeroed for it, 6.8% of the
// server's CPU in a loop of that query. Marshalling writes the reply's
// every byte, so nothing is left to zero for.
type bodyCodec struct {
	base   encoding.CodecV2
	bodies *buffer.Recycler
	pool   mem.BufferPool
}

func newBodyCodec(bodies *buffer.Recycler, pool mem.BufferPool) bodyCodec {
	return bodyCodec{base: encoding.GetCodecV2(grpcproto.Name), bodies: bodies, pool: pool}
}

func (bodyCodec) Name() string { return grpcproto.Name }

// Marshal is gRPC's codecV2.Marshal with c.pool.
func (c bodyCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Marshal(v) // a protoadapt V1 message: gRPC's way
	}
	// Size first: UseCachedSize reuses it (the message is not changed
	// meanwhile).
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	if len(out) != size || (size > 0 && &out[0] != &(*buf)[0]) {
		// Not written in place (the size changed under us): the pool's
		// buffer goes back, the new slice is sent.
		c.pool.Put(buf)
		return mem.BufferSlice{mem.SliceBuffer(out)}, nil
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c bodyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	return c.unmarshalPieces(newPieces(data), fd)
}

// unmarshalPieces decodes a FlightData from the buffers gRPC read it into
// (16 KiB HTTP/2 frames for a large message) without joining them first:
// joining would copy every body once more, into a buffer gRPC zeroes. The
// body is copied straight from the frames into memory from c.bodies.
func (c bodyCodec) unmarshalPieces(p pieces, fd *flight.FlightData) error {
	proto.Reset(fd)
	for p.left > 0 {
		tag, err := p.varint()
		if err != nil {
			return fmt.Errorf("flightsvc: FlightData: %w", err)
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return fmt.Errorf("flightsvc: FlightData: invalid field number %d", tag>>3)
		}
		if typ != protowire.BytesType {
			// No other FlightData field: skipped, as protobuf keeps
			// unknown fields aside.
			if err := p.skipField(num, typ, 0); err != nil {
				return fmt.Errorf("flightsvc: FlightData field %d: %w", num, err)
			}
			continue
		}
		l, err := p.varint()
		if err != nil {
			return fmt.Errorf("flightsvc: FlightData field %d: %w", num, err)
		}
		// The length is checked against what is left before anything is
		// allocated for it.
		if l > uint64(p.left) {
			return fmt.Errorf("flightsvc: FlightData field %d: length %d past the end of the message (%d bytes left)", num, l, p.left)
		}
		n := int(l)
		switch num {
		case fdDescriptor:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			// Merged, as protobuf merges a repeated message field.
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(p.bytes(n), fd.FlightDescriptor); err != nil {
				return fmt.Errorf("flightsvc: FlightData descriptor: %w", err)
			}
		case fdDataHeader:
			fd.DataHeader = p.bytes(n)
		case fdAppMetadata:
			fd.AppMetadata = p.bytes(n)
		case fdDataBody:
			body := c.bodies.AllocateUninitialized(n)
			p.read(body)
			fd.DataBody = body
		default:
			p.skip(n) //nolint:errcheck // n <= p.left
		}
	}
	return nil
}

// pieces reads a message that sits in several buffers.
type pieces struct {
	bufs [][]byte
	left int // bytes left in bufs
}

func newPieces(data mem.BufferSlice) pieces {
	p := pieces{bufs: make([][]byte, 0, len(data))}
	for _, b := range data {
		if d := b.ReadOnlyData(); len(d) > 0 {
			p.bufs = append(p.bufs, d)
			p.left += len(d)
		}
	}
	return p
}

var errTruncated = errors.New("message truncated")

func (p *pieces) varint() (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		if p.left == 0 {
			return 0, errTruncated
		}
		for len(p.bufs[0]) == 0 {
			p.bufs = p.bufs[1:]
		}
		b := p.bufs[0][0]
		p.bufs[0] = p.bufs[0][1:]
		p.left--
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if i == 9 && b > 1 {
				return 0, errors.New("varint overflows 64 bits")
			}
			return v, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

// read fills dst from the message; len(dst) <= p.left.
func (p *pieces) read(dst []byte) {
	for len(dst) > 0 {
		n := copy(dst, p.bufs[0])
		dst = dst[n:]
		p.bufs[0] = p.bufs[0][n:]
		p.left -= n
		if len(p.bufs[0]) == 0 {
			p.bufs = p.bufs[1:]
		}
	}
}

// bytes returns the next n bytes (n <= p.left) in a new slice.
func (p *pieces) bytes(n int) []byte {
	b := make([]byte, n)
	p.read(b)
	return b
}

// maxGroupDepth is protobuf's recursion limit, for groups in groups.
const maxGroupDepth = protowire.DefaultRecursionLimit

// skipField skips the value of a field whose tag was read: of any wire
// type but a group's end, groups (deprecated; no Flight client sends them)
// through their matching end.
func (p *pieces) skipField(num protowire.Number, typ protowire.Type, depth int) error {
	switch typ {
	case protowire.VarintType:
		_, err := p.varint()
		return err
	case protowire.Fixed32Type:
		return p.skip(4)
	case protowire.Fixed64Type:
		return p.skip(8)
	case protowire.BytesType:
		l, err := p.varint()
		if err != nil {
			return err
		}
		if l > uint64(p.left) {
			return errTruncated
		}
		return p.skip(int(l))
	case protowire.StartGroupType:
		if depth >= maxGroupDepth {
			return errors.New("groups nested too deep")
		}
		for {
			tag, err := p.varint()
			if err != nil {
				return err
			}
			// Inside a group protobuf admits any number from 1 up to
			// MaxInt32 (protowire.ConsumeTag), not only the valid range
			// it checks at the top level; so do we, to agree with it.
			n, t := protowire.DecodeTag(tag)
			if n < protowire.MinValidNumber {
				return fmt.Errorf("invalid field number %d", tag>>3)
			}
			if t == protowire.EndGroupType {
				if n != num {
					return fmt.Errorf("group %d ended by the end of group %d", num, n)
				}
				return nil
			}
			if err := p.skipField(n, t, depth+1); err != nil {
				return err
			}
		}
	case protowire.EndGroupType:
		return errors.New("end of a group that did not start")
	}
	return fmt.Errorf("invalid wire type %d", typ)
}

func (p *pieces) skip(n int) error {
	if n > p.left {
		return errTruncated
	}
	for n > 0 {
		k := min(n, len(p.bufs[0]))
		p.bufs[0] = p.bufs[0][k:]
		p.left -= k
		n -= k
		if len(p.bufs[0]) == 0 {
			p.bufs = p.bufs[1:]
		}
	}
	return nil
}

// FlightData's fields (Flight.proto): all length-delimited.
const (
	fdDescriptor  = 1
	fdDataHeader  = 2
	fdAppMetadata = 3
	fdDataBody    = 1000
)
