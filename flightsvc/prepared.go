package flightsvc

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/query"
)

// readParams reads every batch of a parameter stream into one batch
// (nil if the stream has no columns or no rows).
func readParams(mem memory.Allocator, rdr flight.MessageReader) (arrow.RecordBatch, error) {
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading the parameters: %w", errInvalidRequest, err)
	}
	sc := rdr.Schema()
	if sc == nil || sc.NumFields() == 0 || len(recs) == 0 {
		return nil, nil
	}
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("%w: concatenating parameter batches: %w", errInvalidRequest, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sc, cols, rows), nil
}

// paramsFor returns params if st takes parameters, else nil: a statement
// without parameters runs once, whatever was bound.
func paramsFor(st *query.Statement, params arrow.RecordBatch) arrow.RecordBatch {
	if st.Params == nil || st.Params.NumFields() == 0 {
		return nil
	}
	return params
}

// CreatePreparedStatement checks a statement and answers its result and
// parameter schemas; JDBC and ADBC Python prepare every statement.
func (s *SQLServer) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var res flightsql.ActionCreatePreparedStatementResult
	if len(req.GetTransactionId()) > 0 {
		return res, statusOf(errNoTransactions)
	}
	st, err := s.prepare(ctx, req.GetQuery())
	if err != nil {
		return res, statusOf(err)
	}
	handle, err := s.prepared.add(s.clientKey(ctx), hostKey(ctx), auth.FromContext(ctx).ID(), st)
	if err != nil {
		return res, statusOf(err)
	}
	isUpdate := st.IsUpdate()
	res.Handle = []byte(handle)
	res.DatasetSchema = st.Schema
	res.ParameterSchema = st.Params
	res.IsUpdate = &isUpdate
	return res, nil
}

// createPreparedAction answers the CreatePreparedStatement action as
// arrow-go's Flight SQL server does, with the schemas' kept encodings
// (schemacache.go) instead of encoding them anew: ADBC's DB-API prepares
// every new text, a dashboard's query with new time bounds among them.
func (s *SQLServer) createPreparedAction(ctx context.Context, body []byte, send func([]byte) error) error {
	var (
		cmd anypb.Any
		req flightpb.ActionCreatePreparedStatementRequest
		res flightpb.ActionCreatePreparedStatementResult
	)
	if err := proto.Unmarshal(body, &cmd); err != nil {
		return fmt.Errorf("%w: the CreatePreparedStatement action's body is not a google.protobuf.Any: %w", errInvalidRequest, err)
	}
	if err := cmd.UnmarshalTo(&req); err != nil {
		return fmt.Errorf("%w: the CreatePreparedStatement action's body is not an ActionCreatePreparedStatementRequest: %w", errInvalidRequest, err)
	}
	out, err := s.CreatePreparedStatement(ctx, &req)
	if err != nil {
		return err
	}
	res.PreparedStatementHandle = out.Handle
	if out.DatasetSchema != nil {
		res.DatasetSchema = s.schemas.serialized(out.DatasetSchema)
	}
	if out.ParameterSchema != nil {
		res.ParameterSchema = s.schemas.serialized(out.ParameterSchema)
	}
	res.IsUpdate = out.IsUpdate
	if err := cmd.MarshalFrom(&res); err != nil {
		return fmt.Errorf("flightsvc: encoding the prepared statement: %w", err)
	}
	reply, err := proto.Marshal(&cmd)
	if err != nil {
		return fmt.Errorf("flightsvc: encoding the prepared statement: %w", err)
	}
	return send(reply)
}

func (s *SQLServer) ClosePreparedStatement(ctx context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	return statusOf(s.prepared.close(req.GetPreparedStatementHandle(), auth.FromContext(ctx).ID()))
}

// DoPutPreparedStatementQuery binds parameters: the batches of the stream,
// one execution per row, kept until the next bind or the close.
func (s *SQLServer) DoPutPreparedStatementQuery(ctx context.Context, cmd flightsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	handle := cmd.GetPreparedStatementHandle()
	params, err := readParams(s.mem, rdr)
	if err != nil {
		return nil, statusOf(err)
	}
	if params != nil {
		callFrom(ctx).received(params.NumRows())
	}
	if err := s.prepared.bind(handle, auth.FromContext(ctx).ID(), params); err != nil {
		return nil, statusOf(err)
	}
	return handle, nil
}

// GetFlightInfoPreparedStatement answers the schema of the result with
// the bound parameters (a result DuckDB types only once they are bound
// has it then: query.Engine.BoundSchema) and one endpoint.
func (s *SQLServer) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	st, params, err := s.prepared.get(cmd.GetPreparedStatementHandle(), auth.FromContext(ctx).ID())
	if err != nil {
		return nil, statusOf(err)
	}
	if params != nil {
		defer params.Release()
	}
	if st.Kind != query.KindQuery {
		return nil, statusOf(errInsertAsQuery)
	}
	if n := st.Params.NumFields(); n > 0 && params == nil {
		return nil, statusOf(fmt.Errorf("%w: the statement has %d parameters and none are bound: bind them first (ADBC Bind, JDBC setXxx, Flight SQL DoPut of CommandPreparedStatementQuery)",
			errInvalidRequest, n))
	}
	schema, err := s.eng.BoundSchema(ctx, st, paramsFor(st, params))
	if err != nil {
		return nil, statusOf(err)
	}
	return s.infoForCommand(desc, schema), nil
}

func (s *SQLServer) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	st, params, err := s.prepared.get(cmd.GetPreparedStatementHandle(), auth.FromContext(ctx).ID())
	if err != nil {
		return nil, statusOf(err)
	}
	if params != nil {
		defer params.Release()
	}
	schema, err := s.eng.BoundSchema(ctx, st, paramsFor(st, params))
	if err != nil {
		return nil, statusOf(err)
	}
	return &flight.SchemaResult{Schema: s.schemas.serialized(schema)}, nil
}

// DoGetPreparedStatement runs a prepared query with its bound parameters.
func (s *SQLServer) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	handle := cmd.GetPreparedStatementHandle()
	st, params, err := s.prepared.get(handle, auth.FromContext(ctx).ID())
	if err != nil {
		return nil, nil, statusOf(err)
	}
	callFrom(ctx).setSQL(st.SQL, st.Database)
	if params != nil {
		defer params.Release()
	}
	if st.Kind != query.KindQuery {
		return nil, nil, statusOf(errInsertAsQuery)
	}
	qctx, done, err := s.running.start(ctx, preparedKey(handle))
	if err != nil {
		return nil, nil, statusOf(err)
	}
	rdr, err := s.eng.Run(qctx, st, paramsFor(st, params))
	if err != nil {
		done()
		return nil, nil, statusOf(err)
	}
	return rdr.Schema(), s.stream(ctx, rdr, done), nil
}

// DoPutPreparedStatementUpdate runs a prepared INSERT, once per row of the
// parameters sent with it (or bound before), and answers the rows written.
func (s *SQLServer) DoPutPreparedStatementUpdate(ctx context.Context, cmd flightsql.PreparedStatementUpdate, rdr flight.MessageReader) (int64, error) {
	st, bound, err := s.prepared.get(cmd.GetPreparedStatementHandle(), auth.FromContext(ctx).ID())
	if err != nil {
		return 0, statusOf(err)
	}
	callFrom(ctx).setSQL(st.SQL, st.Database)
	if bound != nil {
		defer bound.Release()
	}
	params, err := readParams(s.mem, rdr)
	if err != nil {
		return 0, statusOf(err)
	}
	if params != nil {
		callFrom(ctx).received(params.NumRows())
		defer params.Release()
	} else {
		params = bound
	}
	if !st.IsUpdate() {
		return 0, statusOf(errQueryAsUpdate)
	}
	n, err := s.eng.Exec(ctx, st, paramsFor(st, params))
	return n, statusOf(err)
}
