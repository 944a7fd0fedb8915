package flightsvc

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
)

// FuzzBodyCodec: whatever bytes a client sends, in whatever buffers gRPC
// hands them over, the server's FlightData decoder agrees with protobuf's:
// it fails when protobuf fails, and otherwise decodes the same descriptor,
// header, metadata and body. It never panics, and allocates nothing from a
// length past the end of the message.
func FuzzBodyCodec(f *testing.F) {
	for _, fd := range []*flight.FlightData{
		{},
		{DataHeader: []byte("h")},
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}}, DataHeader: []byte("header"), AppMetadata: []byte("m"), DataBody: bytes.Repeat([]byte{1, 2, 3}, 100)},
		{FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("cmd")}, DataBody: []byte{}},
	} {
		wire, err := proto.Marshal(fd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire, uint8(0))
		f.Add(wire, uint8(3))
		f.Add(append(append([]byte(nil), wire...), 0x3b, 0x20, 0x01, 0x3c), uint8(5))             // and a group
		f.Add(append(append([]byte(nil), wire...), 0x3b, 0x43, 0x20, 0x01, 0x44, 0x3c), uint8(2)) // groups in a group
		f.Add(append(append([]byte(nil), wire...), 0x3b, 0x44), uint8(1))                         // ended as another
	}
	f.Add([]byte{0xc2, 0x3e, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint8(1)) // a 4 GiB body length
	rec := buffer.NewRecycler(memory.NewGoAllocator())
	c := newBodyCodec(rec, &framePool{})
	f.Fuzz(func(t *testing.T, wire []byte, piece uint8) {
		var want flight.FlightData
		protoErr := proto.Unmarshal(wire, &want)
		var got flight.FlightData
		err := c.Unmarshal(split(wire, int(piece)+1), &got)
		if (err != nil) != (protoErr != nil) {
			t.Fatalf("decoder error %v, protobuf's %v", err, protoErr)
		}
		if err != nil {
			return
		}
		if !proto.Equal(got.FlightDescriptor, want.FlightDescriptor) ||
			!bytes.Equal(got.DataHeader, want.DataHeader) || !bytes.Equal(got.AppMetadata, want.AppMetadata) || !bytes.Equal(got.DataBody, want.DataBody) {
			t.Fatalf("decoded %v, protobuf %v", &got, &want)
		}
		if got.DataBody != nil {
			rec.Free(got.DataBody)
		}
	})
}
