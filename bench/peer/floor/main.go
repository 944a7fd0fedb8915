// Command floor is a Flight SQL server that answers every statement, plain
// or prepared, and every JSON query ticket (Apron's and InfluxDB 3's
// {"database": …, "sql_query": …}), with one constant row and does
// nothing else: what a client's call costs with no server work behind it.
// bench/peer/floor.py measures a client against it and against Apron,
// side by side.
//
//	go run ./bench/peer/floor -addr 127.0.0.1:8093
package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"net"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
)

var schema = arrow.NewSchema([]arrow.Field{{Name: "count_star()", Type: arrow.PrimitiveTypes.Int64}}, nil)

type server struct{ flightsql.BaseServer }

// info is one endpoint whose ticket is the descriptor's command.
func info(d *flight.FlightDescriptor, ticket []byte) *flight.FlightInfo {
	return &flight.FlightInfo{Schema: flight.SerializeSchema(schema, memory.DefaultAllocator), FlightDescriptor: d,
		Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticket}}}, TotalRecords: 1, TotalBytes: -1}
}

// oneRow streams the constant row.
func oneRow() (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(5_000_000)
	col := b.NewArray()
	defer col.Release()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: array.NewRecordBatch(schema, []arrow.Array{col}, 1)}
	close(ch)
	return schema, ch, nil
}

func (s *server) GetFlightInfoStatement(_ context.Context, _ flightsql.StatementQuery, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	t, err := flightsql.CreateStatementQueryTicket([]byte("q"))
	if err != nil {
		return nil, err
	}
	return info(d, t), nil
}

func (s *server) DoGetStatement(context.Context, flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return oneRow()
}

func (s *server) CreatePreparedStatement(context.Context, flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	return flightsql.ActionCreatePreparedStatementResult{Handle: []byte("h"), DatasetSchema: schema}, nil
}

func (s *server) ClosePreparedStatement(context.Context, flightsql.ActionClosePreparedStatementRequest) error {
	return nil
}

func (s *server) GetFlightInfoPreparedStatement(_ context.Context, _ flightsql.PreparedStatementQuery, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return info(d, d.Cmd), nil
}

func (s *server) DoGetPreparedStatement(context.Context, flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return oneRow()
}

// ticketServer answers a JSON query ticket itself, in one DoGet as Apron
// does, and hands every other call to the Flight SQL server.
type ticketServer struct{ flight.FlightServer }

func (t ticketServer) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if !bytes.HasPrefix(bytes.TrimSpace(tkt.GetTicket()), []byte("{")) {
		return t.FlightServer.DoGet(tkt, stream)
	}
	_, ch, _ := oneRow()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	defer w.Close()
	for c := range ch {
		err := w.Write(c.Data)
		c.Data.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8093", "address to listen on")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	gs := grpc.NewServer()
	flight.RegisterFlightServiceServer(gs, ticketServer{flightsql.NewFlightServer(&server{})})
	log.Printf("floor: Flight SQL at %s", l.Addr())
	log.Fatal(gs.Serve(l))
}
