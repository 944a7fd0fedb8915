package flightsvc

import (
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/metadata"
)

// requestIDHeader is the header a call's request id travels in: a client
// may send one (to tie Apron's log line to its own), and every response
// carries the one the call ran under, in its headers, and in its trailers
// too when the call failed, so that a user can quote it.
const requestIDHeader = "x-request-id"

// maxRequestIDLen bounds a client's request id: a UUID is 36 characters,
// a W3C trace id 32.
const maxRequestIDLen = 64

// newRequestID is 16 hex digits of crypto/rand: unique enough among the
// calls of one log, short enough to quote.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

// validRequestID says whether a client's request id may be used as it is:
// 1 to maxRequestIDLen letters, digits, '-', '_', '.' or ':'. Anything
// else (spaces, quotes, control bytes, a whole document) is hostile or a
// mistake and is replaced by an id of our own: the id goes into every log
// line of the call and back to the client.
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// requestID is the id a call runs under: the client's, if it sent exactly
// one valid x-request-id (sent is the header's values), else a new one.
func requestID(sent []string) string {
	if len(sent) == 1 && validRequestID(sent[0]) {
		return sent[0]
	}
	return newRequestID()
}

// requestIDMD is the metadata that answers the id: one map for the header
// and the trailer, which gRPC copies.
func requestIDMD(id string) metadata.MD { return metadata.MD{requestIDHeader: {id}} }
