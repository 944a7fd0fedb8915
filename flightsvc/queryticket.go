package flightsvc

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"

	"github.com/apron-db/apron/auth"
)

// A query ticket is a DoGet ticket that a client writes itself: a JSON
// object naming the SQL and the database it runs in,
//
//	{"database": "metrics", "sql_query": "SELECT * FROM cpu WHERE host = 'a'"}
//
// InfluxDB 3's own form, which its client libraries send
// (influxdb3-python's is tested: TestPythonClients), as pyarrow.flight
// users can. It answers a query in
// one call, where Flight SQL takes two (GetFlightInfo, then DoGet) and a
// new statement through ADBC's DB-API four (CreatePreparedStatement,
// GetFlightInfo, DoGet, ClosePreparedStatement): the round trips and the
// client's work for them are most of what a small query costs.
//
// The query goes the way of a Flight SQL statement ticket's (DoGetStatement):
// the engine admits it by DuckDB's parse of it, checks the caller's
// permissions on what it reads, and takes a query slot; only queries that
// return rows run. Fields are checked strictly: an unknown one, a second
// object or a query language other than SQL is refused, so that a typing
// mistake is an error rather than a query of something else.
type queryTicket struct {
	Database string `json:"database"`
	// InfluxDB 3 reads these as other names of database.
	NamespaceName string `json:"namespace_name"`
	Bucket        string `json:"bucket"`
	BucketName    string `json:"bucket-name"`

	SQLQuery  string  `json:"sql_query"`
	QueryType *string `json:"query_type"`
	// IsDebug asks InfluxDB 3 for a query plan in its log; accepted and
	// ignored here.
	IsDebug bool `json:"is_debug"`
	// Params are the values of named parameters ($host) in influxdb3
	// clients' form; not supported yet.
	Params map[string]json.RawMessage `json:"params"`
}

// isQueryTicket reports whether b is meant as a query ticket: its first
// byte past blanks opens a JSON object. Flight SQL tickets are protobuf
// Any messages (first byte 0x0a) and Apron's own start with "apron:", so
// the three never meet.
func isQueryTicket(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// decodeQueryTicket reads a query ticket: its SQL and database.
func decodeQueryTicket(b []byte) (sql, database string, err error) {
	const form = `{"database": "db", "sql_query": "SELECT …"}`
	if !utf8.Valid(b) {
		return "", "", fmt.Errorf("%w: a query ticket must be UTF-8 JSON, %s", errInvalidRequest, form)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var t queryTicket
	if err := dec.Decode(&t); err != nil {
		return "", "", fmt.Errorf("%w: malformed query ticket (%w); the form is %s", errInvalidRequest, err, form)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", "", fmt.Errorf("%w: a query ticket is one JSON object, with nothing after it", errInvalidRequest)
	}
	for _, alias := range []string{t.NamespaceName, t.Bucket, t.BucketName} {
		switch {
		case alias == "":
		case t.Database == "":
			t.Database = alias
		case alias != t.Database:
			return "", "", fmt.Errorf("%w: the query ticket names two databases, %q and %q (database, namespace_name, bucket and bucket-name are one field)", errInvalidRequest, t.Database, alias)
		}
	}
	if t.QueryType != nil && *t.QueryType != "sql" {
		return "", "", fmt.Errorf("%w: query_type %q: this server answers SQL only (\"sql\", or no query_type)", errInvalidRequest, *t.QueryType)
	}
	if len(t.Params) > 0 {
		return "", "", fmt.Errorf("%w: query parameters (params) in a query ticket are not supported: put the values in the SQL, or prepare the statement and bind them through Flight SQL (ADBC Prepare and Bind, JDBC PreparedStatement)", errInvalidRequest)
	}
	if t.SQLQuery == "" {
		return "", "", fmt.Errorf("%w: the query ticket has no sql_query; the form is %s", errInvalidRequest, form)
	}
	return t.SQLQuery, t.Database, nil
}

// doGetQuery runs the query of a query ticket and streams its result, as
// the Flight SQL statement ticket of the same query and database, issued
// to the caller, would be: one path for both, so that what is checked and
// counted for one is for the other.
func (s *Service) doGetQuery(raw []byte, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	sql, db, err := decodeQueryTicket(raw)
	if err != nil {
		return statusOf(err)
	}
	callFrom(ctx).setSQL(sql, db)
	handle, err := json.Marshal(statementTicket{SQL: sql, Database: db, ID: rand.Text(), Token: auth.FromContext(ctx).ID()})
	if err != nil {
		return statusOf(err)
	}
	return s.doGetSQL(&flightpb.TicketStatementQuery{StatementHandle: handle}, stream)
}
