package flightsvc

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/protobuf/encoding/protowire"
)

// call is what is known of one RPC, for its log line and its metrics
// (requestlog.go). The first interceptor makes it and classifies the
// request from the messages it sees; the authenticator adds the token, the
// handlers the database, the SQL and the rows, some from goroutines of
// their own (a query's producer, an ingest's reader): counters are atomic,
// the rest is under mu. Every method is a no-op on a nil *call, so that
// code run outside a gRPC call (tests, direct calls) needs no check.
type call struct {
	id     string
	method string // short: "DoGet", "GetFlightInfo", "grpc.health.v1.Health/Check"
	start  time.Time

	rowsSent, bytesSent, rowsRecv, bytesRecv atomic.Int64

	mu struct {
		sync.Mutex
		kind     string
		role     callRole
		action   string // DoAction's type
		token    string // the token id (never the token)
		database string
		sql      string
		refused  bool // the authenticator refused the call, and logs that itself
	}
}

// callRole says what a call is to a query, for apron_queries_total: each
// query counts once, at the call that runs it, or, when planning it fails
// (so that nothing runs it), at that call.
type callRole uint8

const (
	roleNone callRole = iota
	rolePlan          // GetFlightInfo of a statement or a plain read, CreatePreparedStatement
	roleRun           // DoGet of a query or a plain read, DoPut of an update
)

// Kinds of calls: the Flight SQL command (or plain Flight) they carry.
const (
	kindStatement = "statement" // an ad-hoc SQL query
	kindPrepared  = "prepared"  // a prepared statement: made, bound, run or closed
	kindUpdate    = "update"    // an ad-hoc INSERT (CommandStatementUpdate)
	kindIngest    = "ingest"    // bulk ingest or a plain Flight DoPut
	kindMetadata  = "metadata"  // GetTables, GetSqlInfo and the other catalog commands
	kindPlain     = "plain"     // plain Flight reads: PATH descriptors, Apron's tickets
)

type callKey struct{}

// callFrom is the call of ctx, nil outside one.
func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// requestID is the call's id, "" for a nil call.
func (c *call) requestID() string {
	if c == nil {
		return ""
	}
	return c.id
}

// classify sets the kind and role the first time it is called with a
// kind: the first message that says what the call is wins.
func (c *call) classify(kind string, role callRole) {
	if c == nil || kind == "" {
		return
	}
	c.mu.Lock()
	if c.mu.kind == "" {
		c.mu.kind, c.mu.role = kind, role
	}
	c.mu.Unlock()
}

func (c *call) setAction(typ string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.mu.action == "" {
		c.mu.action = typ
	}
	c.mu.Unlock()
}

func (c *call) setToken(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mu.token = id
	c.mu.Unlock()
}

func (c *call) setRefused() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mu.refused = true
	c.mu.Unlock()
}

// setDatabase records the database the call works in; "" keeps the one
// known.
func (c *call) setDatabase(db string) {
	if c == nil || db == "" {
		return
	}
	c.mu.Lock()
	c.mu.database = db
	c.mu.Unlock()
}

// setSQL records the statement of the call and the database it resolves
// names in. The log line truncates it.
func (c *call) setSQL(sql, db string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mu.sql = sql
	if db != "" {
		c.mu.database = db
	}
	c.mu.Unlock()
}

// sent counts rows the call sent (result batches).
func (c *call) sent(rows int64) {
	if c != nil {
		c.rowsSent.Add(rows)
	}
}

// received counts rows the call received (ingested batches, bound
// parameters).
func (c *call) received(rows int64) {
	if c != nil {
		c.rowsRecv.Add(rows)
	}
}

// callFields is a copy of the fields under mu.
type callFields struct {
	kind, action, token, database, sql string
	role                               callRole
	refused                            bool
}

func (c *call) fields() callFields {
	c.mu.Lock()
	defer c.mu.Unlock()
	return callFields{kind: c.mu.kind, action: c.mu.action, token: c.mu.token, database: c.mu.database,
		sql: c.mu.sql, role: c.mu.role, refused: c.mu.refused}
}

// sqlTypePrefix starts the type URL of every Flight SQL command.
const sqlTypePrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// commandKind is the kind of a Flight SQL command or ticket (a serialized
// protobuf Any), "" if b is none.
func commandKind(b []byte) string {
	name, ok := bytes.CutPrefix(anyTypeURL(b), []byte(sqlTypePrefix))
	if !ok {
		return ""
	}
	switch string(name) { // no copy: the compiler compares the bytes
	case "CommandStatementQuery", "TicketStatementQuery", "CommandStatementSubstraitPlan":
		return kindStatement
	case "CommandPreparedStatementQuery", "CommandPreparedStatementUpdate":
		return kindPrepared
	case "CommandStatementUpdate":
		return kindUpdate
	case "CommandStatementIngest":
		return kindIngest
	}
	if bytes.HasPrefix(name, []byte("CommandGet")) {
		return kindMetadata
	}
	return ""
}

// anyTypeURL reads field 1 (type_url) of a serialized protobuf Any without
// decoding (and copying) its value, which for a ticket may be large.
func anyTypeURL(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			return v
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}

// classifyDescriptor classifies a GetFlightInfo, GetSchema or
// PollFlightInfo (method) by its descriptor.
func classifyDescriptor(c *call, method string, d *flight.FlightDescriptor) {
	var kind string
	switch {
	case d.GetType() == flight.DescriptorPATH, bytes.HasPrefix(d.GetCmd(), ticketPrefix):
		kind = kindPlain
	default:
		kind = commandKind(d.GetCmd())
	}
	role := roleNone
	if (method == "GetFlightInfo" || method == "PollFlightInfo") && (kind == kindStatement || kind == kindPlain) {
		role = rolePlan
	}
	c.classify(kind, role)
}

// classifyTicket classifies a DoGet by its ticket.
func classifyTicket(c *call, t *flight.Ticket) {
	kind := kindPlain
	if !bytes.HasPrefix(t.GetTicket(), ticketPrefix) {
		kind = commandKind(t.GetTicket())
	}
	role := roleNone
	switch kind {
	case kindStatement, kindPrepared, kindPlain:
		role = roleRun
	}
	c.classify(kind, role)
}

// classifyPut classifies a DoPut by the descriptor of its first message.
func classifyPut(c *call, d *flight.FlightDescriptor) {
	if d.GetType() == flight.DescriptorPATH {
		c.classify(kindIngest, roleNone)
		return
	}
	role := roleNone
	switch string(anyTypeURL(d.GetCmd())) {
	case sqlTypePrefix + "CommandStatementUpdate", sqlTypePrefix + "CommandPreparedStatementUpdate":
		role = roleRun
	}
	c.classify(commandKind(d.GetCmd()), role)
}

// classifyAction records a DoAction's type; the prepared statement
// actions are of kind prepared, and making one plans a query.
func classifyAction(c *call, a *flight.Action) {
	c.setAction(a.GetType())
	switch a.GetType() {
	case flightsql.CreatePreparedStatementActionType, flightsql.CreatePreparedSubstraitPlanActionType:
		c.classify(kindPrepared, rolePlan)
	case flightsql.ClosePreparedStatementActionType:
		c.classify(kindPrepared, roleNone)
	}
}
