package objstore

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"google.golang.org/api/googleapi"
)

func TestErrorClass(t *testing.T) {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "http://127.0.0.1/upload", Err: err} }
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", ErrNotFound), "not_found"},
		{fmt.Errorf("x: %w", ErrExists), "exists"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("put: %w", context.DeadlineExceeded), "timeout"},
		{&googleapi.Error{Code: 429}, "rate_limited"},
		{&googleapi.Error{Code: 503}, "unavailable"},
		{&googleapi.Error{Code: 500}, "unavailable"},
		{&googleapi.Error{Code: 403}, "denied"},
		{&googleapi.Error{Code: 408}, "timeout"},
		{&googleapi.Error{Code: 400}, "client"},
		{post(syscall.ECONNRESET), "connection"},
		{post(syscall.ECONNREFUSED), "connection"},
		{post(io.ErrUnexpectedEOF), "connection"},
		// A reset while the request body is still being written.
		{post(&net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}), "connection"},
		{fmt.Errorf("something else"), "other"},
	} {
		if got := ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
