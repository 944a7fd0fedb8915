package objstore

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"google.golang.org/api/googleapi"
)

// ErrorClass names the kind of a store error for metrics and logs:
// "not_found", "exists", "timeout", "canceled", "rate_limited" (HTTP 429),
// "unavailable" (HTTP 5xx), "connection" (refused, reset, cut short),
// "denied" (HTTP 401/403), "client" (other HTTP 4xx) or "other".
func ErrorClass(err error) string {
	var gerr *googleapi.Error
	var nerr net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.As(err, &gerr):
		switch c := gerr.Code; {
		case c == http.StatusTooManyRequests:
			return "rate_limited"
		case c == http.StatusUnauthorized || c == http.StatusForbidden:
			return "denied"
		case c == http.StatusRequestTimeout:
			return "timeout"
		case c >= 500:
			return "unavailable"
		case c >= 400:
			return "client"
		}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		// A reset seen while the request is still being sent: the
		// transport closes the connection under the writer.
		errors.Is(err, net.ErrClosed):
		return "connection"
	}
	return "other"
}
