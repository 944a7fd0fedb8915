//go:build duckdb_arrow

package query

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error Query returns wraps one of them, or is
// ctx.Err() when the query was cancelled.
var (
	// ErrTooManyQueries: MaxConcurrent queries were running and none
	// finished within QueueTimeout.
	ErrTooManyQueries = errors.New("query: too many concurrent queries")
	// ErrSyntax: the statement does not parse or bind, or is not a single
	// SELECT; the message is DuckDB's.
	ErrSyntax = errors.New("query: invalid query")
	// ErrNotFound: an unknown database or table; the message names it.
	ErrNotFound = errors.New("query: not found")
	// ErrExecution: the query failed while running (a conversion, a
	// division by zero, out of memory, ...); the message is DuckDB's.
	ErrExecution = errors.New("query: execution failed")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("query: engine closed")
	// ErrInternal: a bug failed the query (panics.go); the server logged
	// it with its stack.
	ErrInternal = errors.New("query: internal error")
)

// queryError carries a user-facing message and one sentinel kind.
type queryError struct {
	kind error
	msg  string
}

func (e *queryError) Error() string { return e.msg }
func (e *queryError) Unwrap() error { return e.kind }

func newError(kind error, format string, args ...any) error {
	return &queryError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// classify turns a DuckDB error message into an error of the right kind.
// DuckDB prefixes its messages with the error type ("Parser Error: ...").
func classify(msg string) error {
	if msg == "" {
		msg = "unknown DuckDB error"
	}
	typ, _, _ := strings.Cut(msg, ":")
	switch typ {
	case "Parser Error", "Syntax Error", "Binder Error", "Not implemented Error", "Invalid Input Error":
		return &queryError{kind: ErrSyntax, msg: msg}
	case "Catalog Error":
		if isMissingRelation(msg) {
			return &queryError{kind: ErrNotFound, msg: msg}
		}
		return &queryError{kind: ErrSyntax, msg: msg}
	case "INTERRUPT Error":
		return &queryError{kind: errInterrupted, msg: msg}
	}
	return &queryError{kind: ErrExecution, msg: msg}
}

// errInterrupted is DuckDB's answer to an interrupt; Query turns it into
// ctx.Err().
var errInterrupted = errors.New("query: interrupted")

// isMissingRelation says whether a catalog error is about a table, view or
// schema that does not exist (rather than, say, a function).
func isMissingRelation(msg string) bool {
	for _, p := range []string{"Table with name", "View with name", "Schema with name", "Catalog with name", "Table or View with name"} {
		if strings.Contains(msg, p) && strings.Contains(msg, "does not exist") {
			return true
		}
	}
	return false
}
