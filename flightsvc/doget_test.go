package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// capturedStream keeps a copy of every message sent, as gRPC's codec
// does before Send returns, and replays them to a reader.
type capturedStream struct {
	sent []*flight.FlightData
	next int
}

func (c *capturedStream) Send(fd *flight.FlightData) error {
	c.sent = append(c.sent, proto.Clone(fd).(*flight.FlightData))
	return nil
}

func (c *capturedStream) Recv() (*flight.FlightData, error) {
	if c.next == len(c.sent) {
		return nil, io.EOF
	}
	c.next++
	return c.sent[c.next-1], nil
}

var testBatchSchema = arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)

func testBatch(mem memory.Allocator, rows, seed int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testBatchSchema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(seed*1_000_000 + i))
		if i%7 == 3 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("v%d-%d", seed, i))
		}
	}
	return b.NewRecordBatch()
}

// TestWriteChunks: results written through pooled body buffers read back
// as they were, stream after stream (the second reuses the first's
// buffer, smaller batches after larger ones), and a chunk carrying an
// error ends the stream with it, every batch after it released.
func TestWriteChunks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for stream, sizes := range [][]int{{5000, 20000, 3}, {100, 0, 40000, 1}} {
		var want []arrow.RecordBatch
		cc := make(chan flight.StreamChunk, len(sizes))
		for i, n := range sizes {
			rec := testBatch(mem, n, stream*10+i)
			rec.Retain()
			want = append(want, rec)
			cc <- flight.StreamChunk{Data: rec}
		}
		close(cc)
		var out capturedStream
		if err := writeChunks(context.Background(), &out, newSchemaEncodings(mem).of(testBatchSchema), cc, mem); err != nil {
			t.Fatal(err)
		}
		rd, err := flight.NewRecordReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; rd.Next(); i++ {
			if i >= len(want) || !array.RecordEqual(rd.RecordBatch(), want[i]) {
				t.Fatalf("stream %d: batch %d read back differs from the one written", stream, i)
			}
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Release()
		for _, r := range want {
			r.Release()
		}
	}

	failed := errors.New("the query failed")
	cc := make(chan flight.StreamChunk, 4)
	cc <- flight.StreamChunk{Data: testBatch(mem, 10, 1)}
	cc <- flight.StreamChunk{Err: failed}
	cc <- flight.StreamChunk{Data: testBatch(mem, 10, 2)}
	cc <- flight.StreamChunk{Data: testBatch(mem, 10, 3)}
	close(cc)
	var out capturedStream
	if err := writeChunks(context.Background(), &out, newSchemaEncodings(mem).of(testBatchSchema), cc, mem); !errors.Is(err, failed) {
		t.Fatalf("writeChunks: %v, want the chunk's error", err)
	}
	if len(out.sent) != 2 {
		t.Fatalf("%d messages sent, want the schema and the batch before the error", len(out.sent))
	}
}

// TestSQLQueryTicket: only a well-formed statement or prepared-statement
// ticket is streamed by doGetSQL; garbage, a truncated Any, another Flight
// SQL command and an Any naming a query type over bytes that do not
// decode as it go to arrow-go's server, which refuses them.
func TestSQLQueryTicket(t *testing.T) {
	wrap := func(m proto.Message) []byte { return cmdBytes(t, m) }
	stmt := wrap(&flightpb.TicketStatementQuery{StatementHandle: []byte(`{"sql":"SELECT 1","id":"x"}`)})
	prep := wrap(&flightpb.CommandPreparedStatementQuery{PreparedStatementHandle: []byte("h")})
	for _, tc := range []struct {
		name string
		raw  []byte
		want proto.Message
	}{
		{"statement", stmt, &flightpb.TicketStatementQuery{}},
		{"prepared", prep, &flightpb.CommandPreparedStatementQuery{}},
		{"garbage", []byte("\xff\xfe not a proto"), nil},
		{"empty", nil, nil},
		{"truncated", stmt[:len(stmt)-3], nil},
		{"other command", wrap(&flightpb.CommandGetCatalogs{}), nil},
		{"query type, bad value", func() []byte {
			b, _ := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/arrow.flight.protocol.sql.TicketStatementQuery", Value: []byte{0x0a, 0x7f}})
			return b
		}(), nil},
	} {
		cmd, ok := sqlQueryTicket(tc.raw)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: taken as %T", tc.name, cmd)
		case tc.want != nil && (!ok || proto.MessageName(cmd) != proto.MessageName(tc.want)):
			t.Errorf("%s: %T, %v; want a %s", tc.name, cmd, ok, proto.MessageName(tc.want))
		}
	}
}
