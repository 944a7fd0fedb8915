package flightsvc

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	apronpb "github.com/apron-db/apron/proto"
)

// TestIsQueryTicket: the three kinds of DoGet ticket never meet: a
// Flight SQL ticket (protobuf Any) and an Apron ticket are never read as
// query tickets.
func TestIsQueryTicket(t *testing.T) {
	sqlTicket, err := flightsql.CreateStatementQueryTicket([]byte(`{"sql":"SELECT 1","id":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	apronTicket, err := encodeTicket(&apronpb.Ticket{TokenId: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{sqlTicket, apronTicket, nil, []byte(""), []byte("  "), []byte("SELECT 1"), []byte("[]")} {
		if isQueryTicket(b) {
			t.Errorf("%q taken for a query ticket", b)
		}
	}
	for _, b := range []string{`{}`, ` {"sql_query": "SELECT 1"}`, "\n\t{"} {
		if !isQueryTicket([]byte(b)) {
			t.Errorf("%q not taken for a query ticket", b)
		}
	}
}

func TestDecodeQueryTicket(t *testing.T) {
	for _, tc := range []struct {
		in      string
		sql, db string
	}{
		{`{"database": "a", "sql_query": "SELECT 1"}`, "SELECT 1", "a"},
		{`{"namespace_name": "a", "sql_query": "SELECT 1", "query_type": "sql"}`, "SELECT 1", "a"},
		{`{"bucket": "a", "bucket-name": "a", "database": "a", "sql_query": "SELECT 1", "query_type": null, "is_debug": true, "params": {}}`, "SELECT 1", "a"},
		{`{"sql_query": "SELECT 1"}`, "SELECT 1", ""},
	} {
		sql, db, err := decodeQueryTicket([]byte(tc.in))
		if err != nil || sql != tc.sql || db != tc.db {
			t.Errorf("%s: %q %q %v", tc.in, sql, db, err)
		}
	}
	for _, in := range []string{
		`{"database": "a", "sql_query": "SELECT 1", "extra": 1}`,
		`{"database": "a", "sql_query": "SELECT 1"} x`,
		`{"database": "a", "sql_query": "SELECT 1"}{}`,
		`{"database": "a", "bucket": "b", "sql_query": "SELECT 1"}`,
		`{"database": "a", "sql_query": "SELECT 1", "query_type": "influxql"}`,
		`{"database": "a", "sql_query": "SELECT 1", "query_type": "SQL "}`,
		`{"database": "a", "sql_query": "SELECT $1", "params": {"1": 2}}`,
		`{"database": "a"}`,
		`{"database": 1, "sql_query": "SELECT 1"}`,
		"{\"sql_query\": \"SELECT '\xc3'\"}",
	} {
		if _, _, err := decodeQueryTicket([]byte(in)); !errors.Is(err, errInvalidRequest) {
			t.Errorf("%s: %v, want an invalid request", in, err)
		}
	}
}

// FuzzDecodeQueryTicket: whatever a client sends as a ticket, decoding
// neither panics nor accepts a ticket without SQL, with invalid UTF-8, or
// that the dispatcher would not take for a query ticket.
func FuzzDecodeQueryTicket(f *testing.F) {
	for _, s := range []string{
		`{"database": "a", "sql_query": "SELECT 1"}`,
		`{"bucket-name": "a", "sql_query": "SELECT 1", "query_type": "sql", "is_debug": false, "params": {}}`,
		`{"database": "a", "namespace_name": "b", "sql_query": "x"}`,
		`{"sql_query": "SELECT 1"} {}`,
		`{"DATABASE": "a", "SQL_QUERY": "SELECT 1"}`,
		`{"sql_query": "\u0000"}`,
		"\x0a\x04apron",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sql, _, err := decodeQueryTicket(b)
		if err != nil {
			if !errors.Is(err, errInvalidRequest) {
				t.Fatalf("%q: %v is not an invalid request", b, err)
			}
			return
		}
		if sql == "" || !utf8.ValidString(sql) || !isQueryTicket(b) {
			t.Fatalf("%q accepted: sql %q, taken for a query ticket: %v", b, sql, isQueryTicket(b))
		}
	})
}
