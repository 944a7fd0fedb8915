package flightsvc

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestValidRequestID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"hex", "3f2a9c1d00b4e7a1", true},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", true},
		{"dotted_colon_underscore", "svc.web:req_42", true},
		{"max_length", strings.Repeat("a", maxRequestIDLen), true},
		{"empty", "", false},
		{"too_long", strings.Repeat("a", maxRequestIDLen+1), false},
		{"space", "a b", false},
		{"newline", "a\nb", false},
		{"quote", `a"b`, false},
		{"equals", "a=b", false},
		{"comma", "a,b", false},
		{"nul", "a\x00b", false},
		{"non_ascii", "ünïcode", false},
		{"log_injection", `x msg="forged"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := validRequestID(tc.id); got != tc.ok {
				t.Errorf("validRequestID(%q) = %v, want %v", tc.id, got, tc.ok)
			}
		})
	}
}

// TestRequestID: a client's one valid id is kept; none, an invalid one or
// two get a new one of 16 hex digits.
func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
		keep string
	}{
		{"client_id", metadata.Pairs(requestIDHeader, "client-7"), "client-7"},
		{"none", metadata.MD{}, ""},
		{"nil_md", nil, ""},
		{"invalid", metadata.Pairs(requestIDHeader, strings.Repeat("x", 200)), ""},
		{"two", metadata.Pairs(requestIDHeader, "a", requestIDHeader, "b"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), tc.md)
			got := requestID(metadata.ValueFromIncomingContext(ctx, requestIDHeader))
			if tc.keep != "" {
				if got != tc.keep {
					t.Errorf("got %q, want the client's %q", got, tc.keep)
				}
				return
			}
			if len(got) != 16 || strings.Trim(got, "0123456789abcdef") != "" {
				t.Errorf("got %q, want 16 hex digits", got)
			}
		})
	}
	if a, b := newRequestID(), newRequestID(); a == b {
		t.Errorf("two new ids are both %q", a)
	}
}
