package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// waitLogLine waits for a line of the server's log that holds every part,
// and returns it.
func waitLogLine(t *testing.T, s *server, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for line := range strings.SplitSeq(s.Stderr(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q; stderr:\n%s", parts, s.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var requestIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestRequestLogFailedQuery: a failed query's response carries a request
// id, in its header and its trailer, and the server's log line of the
// call has it, with the method, kind, code, error and SQL; a successful
// query's DoGet logs its rows at debug; a client's own request id is
// answered and logged as it is.
func TestRequestLogFailedQuery(t *testing.T) {
	s := startServer(t, t.TempDir(), "--log-level", "debug")
	c := sqlClient(t, s.Addr, nil)
	ctx := testCtx(t)

	var hdr, trl metadata.MD
	_, err := c.Execute(ctx, "SELECT * FROM nosuchdb.nosuchtable", grpc.Header(&hdr), grpc.Trailer(&trl))
	wantCode(t, err, codes.NotFound)
	ids := hdr.Get("x-request-id")
	if len(ids) != 1 || !requestIDRE.MatchString(ids[0]) {
		t.Fatalf("x-request-id header %q, want one id of 16 hex digits", ids)
	}
	if got := trl.Get("x-request-id"); len(got) != 1 || got[0] != ids[0] {
		t.Errorf("x-request-id trailer %q, want [%q]", got, ids[0])
	}
	line := waitLogLine(t, s, "request_id="+ids[0])
	for _, want := range []string{"level=INFO", `msg="request failed"`, "method=GetFlightInfo", "kind=statement",
		"client=127.0.0.1:", "code=NOT_FOUND", "err=", "nosuchtable", `sql="SELECT * FROM nosuchdb.nosuchtable"`, "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("the log line has no %q: %s", want, line)
		}
	}
	t.Logf("failed query: %s", line)

	info, err := c.Execute(ctx, "SELECT * FROM range(3)")
	if err != nil {
		t.Fatal(err)
	}
	var getHdr metadata.MD
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket, grpc.Header(&getHdr))
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	getID := getHdr.Get("x-request-id")
	if len(getID) != 1 {
		t.Fatalf("DoGet x-request-id %q", getID)
	}
	line = waitLogLine(t, s, "request_id="+getID[0])
	for _, want := range []string{"level=DEBUG", "msg=request", "method=DoGet", "kind=statement", "rows_sent=3", "code=OK"} {
		if !strings.Contains(line, want) {
			t.Errorf("the DoGet line has no %q: %s", want, line)
		}
	}
	t.Logf("query: %s", line)

	var own metadata.MD
	_, err = c.Execute(metadata.AppendToOutgoingContext(ctx, "x-request-id", "it-trace-42"), "SELECT nosuchcolumn", grpc.Header(&own))
	wantCode(t, err, codes.InvalidArgument)
	if got := own.Get("x-request-id"); len(got) != 1 || got[0] != "it-trace-42" {
		t.Errorf("x-request-id %q, want the client's [it-trace-42]", got)
	}
	waitLogLine(t, s, "request_id=it-trace-42", `msg="request failed"`, "code=INVALID_ARGUMENT")
}

// TestRequestLogRefused: a call refused for want of a token has a request
// id too (the id interceptor runs before authentication), and the
// authenticator's warning names it.
func TestRequestLogRefused(t *testing.T) {
	s := startAuthServer(t, t.TempDir(), "--log-level", "debug")
	c := sqlClient(t, s.Addr, nil)
	var hdr metadata.MD
	_, err := c.Execute(testCtx(t), "SELECT 1", grpc.Header(&hdr))
	wantCode(t, err, codes.Unauthenticated)
	ids := hdr.Get("x-request-id")
	if len(ids) != 1 || !requestIDRE.MatchString(ids[0]) {
		t.Fatalf("x-request-id header %q", ids)
	}
	warn := waitLogLine(t, s.server, `msg="authentication failed"`, "request_id="+ids[0])
	if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "reason=missing") {
		t.Errorf("refusal line: %s", warn)
	}
	// The call's own line stays at debug: the refusal is logged once
	// above it, rate-limited.
	waitLogLine(t, s.server, "level=DEBUG", "msg=request", "request_id="+ids[0], "code=UNAUTHENTICATED")
	if strings.Contains(s.Stderr(), s.Admin) {
		t.Error("the log holds the admin token")
	}
}
