// Package grpccode names gRPC status codes as the gRPC spec spells them
// (UNAVAILABLE, INVALID_ARGUMENT, …), which is how Apron's CLI and load
// generator print them; codes.Code's String is CamelCase.
package grpccode

import "google.golang.org/grpc/codes"

var names = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// Name is the canonical name of c.
func Name(c codes.Code) string {
	if n, ok := names[c]; ok {
		return n
	}
	return c.String()
}
