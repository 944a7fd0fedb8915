package flightsvc

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
)

// TestBodyCodec: FlightData decodes as protobuf decodes it, the body into
// the recycler's memory; other messages and bad input go as gRPC's codec.
func TestBodyCodec(t *testing.T) {
	rec := buffer.NewRecycler(memory.NewGoAllocator())
	c := newBodyCodec(rec)
	want := &flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}},
		DataHeader:       []byte("header"),
		AppMetadata:      []byte("meta"),
		DataBody:         bytes.Repeat([]byte{7}, 5000),
	}
	wire, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got flight.FlightData
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("decoded %v, want %v", &got, want)
	}
	if cap(got.DataBody) != 8192 {
		t.Fatalf("body of capacity %d: not from the recycler's 8 KiB class", cap(got.DataBody))
	}
	// A body given back is handed out again for the next message.
	rec.Free(got.DataBody)
	var next flight.FlightData
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &next); err != nil {
		t.Fatal(err)
	}
	if &next.DataBody[0] != &got.DataBody[0] || !bytes.Equal(next.DataBody, want.DataBody) {
		t.Fatal("the freed body was not reused, or not overwritten")
	}
	// Unknown fields are skipped, as protobuf would (a varint field 4).
	withUnknown := append(append([]byte(nil), wire...), 0x20, 0x01)
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(withUnknown)}, &got); err != nil || !bytes.Equal(got.DataHeader, want.DataHeader) {
		t.Fatalf("with an unknown field: %v", err)
	}
	// Truncated input is an error, not a panic.
	for cut := 1; cut < len(wire); cut += 97 {
		var fd flight.FlightData
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:len(wire)-cut])}, &fd); err == nil {
			t.Fatalf("%d bytes cut off: no error", cut)
		}
	}
	// Other messages: gRPC's own codec.
	var pr flight.PutResult
	prWire, _ := proto.Marshal(&flight.PutResult{AppMetadata: []byte("x")})
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(prWire)}, &pr); err != nil || string(pr.AppMetadata) != "x" {
		t.Fatalf("PutResult: %v %q", err, pr.AppMetadata)
	}
}
