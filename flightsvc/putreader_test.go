package flightsvc

import (
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
)

type fdList struct{ msgs []*flight.FlightData }

func (l *fdList) Send(fd *flight.FlightData) error {
	l.msgs = append(l.msgs, proto.Clone(fd).(*flight.FlightData))
	return nil
}

func (l *fdList) Recv() (*flight.FlightData, error) {
	if len(l.msgs) == 0 {
		return nil, io.EOF
	}
	fd := l.msgs[0]
	l.msgs = l.msgs[1:]
	return fd, nil
}

// TestPutReaderGivesBodiesBack reads a DoPut stream whose bodies came from
// a Recycler, as bodyCodec makes them: the batches read right, and once
// they and the reader are released every body is back in the recycler
// (the checked allocator under it sees nothing outstanding after Close).
func TestPutReaderGivesBodiesBack(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	bodies := buffer.NewRecycler(mem)

	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	var stream fdList
	w := flight.NewRecordWriter(&stream, ipc.WithSchema(schema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "t"}})
	const batches, rows = 5, 1000
	for b := range batches {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range rows {
			ib.Append(int64(b*rows + i))
			sb.Append("x")
		}
		cols := []arrow.Array{ib.NewArray(), sb.NewArray()}
		rec := array.NewRecordBatch(schema, cols, rows)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		cols[0].Release()
		cols[1].Release()
		ib.Release()
		sb.Release()
	}
	w.Close()
	for _, fd := range stream.msgs {
		if len(fd.DataBody) > 0 {
			body := bodies.AllocateUninitialized(len(fd.DataBody))
			copy(body, fd.DataBody)
			fd.DataBody = body
		}
	}

	r, err := newPutReader(&stream, bodies, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	var n, sum int64
	var kept []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain() // as the write path keeps a batch until it is durable
		kept = append(kept, rec)
		for _, v := range rec.Column(0).(*array.Int64).Int64Values() {
			sum += v
		}
		n += rec.NumRows()
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if d := r.LatestFlightDescriptor(); d == nil || d.Path[1] != "t" {
		t.Fatalf("descriptor %v", d)
	}
	r.Release()
	if want := int64(batches * rows); n != want || sum != want*(want-1)/2 {
		t.Fatalf("%d rows summing to %d", n, sum)
	}
	if k := bodies.Kept(); k != 0 {
		t.Fatalf("%d bytes of bodies went back while the batches over them were held", k)
	}
	for _, rec := range kept {
		rec.Release()
	}
	if bodies.Kept() == 0 {
		t.Fatal("no body went back once its batch was released")
	}
	// Close frees what is kept: a body never given back would still be
	// outstanding in the checked allocator.
	bodies.Close()
}
