package flightsvc

import (
	"bytes"
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
type bodyCodec struct {
	base   encoding.CodecV2
	bodies *buffer.Recycler
}

func newBodyCodec(bodies *buffer.Recycler) bodyCodec {
	return bodyCodec{base: encoding.GetCodecV2(grpcproto.Name), bodies: bodies}
}

func (bodyCodec) Name() string { return grpcproto.Name }

func (c bodyCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c bodyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return c.unmarshalFlightData(buf.ReadOnlyData(), fd)
}

// FlightData's fields (Flight.proto): all length-delimited.
const (
	fdDescriptor  = 1
	fdDataHeader  = 2
	fdAppMetadata = 3
	fdDataBody    = 1000
)

// unmarshalFlightData decodes b into fd. Every field is copied out of b
// (which gRPC reuses); the body into memory from c.bodies.
func (c bodyCodec) unmarshalFlightData(b []byte, fd *flight.FlightData) error {
	proto.Reset(fd)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("flightsvc: FlightData: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("flightsvc: FlightData field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("flightsvc: FlightData field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case fdDescriptor:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			// Merged, as protobuf merges a repeated message field.
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("flightsvc: FlightData descriptor: %w", err)
			}
		case fdDataHeader:
			fd.DataHeader = bytes.Clone(v)
		case fdAppMetadata:
			fd.AppMetadata = bytes.Clone(v)
		case fdDataBody:
			body := c.bodies.AllocateUninitialized(len(v))
			copy(body, v)
			fd.DataBody = body
		}
	}
	return nil
}
