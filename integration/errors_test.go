package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

var nullableTimeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: tsNs, Nullable: true},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// TestNullTimeRejected sends rows with a null time.
func TestNullTimeRejected(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	checkRejected(t, srv, []badInput{
		{name: "existing table", db: "db", table: "t", schema: nullableTimeSchema, json: `[{"time":5,"id":100},{"time":null,"id":101}]`,
			code: codes.InvalidArgument, parts: []string{"null", "time"}},
		{name: "new table", db: "db", table: "new", schema: nullableTimeSchema, json: `[{"time":null,"id":100}]`,
			code: codes.InvalidArgument, parts: []string{"null", "time"}},
		{name: "new database", db: "newdb", table: "t", schema: nullableTimeSchema, json: `[{"time":null,"id":100}]`,
			code: codes.InvalidArgument, parts: []string{"null"}},
	})
}

// partialBatches are three batches of one stream whose third has a null
// time: 7 + 5 rows are good.
func partialBatches(t testing.TB, mem memory.Allocator) []arrow.RecordBatch {
	mk := func(from, n int, nullAt int) arrow.RecordBatch {
		var rows []string
		for i := from; i < from+n; i++ {
			if i == nullAt {
				rows = append(rows, fmt.Sprintf(`{"time":null,"id":%d}`, i))
			} else {
				rows = append(rows, fmt.Sprintf(`{"time":%d,"id":%d}`, baseTime+int64(i), i))
			}
		}
		return jsonRecord(t, mem, nullableTimeSchema, "["+strings.Join(rows, ",")+"]")
	}
	return []arrow.RecordBatch{mk(0, 7, -1), mk(7, 5, -1), mk(12, 4, 14)}
}

// TestPartialStreamFlightSQL: in an ingest stream whose third batch is bad,
// the first two stay, the count says so and the error message too.
func TestPartialStreamFlightSQL(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := sqlClient(t, srv.Addr, mem)
	recs := partialBatches(t, mem)
	defer release(recs...)
	n, err := sqlIngest(testCtx(t), c, "part", "t", recs...)
	wantCode(t, err, codes.InvalidArgument, "12 rows", "null")
	if n != 12 {
		t.Errorf("ExecuteIngest reported %d rows, want 12 (the first two batches)", n)
	}
	want := "part.t (time:timestamp[ns], id:int64) rows=12"
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog:\n%s\nwant:\n%s", got, want)
	}
	wantIDRange(t, readTable(t, srv.Addr, "part", "t"), 0, 12)
	srv = srv.Restart(t)
	if got := catalogState(t, srv.Addr); got != want {
		t.Errorf("catalog after restart:\n%s\nwant:\n%s", got, want)
	}
	wantIDRange(t, readTable(t, srv.Addr, "part", "t"), 0, 12)
}

// TestPartialStreamADBC is the same through ADBC: ExecuteUpdate fails and
// its message says how many rows were written.
func TestPartialStreamADBC(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	cn := adbcConn(t, srv.Addr, mem)
	recs := partialBatches(t, mem)
	defer release(recs...)
	_, err := adbcIngest(testCtx(t), cn, "part", "t", adbc.OptionValueIngestModeCreate, recs...)
	wantADBC(t, err, adbc.StatusInvalidArgument, "12 rows", "null")
	wantIDRange(t, readTable(t, srv.Addr, "part", "t"), 0, 12)
}

// TestPartialStreamDoPut is the same with plain Flight DoPut: two PutResults
// then the error.
func TestPartialStreamDoPut(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	c := flightClient(t, srv.Addr)
	recs := partialBatches(t, mem)
	defer release(recs...)
	res, err := flightPut(testCtx(t), c, []string{"part", "t"}, mem, recs...)
	wantCode(t, err, codes.InvalidArgument, "12 rows", "null")
	if len(res) != 2 || res[1].TotalRowsWritten != 12 {
		t.Errorf("got PutResults %v, want two, the last with total_rows_written 12", res)
	}
	wantIDRange(t, readTable(t, srv.Addr, "part", "t"), 0, 12)
	srv = srv.Restart(t)
	wantIDRange(t, readTable(t, srv.Addr, "part", "t"), 0, 12)
}

// TestBadRequests sends malformed Flight requests; the server answers each
// with an error and keeps serving.
func TestBadRequests(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	c := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	rec := idRecord(mem, 0, 1)
	defer rec.Release()
	before := catalogState(t, srv.Addr)

	t.Run("DoPut path of one element", func(t *testing.T) {
		_, err := flightPut(ctx, c, []string{"db"}, mem, rec)
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("DoPut path of three elements", func(t *testing.T) {
		_, err := flightPut(ctx, c, []string{"db", "t", "x"}, mem, rec)
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("DoPut without descriptor", func(t *testing.T) {
		stream, err := c.DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&flight.FlightData{DataHeader: []byte("junk")}); err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		_, err = stream.Recv()
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("GetFlightInfo of a missing table", func(t *testing.T) {
		_, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db", "nosuchtable"}})
		wantCode(t, err, codes.NotFound, "nosuchtable")
		_, err = c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"nosuchdb", "t"}})
		wantCode(t, err, codes.NotFound, "nosuchdb")
	})
	t.Run("GetFlightInfo path of one element", func(t *testing.T) {
		_, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"db"}})
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("DoGet well-formed tickets of missing things", func(t *testing.T) {
		for _, bt := range []*apronpb.BufferTicket{
			{Database: "db", Table: "t", SegmentId: 99},
			{Database: "db", Table: "nosuchtable", SegmentId: 1},
			{Database: "nosuchdb", Table: "t", SegmentId: 1},
		} {
			b, err := proto.Marshal(&apronpb.Ticket{Kind: &apronpb.Ticket_Buffer{Buffer: bt}})
			if err != nil {
				t.Fatal(err)
			}
			stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: append([]byte("apron:"), b...)})
			if err == nil {
				_, err = stream.Recv()
			}
			wantCode(t, err, codes.NotFound)
		}
	})
	t.Run("DoGet garbage tickets", func(t *testing.T) {
		for _, tkt := range [][]byte{
			[]byte("garbage"),
			[]byte("apron:\xff\xff\xff\xff"),
			[]byte("apron:"),
			{},
		} {
			stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: tkt})
			if err == nil {
				_, err = stream.Recv()
			}
			if code, _ := grpcCode(err); code == codes.OK || code == codes.Unavailable || code == codes.Internal && strings.Contains(err.Error(), "panic") {
				t.Errorf("DoGet %q: got %v, want an error answer", tkt, err)
			}
		}
	})
	// The server still answers.
	if srv.exited() {
		t.Fatalf("server exited after bad requests: %v", srv.waitErr)
	}
	checkHealth(t, srv.Addr)
	if after := catalogState(t, srv.Addr); after != before {
		t.Errorf("bad requests changed the catalog:\n%s\nwant:\n%s", after, before)
	}
}

// checkHealth asks the standard health service about "" and the Flight
// service.
func checkHealth(t testing.TB, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpcOpts()...)
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	for _, svc := range []string{"", "arrow.flight.protocol.FlightService"} {
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Errorf("health check %q: %v", svc, err)
			continue
		}
		if res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health check %q: %v, want SERVING", svc, res.Status)
		}
	}
}

// malformedBatch is a batch of rows rows (time, two tags, one binary
// column) whose column bad is replaced by arr: arrays that arrow-go's IPC
// reader accepts (it checks only the last offset) but whose content a
// reader must not trust.
func malformedBatch(t *testing.T, rows int, bad string, arr arrow.Array) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: tsNs},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "region", Type: arrow.BinaryTypes.String},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
	}, nil)
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + int64(i)))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host-%d", i%100))
		b.Field(2).(*array.StringBuilder).Append("eu")
		b.Field(3).(*array.BinaryBuilder).Append([]byte{byte(i)})
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	cols := rec.Columns()
	fields := schema.Fields()
	i := schema.FieldIndices(bad)[0]
	cols = append([]arrow.Array(nil), cols...)
	cols[i] = arr
	fields[i].Type = arr.DataType()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(rows))
}

// badOffsets is a variable-length array of n rows whose offsets go back
// after row n/2 (the last offset is in range, so arrow-go accepts it).
func badOffsets(typ arrow.DataType, n int) arrow.Array {
	offsets := make([]int32, n+1)
	for i := range offsets {
		offsets[i] = int32(min(i, n/2+1))
	}
	offsets[n/2] = int32(n) // past the data of n/2+1 bytes, then back
	data := array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(make([]byte, n/2+1))}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// TestMalformedArrays: arrays whose offsets or dictionary indexes point
// outside their data are refused with InvalidArgument, change nothing and
// do not take the server down (large batches of several string columns
// are encoded on several goroutines, where a panic would be fatal).
func TestMalformedArrays(t *testing.T) {
	srv := startServer(t, t.TempDir())
	seed(t, srv)
	before := catalogState(t, srv.Addr)
	dictIdx := func(n int) arrow.Array {
		values := array.NewStringBuilder(memory.DefaultAllocator)
		defer values.Release()
		values.AppendValues([]string{"a", "b"}, nil)
		v := values.NewArray()
		defer v.Release()
		idx := make([]int32, n)
		idx[n-1] = 7
		ia := array.NewData(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(idx))}, nil, 0, 0)
		defer ia.Release()
		ix := array.MakeFromData(ia)
		defer ix.Release()
		return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, ix, v)
	}
	for _, tc := range []struct {
		name  string
		rows  int
		col   string
		arr   func(n int) arrow.Array
		parts []string
	}{
		{"string offsets, small batch", 100, "host", func(n int) arrow.Array { return badOffsets(arrow.BinaryTypes.String, n) }, []string{`column "host"`, "offsets go backwards"}},
		{"string offsets, large batch", 70000, "region", func(n int) arrow.Array { return badOffsets(arrow.BinaryTypes.String, n) }, []string{`column "region"`, "offsets go backwards"}},
		{"binary offsets", 100, "blob", func(n int) arrow.Array { return badOffsets(arrow.BinaryTypes.Binary, n) }, []string{`column "blob"`, "offsets go backwards"}},
		{"dictionary index", 70000, "host", dictIdx, []string{`column "host"`, "dictionary index 7 outside"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arr := tc.arr(tc.rows)
			defer arr.Release()
			rec := malformedBatch(t, tc.rows, tc.col, arr)
			defer rec.Release()
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			_, err := flightPut(testCtx(t), flightClient(t, srv.Addr), []string{"db", "bad"}, mem, rec)
			wantCode(t, err, codes.InvalidArgument, tc.parts...)
			c := sqlClient(t, srv.Addr, mem)
			_, err = sqlIngest(testCtx(t), c, "db", "bad", rec)
			wantCode(t, err, codes.InvalidArgument, tc.parts...)
			checkHealth(t, srv.Addr)
			if got := catalogState(t, srv.Addr); got != before {
				t.Errorf("catalog changed:\n%s\nwant:\n%s", got, before)
			}
		})
	}
}

// TestRejectedIngestStream: a bulk ingest refused at its first batch while
// the client still has many to send gets its error from the result, as
// ADBC reads it, not as a broken stream on a send (the server reads the
// rest of the stream before it answers; without that, arrow-go's client
// middleware under ADBC reads the call's trailer on the failed send while
// gRPC writes it, which the race detector reports).
func TestRejectedIngestStream(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startServer(t, t.TempDir())
	cn := adbcConn(t, srv.Addr, mem)
	var recs []arrow.RecordBatch
	for i := range 100 {
		recs = append(recs, idRecord(mem, int64(i)*2000, 2000))
	}
	defer release(recs...)
	for range 3 {
		_, err := adbcIngest(testCtx(t), cn, "", "t", adbc.OptionValueIngestModeCreateAppend, recs...)
		wantADBC(t, err, adbc.StatusInvalidArgument, "database")
	}
	checkHealth(t, srv.Addr)
}
