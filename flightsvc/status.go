package flightsvc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/query"
)

// codeRules map domain errors to gRPC codes; the first match wins.
var codeRules = []struct {
	err  error
	code codes.Code
}{
	{auth.ErrUnauthenticated, codes.Unauthenticated},
	{auth.ErrPermissionDenied, codes.PermissionDenied},
	{auth.ErrInvalidRequest, codes.InvalidArgument},
	{catalog.ErrTokenNotFound, codes.NotFound},
	{catalog.ErrLastAdmin, codes.FailedPrecondition},
	{catalog.ErrTooManyTokens, codes.ResourceExhausted},
	{catalog.ErrInvalidName, codes.InvalidArgument},
	{catalog.ErrInvalidSchema, codes.InvalidArgument},
	{catalog.ErrUnsupportedType, codes.InvalidArgument},
	{catalog.ErrTypeMismatch, codes.InvalidArgument},
	{buffer.ErrInvalidBatch, codes.InvalidArgument},
	{errInvalidRequest, codes.InvalidArgument},
	{catalog.ErrTableNotFound, codes.NotFound},
	{catalog.ErrDatabaseNotFound, codes.NotFound},
	{errNotFound, codes.NotFound},
	{errResourceExhausted, codes.ResourceExhausted},
	{catalog.ErrTableExists, codes.AlreadyExists},
	{catalog.ErrCacheExists, codes.AlreadyExists},
	{catalog.ErrCacheNotFound, codes.NotFound},
	{catalog.ErrDatabaseExists, codes.AlreadyExists},
	{catalog.ErrDatabaseNotEmpty, codes.FailedPrecondition},
	{catalog.ErrReplaceInProgress, codes.Aborted},
	{catalog.ErrLimitExceeded, codes.ResourceExhausted},
	{buffer.ErrBufferFull, codes.ResourceExhausted},
	{errUnsupported, codes.Unimplemented},
	{buffer.ErrClosed, codes.Unavailable},
	{buffer.ErrWAL, codes.Unavailable},
	{buffer.ErrPersistFailing, codes.Unavailable},
	{buffer.ErrRewriteUnknown, codes.Unavailable},
	{query.ErrSyntax, codes.InvalidArgument},
	{query.ErrExecution, codes.InvalidArgument},
	{query.ErrUnsupportedStatement, codes.InvalidArgument},
	{query.ErrNotFound, codes.NotFound},
	{query.ErrTooManyQueries, codes.ResourceExhausted},
	{query.ErrClosed, codes.Unavailable},
	{query.ErrInternal, codes.Internal},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

var (
	errInvalidRequest = errors.New("invalid request")
	errNotFound       = errors.New("not found")
	errUnsupported    = errors.New("not supported")

	errResourceExhausted = errors.New("resource exhausted")
	errNoTransactions    = fmt.Errorf("%w: transactions are not supported; send no transaction id", errUnsupported)
	errInsertAsQuery     = fmt.Errorf("%w: an INSERT, CREATE or DROP returns no rows: execute it as an update (ADBC ExecuteUpdate, JDBC executeUpdate, Flight SQL CommandStatementUpdate)", errInvalidRequest)
	errQueryAsUpdate     = fmt.Errorf("%w: only INSERT INTO <table> VALUES … / SELECT …, CREATE TABLE/SCHEMA and DROP TABLE/SCHEMA run as updates; run a query with ExecuteQuery", errInvalidRequest)
)

// statusOf turns an error into a gRPC status error. An error that already
// carries a status keeps it; a domain error gets its code with its message;
// anything else is Internal.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	for _, r := range codeRules {
		if errors.Is(err, r.err) {
			return status.Error(r.code, err.Error())
		}
	}
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Error(codes.Internal, err.Error())
}
