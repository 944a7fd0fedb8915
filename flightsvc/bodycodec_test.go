package flightsvc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
)

// split cuts b into buffers of at most n bytes, as gRPC hands over a
// message read from several HTTP/2 frames.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(b[:k]))
		b = b[k:]
	}
	return s
}

// TestBodyCodec: FlightData decodes as protobuf decodes it, the body into
// the recycler's memory, whatever buffers the message arrives in; other
// messages and bad input go as gRPC's codec.
func TestBodyCodec(t *testing.T) {
	for _, piece := range []int{1 << 30, 16 << 10, 1000, 7, 1} {
		t.Run(fmt.Sprintf("buffers-of-%d", piece), func(t *testing.T) { testBodyCodec(t, piece) })
	}
}

func testBodyCodec(t *testing.T, piece int) {
	rec := buffer.NewRecycler(memory.NewGoAllocator())
	c := newBodyCodec(rec, &framePool{})
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
	if err := c.Unmarshal(split(wire, piece), &got); err != nil {
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
	if err := c.Unmarshal(split(wire, piece), &next); err != nil {
		t.Fatal(err)
	}
	if &next.DataBody[0] != &got.DataBody[0] || !bytes.Equal(next.DataBody, want.DataBody) {
		t.Fatal("the freed body was not reused, or not overwritten")
	}
	// Unknown fields are skipped, as protobuf would (a varint field 4).
	withUnknown := append(append([]byte(nil), wire...), 0x20, 0x01)
	if err := c.Unmarshal(split(withUnknown, piece), &got); err != nil || !bytes.Equal(got.DataHeader, want.DataHeader) {
		t.Fatalf("with an unknown field: %v", err)
	}
	// Every other kind of unknown field too: fixed64, fixed32, bytes, a
	// group, groups in a group.
	for _, extra := range [][]byte{
		{0x29, 1, 2, 3, 4, 5, 6, 7, 8},
		{0x2d, 1, 2, 3, 4},
		{0x32, 3, 'a', 'b', 'c'},
		{0x3b, 0x20, 0x01, 0x3c},
		{0x3b, 0x43, 0x20, 0x01, 0x44, 0x3c},
	} {
		b := append(append([]byte(nil), wire...), extra...)
		var fd flight.FlightData
		if err := c.Unmarshal(split(b, piece), &fd); err != nil || !proto.Equal(&fd, want) {
			t.Fatalf("with unknown field %x: %v", extra, err)
		}
	}
	// Groups that do not end, or end as another group, are errors.
	for _, extra := range [][]byte{{0x3b, 0x20, 0x01}, {0x3b, 0x44}, {0x3c}} {
		b := append(append([]byte(nil), wire...), extra...)
		var fd flight.FlightData
		if err := c.Unmarshal(split(b, piece), &fd); err == nil {
			t.Fatalf("with %x: no error", extra)
		}
	}
	// A length past the end is an error before anything is allocated.
	huge := append(protowire.AppendTag(nil, fdDataBody, protowire.BytesType), 0xff, 0xff, 0xff, 0xff, 0x0f)
	if err := c.Unmarshal(split(huge, piece), &got); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Fatalf("a 4 GiB body length in a 9-byte message: %v", err)
	}
	// Truncated input is an error, not a panic.
	for cut := 1; cut < len(wire); cut += 97 {
		var fd flight.FlightData
		if err := c.Unmarshal(split(wire[:len(wire)-cut], piece), &fd); err == nil {
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

// TestBodyCodecMarshal: replies marshal as protobuf marshals them, small
// ones into a slice of their own, larger ones into a buffer of the
// codec's pool that was not zeroed for them (a buffer put back dirty is
// handed out again, every byte overwritten).
func TestBodyCodecMarshal(t *testing.T) {
	pool := &framePool{}
	c := newBodyCodec(buffer.NewRecycler(memory.NewGoAllocator()), pool)
	for _, n := range []int{0, 10, 40 << 10, 700 << 10, 3 << 20} {
		msg := &flight.FlightData{DataHeader: []byte("header"), DataBody: bytes.Repeat([]byte{byte(n)}, n)}
		want, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			got, err := c.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			if b := got.Materialize(); !bytes.Equal(b, want) {
				t.Fatalf("%d-byte body, round %d: marshalled %d bytes unlike protobuf's %d", n, round, len(b), len(want))
			}
			if len(got) == 1 && n >= 40<<10 && n < 1<<20 {
				if c := cap(got[0].ReadOnlyData()); c&(c-1) != 0 {
					t.Errorf("%d-byte body: a buffer of capacity %d, not of the pool", n, c)
				}
			}
			// Dirty it before it goes back: the next round must not
			// see these bytes.
			for _, b := range got {
				d := b.ReadOnlyData()
				for i := range d {
					d[i] = 0xEE
				}
			}
			got.Free()
		}
	}
	var desc flight.FlightDescriptor
	if _, err := c.Marshal(&desc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Fatal("a value that is no message marshalled")
	}
}
