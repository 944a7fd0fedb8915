package flightsvc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/query"
)

// statementTicket is the statement handle inside a Flight SQL
// TicketStatementQuery: the SQL and the database it resolves names in,
// fixed when GetFlightInfo was answered, and an id that CancelFlightInfo
// names the query by.
type statementTicket struct {
	SQL      string `json:"sql"`
	Database string `json:"database,omitempty"`
	ID       string `json:"id"`
	// Token is the id of the token the ticket was issued to; only that
	// token may redeem or cancel it. Empty without authentication.
	Token string `json:"token,omitempty"`
}

func decodeStatementTicket(handle []byte) (statementTicket, error) {
	var t statementTicket
	if err := json.Unmarshal(handle, &t); err != nil || t.ID == "" {
		return t, fmt.Errorf("%w: malformed statement ticket %q", errInvalidRequest, handle)
	}
	return t, nil
}

// GetFlightInfoStatement checks a query and answers its schema and one
// endpoint, on this server, whose ticket carries the query.
func (s *SQLServer) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	st, err := s.prepareQuery(ctx, cmd)
	if err != nil {
		return nil, statusOf(err)
	}
	handle, err := json.Marshal(statementTicket{SQL: st.SQL, Database: st.Database, ID: rand.Text(), Token: auth.FromContext(ctx).ID()})
	if err != nil {
		return nil, statusOf(err)
	}
	tkt, err := flightsql.CreateStatementQueryTicket(handle)
	if err != nil {
		return nil, statusOf(err)
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc,
		Schema:           s.schemas.serialized(st.Schema),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}, nil
}

func (s *SQLServer) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	st, err := s.prepareQuery(ctx, cmd)
	if err != nil {
		return nil, statusOf(err)
	}
	return &flight.SchemaResult{Schema: s.schemas.serialized(st.Schema)}, nil
}

// prepareQuery prepares a statement that must return rows.
func (s *SQLServer) prepareQuery(ctx context.Context, cmd flightsql.StatementQuery) (*query.Statement, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return nil, errNoTransactions
	}
	st, err := s.prepare(ctx, cmd.GetQuery())
	if err != nil {
		return nil, err
	}
	if st.Kind != query.KindQuery {
		return nil, errInsertAsQuery
	}
	if st.Params != nil && st.Params.NumFields() > 0 {
		return nil, fmt.Errorf("%w: the query has %d parameters: prepare it and bind them (ADBC Prepare and Bind, JDBC PreparedStatement)",
			errInvalidRequest, st.Params.NumFields())
	}
	return st, nil
}

// prepare prepares sql in the current database. The engine admits a
// statement by DuckDB's parse of it (query/admit.go); its refusal names
// the statement.
func (s *SQLServer) prepare(ctx context.Context, sql string) (*query.Statement, error) {
	db := currentDatabase(ctx)
	callFrom(ctx).setSQL(sql, db)
	return s.eng.Prepare(ctx, sql, db)
}

// DoGetStatement runs the query of a ticket and streams its result.
func (s *SQLServer) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	t, err := decodeStatementTicket(tkt.GetStatementHandle())
	if err != nil {
		return nil, nil, statusOf(err)
	}
	callFrom(ctx).setSQL(t.SQL, t.Database)
	if t.Token != auth.FromContext(ctx).ID() {
		return nil, nil, statusOf(errNotOwner("ticket"))
	}
	qctx, done, err := s.running.start(ctx, statementKey(t.ID))
	if err != nil {
		return nil, nil, statusOf(err)
	}
	rdr, err := s.eng.Query(qctx, t.SQL, t.Database)
	if err != nil {
		done()
		return nil, nil, statusOf(err)
	}
	return rdr.Schema(), s.stream(ctx, rdr, done), nil
}

// DoPutCommandStatementUpdate runs INSERT INTO … VALUES / SELECT and
// answers the rows written; any other statement is refused.
func (s *SQLServer) DoPutCommandStatementUpdate(ctx context.Context, cmd flightsql.StatementUpdate) (int64, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return 0, statusOf(errNoTransactions)
	}
	st, err := s.prepare(ctx, cmd.GetQuery())
	if err != nil {
		return 0, statusOf(err)
	}
	if !st.IsUpdate() {
		return 0, statusOf(errQueryAsUpdate)
	}
	if st.Params != nil && st.Params.NumFields() > 0 {
		return 0, statusOf(fmt.Errorf("%w: the statement has %d parameters: prepare it and bind them", errInvalidRequest, st.Params.NumFields()))
	}
	n, err := s.eng.Exec(ctx, st, nil)
	return n, statusOf(err)
}

// maxChunkBytes bounds the estimated size of one streamed batch. Clients
// refuse bigger gRPC messages than they allow: arrow-go's and most gRPC
// clients default to 4 MiB, the ADBC Flight SQL driver to 16 MiB.
const maxChunkBytes = 2 << 20

// coalesceRows bounds the rows of one streamed batch gathered from smaller
// ones.
const coalesceRows = 64 << 10

// sendAloneRows is the size from which a batch is sent as it is rather
// than gathered with others: joining copies every value, and a message of
// that many rows already carries its overhead (a direct scan hands out the
// buffer's chunks, 8192 rows each).
const sendAloneRows = 8 << 10

// concatBatches joins batches of one schema into one.
func concatBatches(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	ncols := int(recs[0].NumCols())
	cols := make([]arrow.Array, ncols)
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
	parts := make([]arrow.Array, len(recs))
	for i := range ncols {
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, rows), nil
}

// stream sends the batches of rdr as DuckDB produces them, each cut to at
// most maxChunkBytes. The channel is unbuffered: a batch is read from
// DuckDB only once the previous one was taken, so a slow client slows the
// query instead of filling memory. The producer stops when ctx is done
// (the client went away), releases rdr and calls done. A client that
// takes no batch for the idle timeout loses its query: rdr is released
// (the query's slot is free again) and the stream ends with
// errQueryIdle, once the client reads again or goes away.
func (s *SQLServer) stream(ctx context.Context, rdr array.RecordReader, done func()) <-chan flight.StreamChunk {
	ch := make(chan flight.StreamChunk)
	go func() {
		defer close(ch)
		var idled bool
		defer func() {
			if idled {
				s.log.Info("query cancelled: its client took no result batch in time", "idle_timeout", s.idle, "client", peerAddr(ctx))
				select {
				case ch <- flight.StreamChunk{Err: statusOf(fmt.Errorf("%w (%s, --query-idle-timeout)", errQueryIdle, s.idle))}:
				case <-ctx.Done():
				}
			}
		}()
		defer done()
		defer rdr.Release()
		var timer *time.Timer
		if s.idle > 0 {
			timer = time.NewTimer(s.idle)
			defer timer.Stop()
		}
		rpc := callFrom(ctx)
		send := func(c flight.StreamChunk) bool {
			var idle <-chan time.Time
			if timer != nil {
				timer.Reset(s.idle)
				idle = timer.C
			}
			// Counted before the send: the receiver releases the batch.
			var rows int64
			if c.Data != nil {
				rows = c.Data.NumRows()
			}
			select {
			case ch <- c:
				rpc.sent(rows)
				return true
			case <-ctx.Done():
			case <-idle:
				idled = true
			}
			if c.Data != nil {
				c.Data.Release()
			}
			return false
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic streaming a query result", "panic", r)
				send(flight.StreamChunk{Err: statusOf(fmt.Errorf("internal error streaming the result: %v", r))})
			}
		}()
		// DuckDB hands out 2048-row chunks; a gRPC message each costs more
		// than the rows in it. Small batches are gathered up to
		// maxChunkBytes (or coalesceRows) and sent as one.
		var (
			pending      []arrow.RecordBatch
			pendingRows  int64
			pendingBytes int64
		)
		defer func() {
			for _, r := range pending {
				r.Release()
			}
		}()
		flush := func() bool {
			if len(pending) == 0 {
				return true
			}
			var out arrow.RecordBatch
			if len(pending) == 1 {
				out = pending[0]
			} else {
				var err error
				out, err = concatBatches(s.mem, pending)
				for _, r := range pending {
					r.Release()
				}
				if err != nil {
					pending = nil
					send(flight.StreamChunk{Err: statusOf(fmt.Errorf("gathering result batches: %w", err))})
					return false
				}
			}
			pending, pendingRows, pendingBytes = pending[:0], 0, 0
			return send(flight.StreamChunk{Data: out})
		}
		who := auth.FromContext(ctx)
		for rdr.Next() {
			// A token revoked (or expired) while its query streams gets
			// no further batch.
			if err := who.Check(); err != nil {
				send(flight.StreamChunk{Err: statusOf(err)})
				return
			}
			rec := rdr.RecordBatch()
			n := rec.NumRows()
			size := util.TotalRecordSize(rec)
			if n >= sendAloneRows && size <= maxChunkBytes {
				if !flush() {
					return
				}
				rec.Retain()
				if !send(flight.StreamChunk{Data: rec}) {
					return
				}
				continue
			}
			if size <= maxChunkBytes {
				if pendingBytes+size > maxChunkBytes || pendingRows+n > coalesceRows {
					if !flush() {
						return
					}
				}
				rec.Retain()
				pending = append(pending, rec)
				pendingRows += n
				pendingBytes += size
				continue
			}
			if !flush() {
				return
			}
			step := max(1, n*maxChunkBytes/size)
			for off := int64(0); off < n; off += step {
				if !send(flight.StreamChunk{Data: rec.NewSlice(off, min(off+step, n))}) {
					return
				}
			}
		}
		if rdr.Err() == nil && !flush() {
			return
		}
		if err := rdr.Err(); err != nil {
			send(flight.StreamChunk{Err: statusOf(err)})
		}
	}()
	return ch
}

// runningQueries are the DoGets running now, by the key CancelFlightInfo
// finds them by, and the statement tickets cancelled before they ran.
type runningQueries struct {
	mu struct {
		sync.Mutex
		running   map[string]map[*runningQuery]struct{}
		cancelled map[string]time.Time
	}
}

type runningQuery struct{ cancel context.CancelCauseFunc }

// cancelledKeep is how long a ticket cancelled before its DoGet stays
// refused.
const cancelledKeep = time.Hour

func newRunningQueries() *runningQueries {
	r := &runningQueries{}
	r.mu.running = make(map[string]map[*runningQuery]struct{})
	r.mu.cancelled = make(map[string]time.Time)
	return r
}

func statementKey(id string) string    { return "statement:" + id }
func preparedKey(handle []byte) string { return "prepared:" + string(handle) }

// errQueryIdle ends the stream of a query whose client stopped reading.
var errQueryIdle = fmt.Errorf("%w: the query was cancelled because its client took no result batch for the idle timeout", context.DeadlineExceeded)

// errCancelledByClient is the cause of a query stopped by CancelFlightInfo.
var errCancelledByClient = fmt.Errorf("%w: the query was cancelled (CancelFlightInfo)", context.Canceled)

// start registers a query under key and returns its context and the
// function that unregisters it.
func (r *runningQueries) start(ctx context.Context, key string) (context.Context, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.cancelled[key]; ok {
		return nil, nil, errCancelledByClient
	}
	qctx, cancel := context.WithCancelCause(ctx)
	q := &runningQuery{cancel: cancel}
	set := r.mu.running[key]
	if set == nil {
		set = make(map[*runningQuery]struct{})
		r.mu.running[key] = set
	}
	set[q] = struct{}{}
	var once sync.Once
	return qctx, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(set, q)
			if len(r.mu.running[key]) == 0 {
				delete(r.mu.running, key)
			}
			r.mu.Unlock()
			cancel(nil)
		})
	}, nil
}

// cancel stops the queries running under key and reports whether there
// were any. remember keeps the key refused for later DoGets.
func (r *runningQueries) cancel(key string, remember bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for k, t := range r.mu.cancelled {
		if now.Sub(t) > cancelledKeep {
			delete(r.mu.cancelled, k)
		}
	}
	if remember {
		r.mu.cancelled[key] = now
	}
	set := r.mu.running[key]
	for q := range set {
		q.cancel(errCancelledByClient)
	}
	return len(set) > 0
}

// CancelFlightInfo cancels the queries of a FlightInfo's endpoints: a
// running DoGet of its ticket fails with CANCELLED, and a statement ticket
// not yet fetched is refused from now on.
func (s *SQLServer) CancelFlightInfo(ctx context.Context, req *flight.CancelFlightInfoRequest) (flight.CancelFlightInfoResult, error) {
	who := auth.FromContext(ctx).ID()
	st := flight.CancelStatusNotCancellable
	info := req.GetInfo()
	if info == nil {
		return flight.CancelFlightInfoResult{}, statusOf(fmt.Errorf("%w: CancelFlightInfo without a FlightInfo", errInvalidRequest))
	}
	for _, ep := range info.GetEndpoint() {
		var a anypb.Any
		if err := proto.Unmarshal(ep.GetTicket().GetTicket(), &a); err != nil {
			continue // not a Flight SQL ticket: plain Flight reads are not cancellable
		}
		msg, err := a.UnmarshalNew()
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *flightpb.TicketStatementQuery:
			t, err := decodeStatementTicket(m.GetStatementHandle())
			if err != nil {
				return flight.CancelFlightInfoResult{}, statusOf(err)
			}
			if t.Token != who {
				return flight.CancelFlightInfoResult{}, statusOf(errNotOwner("ticket"))
			}
			s.running.cancel(statementKey(t.ID), true)
			st = flight.CancelStatusCancelled
		case *flightpb.CommandPreparedStatementQuery:
			if _, p, err := s.prepared.get(m.GetPreparedStatementHandle(), who); errors.Is(err, auth.ErrPermissionDenied) {
				return flight.CancelFlightInfoResult{}, statusOf(err)
			} else if p != nil {
				p.Release()
			}
			if s.running.cancel(preparedKey(m.GetPreparedStatementHandle()), false) {
				st = flight.CancelStatusCancelled
			}
		}
	}
	return flight.CancelFlightInfoResult{Status: st}, nil
}
