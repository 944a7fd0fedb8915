package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// clientMaxMessage is the largest gRPC message the client commands
// take or send: the server's results come in batches of ~2 MiB, and
// apron write sends batches of up to --batch-rows.
const clientMaxMessage = 64 << 20

// sqlConnect makes a Flight SQL client of the flags and returns it with
// the context its calls take (the token, the current database, bounded
// by --timeout). Call cancel, then Close the client, when done.
func (c *connFlags) sqlConnect(ctx context.Context, stderr io.Writer) (*flightsql.Client, context.Context, context.CancelFunc, error) {
	addr, opts, err := c.dialOptions(stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(clientMaxMessage), grpc.MaxCallSendMsgSize(clientMaxMessage)))
	cl, err := flightsql.NewClient(addr, nil, nil, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connecting to %s: %w", c.host, c.redact(err))
	}
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	return cl, c.callContext(ctx), cancel, nil
}

// callContext is ctx with the token and the current database headers.
func (c *connFlags) callContext(ctx context.Context) context.Context {
	ctx = c.outgoing(ctx)
	if c.db != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "database", c.db)
	}
	return ctx
}

// result is a query's answer as it streams: the schema, then the
// batches of every endpoint in order.
type result struct {
	cl     *flightsql.Client
	prep   *flightsql.PreparedStatement
	info   *flight.FlightInfo
	mem    memory.Allocator
	schema *arrow.Schema
}

// runSQL runs sql: an update (INSERT, and whatever the server hints as
// one) returns its row count and a nil result; a query returns the
// result to read with each, then close. The server decides which it
// is, from its parse of the statement (the prepared statement's
// is_update hint).
func runSQL(ctx context.Context, cl *flightsql.Client, sql string, mem memory.Allocator) (*result, int64, error) {
	prep, err := cl.Prepare(ctx, sql)
	if err != nil {
		return nil, 0, err
	}
	if upd, ok := prep.IsUpdate(); ok && upd {
		n, err := prep.ExecuteUpdate(ctx)
		prep.Close(context.WithoutCancel(ctx))
		return nil, n, err
	}
	info, err := prep.Execute(ctx)
	if err != nil {
		prep.Close(context.WithoutCancel(ctx))
		return nil, 0, err
	}
	schema := prep.DatasetSchema()
	if len(info.Schema) > 0 {
		if s, err := flight.DeserializeSchema(info.Schema, mem); err == nil {
			schema = s
		}
	}
	return &result{cl: cl, prep: prep, info: info, mem: mem, schema: schema}, 0, nil
}

// close frees the statement on the server (its tickets stop working).
func (r *result) close(ctx context.Context) {
	r.prep.Close(context.WithoutCancel(ctx))
}

// each calls fn with every batch of the result, endpoint after
// endpoint. fn must not keep a batch past its call without retaining it.
func (r *result) each(ctx context.Context, fn func(arrow.RecordBatch) error) error {
	for _, ep := range r.info.Endpoint {
		rdr, err := r.cl.DoGet(ctx, ep.Ticket)
		if err != nil {
			return err
		}
		for rdr.Next() {
			if err := fn(rdr.RecordBatch()); err != nil {
				rdr.Release()
				return err
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
