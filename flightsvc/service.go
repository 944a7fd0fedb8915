package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// Service is the gRPC Flight service: plain Flight for PATH descriptors and
// Apron tickets, Flight SQL for the rest.
type Service struct {
	flight.BaseFlightServer
	sql     *SQLServer
	adapter flight.FlightServer
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
	return s.adapter.DoPut(ps)
}

func (s *Service) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if d.GetType() == flight.DescriptorPATH {
		info, err := s.pathInfo(d)
		return info, statusOf(err)
	}
	if r, ours, err := decodeTableRange(d); ours {
		if err != nil {
			return nil, statusOf(err)
		}
		info, err := s.rangeInfo(d, r)
		return info, statusOf(err)
	}
	return s.adapter.GetFlightInfo(ctx, d)
}

func (s *Service) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if d.GetType() == flight.DescriptorPATH {
		info, err := s.pathInfo(d)
		if err != nil {
			return nil, statusOf(err)
		}
		return &flight.SchemaResult{Schema: info.Schema}, nil
	}
	return s.adapter.GetSchema(ctx, d)
}

func (s *Service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	t, ours, err := decodeTicket(tkt.GetTicket())
	if err != nil {
		return statusOf(err)
	}
	if !ours {
		return s.adapter.DoGet(tkt, stream)
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
	return s.adapter.DoAction(a, stream)
}

func (s *Service) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	return s.adapter.ListActions(e, stream)
}

func (s *Service) DoExchange(stream flight.FlightService_DoExchangeServer) error {
	return s.adapter.DoExchange(stream)
}
