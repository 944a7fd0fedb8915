package flightsvc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// codeRules map domain errors to gRPC codes; the first match wins.
var codeRules = []struct {
	err  error
	code codes.Code
}{
	{catalog.ErrInvalidName, codes.InvalidArgument},
	{catalog.ErrInvalidSchema, codes.InvalidArgument},
	{catalog.ErrUnsupportedType, codes.InvalidArgument},
	{catalog.ErrTypeMismatch, codes.InvalidArgument},
	{buffer.ErrInvalidBatch, codes.InvalidArgument},
	{errInvalidRequest, codes.InvalidArgument},
	{catalog.ErrTableNotFound, codes.NotFound},
	{catalog.ErrDatabaseNotFound, codes.NotFound},
	{errNotFound, codes.NotFound},
	{catalog.ErrTableExists, codes.AlreadyExists},
	{catalog.ErrLimitExceeded, codes.ResourceExhausted},
	{buffer.ErrBufferFull, codes.ResourceExhausted},
	{errUnsupported, codes.Unimplemented},
	{buffer.ErrClosed, codes.Unavailable},
	{buffer.ErrWAL, codes.Unavailable},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

var (
	errInvalidRequest = errors.New("invalid request")
	errNotFound       = errors.New("not found")
	errUnsupported    = errors.New("not supported")
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
