package catalog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by PlanWrite, Apply and the lookups
// wraps exactly one of them, so the gRPC layer can map them to status codes
// with errors.Is.
var (
	ErrInvalidName      = errors.New("catalog: invalid name")
	ErrInvalidSchema    = errors.New("catalog: invalid schema")
	ErrUnsupportedType  = errors.New("catalog: unsupported type")
	ErrTypeMismatch     = errors.New("catalog: type mismatch")
	ErrTableNotFound    = errors.New("catalog: table not found")
	ErrDatabaseNotFound = errors.New("catalog: database not found")
	ErrTableExists      = errors.New("catalog: table already exists")
	ErrDatabaseExists   = errors.New("catalog: database already exists")
	// ErrDatabaseNotEmpty: DROP SCHEMA without CASCADE of a database that
	// has tables.
	ErrDatabaseNotEmpty = errors.New("catalog: database not empty")
	ErrLimitExceeded    = errors.New("catalog: limit exceeded")
	// ErrReplaceInProgress: a write or DDL on a table (or database) that
	// a replace (ADBC ingest mode replace) is rewriting; it may succeed
	// once the replace has committed or aborted.
	ErrReplaceInProgress = errors.New("catalog: replace in progress")
	// ErrCacheExists and ErrCacheNotFound: CREATE of a last-value cache
	// on a table that has one, DROP on a table that has none.
	ErrCacheExists   = errors.New("catalog: last-value cache exists")
	ErrCacheNotFound = errors.New("catalog: last-value cache not found")
	// ErrCorrupt is wrapped by Load when the catalog file cannot be decoded
	// or violates the catalog's invariants.
	ErrCorrupt = errors.New("corrupt catalog file")
)

// catalogError carries a complete, user-facing message and one sentinel
// kind. The sentinel's own text is not repeated: the message already says
// what went wrong, and where.
type catalogError struct {
	kind error
	msg  string
}

func (e *catalogError) Error() string { return e.msg }
func (e *catalogError) Unwrap() error { return e.kind }

func newError(kind error, format string, args ...any) error {
	return &catalogError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
