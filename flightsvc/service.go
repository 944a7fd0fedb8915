package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/apron-db/apron/auth"
)

// Service is the gRPC Flight service: plain Flight for PATH descriptors and
// Apron tickets, Flight SQL for the rest.
type Service struct {
	flight.BaseFlightServer
	sql     *SQLServer
	adapter flight.FlightServer
	// bodies is where bodyCodec puts the FlightData bodies it decodes, nil
	// when the gRPC server runs without it (see NewGRPCServer). Ingest
	// streams are then read with putReader, which gives bodies back.
	bodies memory.Allocator
}

// NewService wraps a Flight SQL server.
func NewService(sql *SQLServer) *Service {
	return &Service{sql: sql, adapter: flightsql.NewFlightServerWithAllocator(sql, sql.mem)}
}

// peekedPutStream gives back the first message, already read, before the
// rest of the stream.
type peekedPutStream struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
}

func (p *peekedPutStream) Recv() (*flight.FlightData, error) {
	if f := p.first; f != nil {
		p.first = nil
		return f, nil
	}
	return p.FlightService_DoPutServer.Recv()
}

func (s *Service) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return statusOf(fmt.Errorf("%w: empty DoPut stream: the first message must carry a descriptor and the schema", errInvalidRequest))
	}
	if err != nil {
		return err
	}
	d := first.GetFlightDescriptor()
	if d == nil {
		return statusOf(fmt.Errorf("%w: the first DoPut message has no flight descriptor", errInvalidRequest))
	}
	ps := &peekedPutStream{FlightService_DoPutServer: stream, first: first}
	if d.Type == flight.DescriptorPATH {
		return s.putPath(ps, d)
	}
	if cmd := ingestCommand(d); cmd != nil {
		return s.putIngest(ps, cmd)
	}
	return s.adapter.DoPut(ps)
}

// ingestCommand returns the CommandStatementIngest a CMD descriptor
// carries, or nil.
func ingestCommand(d *flight.FlightDescriptor) *flightpb.CommandStatementIngest {
	var a anypb.Any
	if d.Type != flight.DescriptorCMD || proto.Unmarshal(d.Cmd, &a) != nil {
		return nil
	}
	var cmd flightpb.CommandStatementIngest
	if !a.MessageIs(&cmd) || a.UnmarshalTo(&cmd) != nil {
		return nil
	}
	return &cmd
}

// putIngest serves a Flight SQL bulk ingest as arrow-go's Flight SQL
// adapter does (the record count first, then any error: rows before a
// failure may be written), reading the stream with putReader.
func (s *Service) putIngest(stream flight.FlightService_DoPutServer, cmd *flightpb.CommandStatementIngest) error {
	rdr, err := newPutReader(stream, s.bodies, ipc.WithAllocator(s.sql.mem), ipc.WithDelayReadSchema(true))
	if err != nil {
		return statusOf(fmt.Errorf("%w: reading the stream: %w", errInvalidRequest, err))
	}
	defer rdr.Release()
	n, rpcErr := s.sql.DoPutCommandStatementIngest(stream.Context(), cmd, rdr)
	if rpcErr != nil {
		s.drainPut(stream)
	}
	md, err := proto.Marshal(&flightpb.DoPutUpdateResult{RecordCount: n})
	if err != nil {
		return statusOf(fmt.Errorf("encoding the put result: %w", err))
	}
	if err := stream.Send(&flight.PutResult{AppMetadata: md}); err != nil {
		return err
	}
	return rpcErr
}

func (s *Service) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if d.GetType() == flight.DescriptorPATH {
		info, err := s.pathInfo(ctx, d)
		return info, statusOf(err)
	}
	if r, ours, err := decodeTableRange(d); ours {
		if err != nil {
			return nil, statusOf(err)
		}
		info, err := s.rangeInfo(ctx, d, r)
		return info, statusOf(err)
	}
	return s.adapter.GetFlightInfo(ctx, d)
}

func (s *Service) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if d.GetType() == flight.DescriptorPATH {
		info, err := s.pathInfo(ctx, d)
		if err != nil {
			return nil, statusOf(err)
		}
		return &flight.SchemaResult{Schema: info.Schema}, nil
	}
	return s.adapter.GetSchema(ctx, d)
}

func (s *Service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if isQueryTicket(tkt.GetTicket()) {
		return s.doGetQuery(tkt.GetTicket(), stream)
	}
	t, ours, err := decodeTicket(tkt.GetTicket())
	if err != nil {
		return statusOf(err)
	}
	if !ours {
		if cmd, ok := sqlQueryTicket(tkt.GetTicket()); ok {
			return s.doGetSQL(cmd, stream)
		}
		return s.adapter.DoGet(tkt, stream)
	}
	if t.GetTokenId() != auth.FromContext(stream.Context()).ID() {
		return statusOf(errNotOwner("ticket"))
	}
	if b := t.GetBuffer(); b != nil {
		return statusOf(s.doGetBuffer(stream.Context(), b, stream))
	}
	if p := t.GetParquet(); p != nil {
		return statusOf(s.doGetParquet(stream.Context(), p, stream))
	}
	return statusOf(fmt.Errorf("%w: ticket of an unknown kind", errInvalidRequest))
}

func (s *Service) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	return statusOf(s.listFlights(stream))
}

func (s *Service) PollFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.PollInfo, error) {
	return s.adapter.PollFlightInfo(ctx, d)
}

func (s *Service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	send := func(body []byte) error { return stream.Send(&flight.Result{Body: body}) }
	if ours, err := s.sql.apronAction(stream.Context(), a, send); ours {
		return statusOf(err)
	}
	if a.GetType() == flightsql.CreatePreparedStatementActionType {
		return statusOf(s.sql.createPreparedAction(stream.Context(), a.GetBody(), send))
	}
	if !slices.Contains(flightSQLActions, a.GetType()) {
		// arrow-go's adapter answers only "the defined request is invalid".
		known := slices.Clone(flightSQLActions)
		for _, t := range apronActions {
			known = append(known, t.Type)
		}
		return statusOf(fmt.Errorf("%w: unknown action %q; this server's actions are %s (ListActions describes them)", errInvalidRequest, a.GetType(), strings.Join(known, ", ")))
	}
	return s.adapter.DoAction(a, stream)
}

// flightSQLActions are the action types arrow-go's Flight SQL adapter
// serves (for the ones it answers Unimplemented, the server says so).
var flightSQLActions = []string{
	flight.CancelFlightInfoActionType, flight.RenewFlightEndpointActionType,
	flight.SetSessionOptionsActionType, flight.GetSessionOptionsActionType, flight.CloseSessionActionType,
	flightsql.CreatePreparedStatementActionType, flightsql.ClosePreparedStatementActionType,
	flightsql.BeginSavepointActionType, flightsql.BeginTransactionActionType, flightsql.CancelQueryActionType,
	flightsql.CreatePreparedSubstraitPlanActionType, flightsql.EndSavepointActionType, flightsql.EndTransactionActionType,
}

func (s *Service) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range apronActions {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return s.adapter.ListActions(e, stream)
}

func (s *Service) DoExchange(stream flight.FlightService_DoExchangeServer) error {
	return s.adapter.DoExchange(stream)
}

// putReceiver is what drainPut reads from: a DoPut stream.
type putReceiver interface {
	Recv() (*flight.FlightData, error)
}

// Limits of drainPut.
const (
	drainMaxBytes = 64 << 20
	drainTimeout  = 5 * time.Second
)

// drainPut reads and drops what the client still sends of a bulk ingest
// that failed, until it closes its side (or drainMaxBytes or drainTimeout
// pass), before the error is returned. A Flight SQL client sends its whole
// stream before it reads the result: answering at once would fail its
// next send with a bare EOF instead of the error, and arrow-go's client
// middleware (which ADBC uses) reads the call's trailer on that path
// while gRPC is still writing it (a data race). Plain Flight DoPuts are
// not drained: their clients may wait for each batch's PutResult.
func (s *Service) drainPut(stream putReceiver) {
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		var n int
		for n < drainMaxBytes {
			select {
			case <-stop:
				return
			default:
			}
			fd, err := stream.Recv()
			if err != nil {
				return
			}
			n += len(fd.DataHeader) + len(fd.DataBody)
			if s.bodies != nil && fd.DataBody != nil {
				s.bodies.Free(fd.DataBody)
			}
		}
	}()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// Returning ends the call, which ends a Recv still waiting.
		close(stop)
	}
}
