package loadgen

import (
	"context"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
)

// Dialer makes the client of one worker. Every writer and querier has its
// own, as separate clients of a server would; Run closes them.
type Dialer func(ctx context.Context) (*flightsql.Client, error)

// countingClient is a Flight client whose DoPut streams count the Arrow
// IPC bytes they send, for both plain DoPut and Flight SQL ingest (whose
// client calls DoPut of the Flight client it wraps).
type countingClient struct {
	flight.Client
	sent atomic.Int64
}

// wrapCounting is cl with DoPut counting into the returned client's sent,
// reading with mem.
func wrapCounting(cl *flightsql.Client, mem memory.Allocator) (*flightsql.Client, *countingClient) {
	cc := &countingClient{Client: cl.Client}
	return &flightsql.Client{Client: cc, Alloc: mem}, cc
}

func (c *countingClient) DoPut(ctx context.Context, opts ...grpc.CallOption) (flight.FlightService_DoPutClient, error) {
	st, err := c.Client.DoPut(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &countingPut{FlightService_DoPutClient: st, sent: &c.sent}, nil
}

type countingPut struct {
	flight.FlightService_DoPutClient
	sent *atomic.Int64
}

func (p *countingPut) Send(fd *flight.FlightData) error {
	p.sent.Add(int64(len(fd.DataHeader) + len(fd.DataBody) + len(fd.AppMetadata)))
	return p.FlightService_DoPutClient.Send(fd)
}
