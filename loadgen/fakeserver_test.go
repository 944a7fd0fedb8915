package loadgen

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

// fakeServer answers the calls loadgen makes as Apron does, keeping only
// row counts: plain DoPut with a PATH descriptor (a PutResult a batch),
// Flight SQL ingest, and Flight SQL queries (three rows each). Tables
// named "fail" fail their third batch with RESOURCE_EXHAUSTED, tables
// named "stall" never acknowledge (nor end the stream), and SQL naming "missing" is NOT_FOUND.
type fakeServer struct {
	flightsql.BaseServer
	mu struct {
		sync.Mutex
		rows    map[string]int64 // by db.table, rows acknowledged
		queries int64
	}
}

func (f *fakeServer) add(db, table string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.rows == nil {
		f.mu.rows = map[string]int64{}
	}
	f.mu.rows[db+"."+table] += n
}

func (f *fakeServer) rows(db, table string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.rows[db+"."+table]
}

func (f *fakeServer) queries() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.queries
}

// fakeService routes PATH DoPuts to fakeServer, the rest to the Flight
// SQL adapter.
type fakeService struct {
	flight.FlightServer
	f *fakeServer
}

type peekedPut struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
}

func (p *peekedPut) Recv() (*flight.FlightData, error) {
	if f := p.first; f != nil {
		p.first = nil
		return f, nil
	}
	return p.FlightService_DoPutServer.Recv()
}

func (s *fakeService) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ps := &peekedPut{FlightService_DoPutServer: stream, first: first}
	if d := first.GetFlightDescriptor(); d != nil && d.Type == flight.DescriptorPATH {
		return s.f.putPath(ps, d.Path)
	}
	return s.FlightServer.DoPut(ps)
}

func (f *fakeServer) putPath(stream flight.FlightService_DoPutServer, path []string) error {
	if len(path) != 2 {
		return status.Errorf(codes.InvalidArgument, "path %q", path)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "reading: %v", err)
	}
	defer rdr.Release()
	if !rdr.Schema().Equal(Schema) {
		return status.Errorf(codes.InvalidArgument, "schema %s", rdr.Schema())
	}
	var total, batches int64
	for rdr.Next() {
		batches++
		n := rdr.RecordBatch().NumRows()
		switch {
		case path[1] == "fail" && batches == 3:
			return status.Error(codes.ResourceExhausted, "the fake is full")
		case path[1] == "stall":
			continue
		}
		f.add(path[0], path[1], n)
		total += n
		md, _ := proto.Marshal(&apronpb.PutResultMetadata{RowsWritten: n, TotalRowsWritten: total, Sequence: uint64(batches)})
		if err := stream.Send(&flight.PutResult{AppMetadata: md}); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if path[1] == "stall" {
		<-stream.Context().Done()
	}
	return nil
}

func (f *fakeServer) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	f.add(cmd.GetSchema(), cmd.GetTable(), n)
	return n, rdr.Err()
}

var fakeResultSchema = arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)

func (f *fakeServer) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if strings.Contains(cmd.GetQuery(), "missing") {
		return nil, status.Error(codes.NotFound, "no table missing")
	}
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(cmd.GetQuery()))
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(fakeResultSchema, memory.DefaultAllocator),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		TotalRecords:     -1, TotalBytes: -1,
	}, nil
}

func (f *fakeServer) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	f.mu.Lock()
	f.mu.queries++
	f.mu.Unlock()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	defer col.Release()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: array.NewRecordBatch(fakeResultSchema, []arrow.Array{col}, 3)}
	close(ch)
	return fakeResultSchema, ch, nil
}

// startFake starts a fake server on localhost and returns it with a
// Dialer of its clients.
func startFake(t *testing.T) (*fakeServer, Dialer) {
	t.Helper()
	f := &fakeServer{}
	srv := flight.NewServerWithMiddleware(nil)
	srv.RegisterFlightService(&fakeService{FlightServer: flightsql.NewFlightServer(f), f: f})
	if err := srv.Init("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(srv.Shutdown)
	addr := srv.Addr().String()
	return f, func(ctx context.Context) (*flightsql.Client, error) {
		return flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
}
