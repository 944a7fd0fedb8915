package auth

import "errors"

// Errors of a refused request. flightsvc maps them to UNAUTHENTICATED and
// PERMISSION_DENIED; their messages say what was wrong and never contain
// the token.
var (
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrPermissionDenied = errors.New("permission denied")
)

// authError carries a full message and one of the sentinels above, and
// for a refused credential why (Reason).
type authError struct {
	kind   error
	msg    string
	reason string
}

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return e.kind }

func unauthenticated(reason, msg string) error {
	return &authError{kind: ErrUnauthenticated, msg: msg, reason: reason}
}

// Reason says why Verify refused a credential: "malformed", "unknown",
// "expired" or "revoked"; "" for any other error.
func Reason(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.reason
	}
	return ""
}
func denied(msg string) error { return &authError{kind: ErrPermissionDenied, msg: msg} }
