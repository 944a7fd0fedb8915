package auth

import "errors"

// Errors of a refused request. flightsvc maps them to UNAUTHENTICATED and
// PERMISSION_DENIED; their messages say what was wrong and never contain
// the token.
var (
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrPermissionDenied = errors.New("permission denied")
)

// authError carries a full message and one of the sentinels above.
type authError struct {
	kind error
	msg  string
}

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return e.kind }

func unauthenticated(msg string) error { return &authError{kind: ErrUnauthenticated, msg: msg} }
func denied(msg string) error          { return &authError{kind: ErrPermissionDenied, msg: msg} }
