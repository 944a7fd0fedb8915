package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// countSQL runs a query through Flight SQL (GetFlightInfo, then DoGet of
// every endpoint) and returns its rows.
func countSQL(ctx context.Context, c *flightsql.Client, query string) (int64, error) {
	info, err := c.Execute(ctx, query)
	if err != nil {
		return 0, err
	}
	return readInfo(ctx, c, info)
}

func readInfo(ctx context.Context, c *flightsql.Client, info *flight.FlightInfo) (int64, error) {
	var n int64
	for _, ep := range info.Endpoint {
		rdr, err := c.DoGet(ctx, ep.GetTicket())
		if err != nil {
			return n, err
		}
		for rdr.Next() {
			n += rdr.RecordBatch().NumRows()
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readAll calls recv until the stream ends: nil at its end (EOF), else
// the error (or err, the error of opening it).
func readAll(err error, recv func() error) error {
	for err == nil {
		err = recv()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// authCall is one RPC of the table test, and what it needs.
type authCall struct {
	name string
	// needs: "any" (a valid token), "read a", "write a", "read b" or
	// "admin".
	needs string
	run   func(ctx context.Context) error
}

// authCalls covers every RPC and action a client can make.
func authCalls(t *testing.T, addr string, mem memory.Allocator) []authCall {
	sc := sqlClient(t, addr, mem)
	fc := flightClient(t, addr)
	rec := idRecord(mem, 1000, 3)
	t.Cleanup(rec.Release)
	path := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "t"}}
	drain := func(ctx context.Context) func(*flight.FlightInfo, error) error {
		return func(info *flight.FlightInfo, err error) error {
			if err != nil {
				return err
			}
			_, err = readInfo(ctx, sc, info)
			return err
		}
	}
	return []authCall{
		{"sql query", "read a", func(ctx context.Context) error { _, err := countSQL(ctx, sc, "SELECT count(*) FROM a.t"); return err }},
		{"sql query of b", "read b", func(ctx context.Context) error { _, err := countSQL(ctx, sc, "SELECT count(*) FROM b.t"); return err }},
		{"sql GetSchema", "read a", func(ctx context.Context) error { _, err := sc.GetExecuteSchema(ctx, "SELECT * FROM a.t"); return err }},
		{"prepared query", "read a", func(ctx context.Context) error {
			p, err := sc.Prepare(ctx, "SELECT * FROM a.t WHERE id > 0")
			if err != nil {
				return err
			}
			defer p.Close(context.Background())
			info, err := p.Execute(ctx)
			return drain(ctx)(info, err)
		}},
		{"sql INSERT", "write a", func(ctx context.Context) error {
			_, err := sc.ExecuteUpdate(ctx, "INSERT INTO a.t (time, id) VALUES (TIMESTAMP '2026-01-01 00:00:00', 7)")
			return err
		}},
		{"prepared INSERT", "write a", func(ctx context.Context) error {
			p, err := sc.Prepare(ctx, "INSERT INTO a.t (time, id) VALUES (TIMESTAMP '2026-01-01 00:00:01', 8)")
			if err != nil {
				return err
			}
			defer p.Close(context.Background())
			_, err = p.ExecuteUpdate(ctx)
			return err
		}},
		{"bulk ingest", "write a", func(ctx context.Context) error { _, err := sqlIngest(ctx, sc, "a", "t", rec); return err }},
		{"bulk ingest new database", "write c", func(ctx context.Context) error { _, err := sqlIngest(ctx, sc, "c", "t", rec); return err }},
		{"PATH DoPut", "write a", func(ctx context.Context) error {
			_, err := flightPut(ctx, fc, []string{"a", "t"}, mem, rec)
			return err
		}},
		{"PATH GetFlightInfo+DoGet", "read a", func(ctx context.Context) error { return drain(ctx)(fc.GetFlightInfo(ctx, path)) }},
		{"PATH GetSchema", "read a", func(ctx context.Context) error { _, err := fc.GetSchema(ctx, path); return err }},
		{"ListFlights", "any", func(ctx context.Context) error {
			s, err := fc.ListFlights(ctx, &flight.Criteria{})
			return readAll(err, func() error { _, err := s.Recv(); return err })
		}},
		{"GetCatalogs", "any", func(ctx context.Context) error { return drain(ctx)(sc.GetCatalogs(ctx)) }},
		{"GetDBSchemas", "any", func(ctx context.Context) error {
			return drain(ctx)(sc.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{}))
		}},
		{"GetTables", "any", func(ctx context.Context) error {
			return drain(ctx)(sc.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true}))
		}},
		{"GetTableTypes", "any", func(ctx context.Context) error { return drain(ctx)(sc.GetTableTypes(ctx)) }},
		{"GetSqlInfo", "any", func(ctx context.Context) error { return drain(ctx)(sc.GetSqlInfo(ctx, nil)) }},
		{"GetXdbcTypeInfo", "any", func(ctx context.Context) error { return drain(ctx)(sc.GetXdbcTypeInfo(ctx, nil)) }},
		{"GetPrimaryKeys", "any", func(ctx context.Context) error {
			return drain(ctx)(sc.GetPrimaryKeys(ctx, flightsql.TableRef{Table: "t"}))
		}},
		{"SetSessionOptions", "any", func(ctx context.Context) error {
			_, err := sc.SetSessionOptions(ctx, &flight.SetSessionOptionsRequest{SessionOptions: map[string]*flight.SessionOptionValue{}})
			return err
		}},
		{"GetSessionOptions", "any", func(ctx context.Context) error {
			_, err := sc.GetSessionOptions(ctx, &flight.GetSessionOptionsRequest{})
			return err
		}},
		{"ListActions", "any", func(ctx context.Context) error {
			s, err := fc.ListActions(ctx, &flight.Empty{})
			return readAll(err, func() error { _, err := s.Recv(); return err })
		}},
		{"apron.token.list", "admin", func(ctx context.Context) error {
			_, err := tokenAction(ctx, fc, "", "apron.token.list", nil)
			return err
		}},
		{"apron.token.create", "admin", func(ctx context.Context) error {
			_, err := tokenAction(ctx, fc, "", "apron.token.create", map[string]any{"permissions": []any{perm("a", "read")}})
			return err
		}},
		{"apron.token.revoke", "admin", func(ctx context.Context) error {
			_, err := tokenAction(ctx, fc, "", "apron.token.revoke", map[string]any{"id": "0000000000000000"})
			if code, _ := grpcCode(err); code == codes.NotFound {
				return nil // authorized; no such token
			}
			return err
		}},
		{"Handshake", "any", func(ctx context.Context) error {
			s, err := fc.Handshake(ctx)
			if err == nil {
				err = s.CloseSend()
			}
			return readAll(err, func() error { _, err := s.Recv(); return err })
		}},
	}
}

// TestAuthEveryRPC: every RPC and action, with no token, a malformed, an
// unknown, an expired and a revoked one, is UNAUTHENTICATED; with a token
// lacking the permission PERMISSION_DENIED naming the database; with the
// permission (and with the admin token) it works. The gRPC health check
// needs no token.
func TestAuthEveryRPC(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after authCalls' cleanups
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	seed := sqlClient(t, srv.Addr, mem)
	for _, db := range []string{"a", "b"} {
		rec := idRecord(mem, 0, 10)
		if _, err := sqlIngest(bearer(ctx, srv.Admin), seed, db, "t", rec); err != nil {
			t.Fatalf("seeding %s: %v", db, err)
		}
		rec.Release()
	}
	readA, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read")}, "")
	writeA, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "write"), perm("c", "write")}, "")
	expired, _ := makeToken(t, fc, srv.Admin, []any{perm("*", "read", "write")}, "1s")
	revoked, revokedID := makeToken(t, fc, srv.Admin, []any{perm("*", "read", "write")}, "")
	if _, err := tokenAction(ctx, fc, srv.Admin, "apron.token.revoke", map[string]any{"id": revokedID}); err != nil {
		t.Fatal(err)
	}
	unknown := "apron_" + strings.Repeat("0", 16) + strings.Repeat("ab", 32)
	time.Sleep(1100 * time.Millisecond) // let "expired" expire
	calls := authCalls(t, srv.Addr, mem)

	refused := map[string]struct {
		ctx func(context.Context) context.Context
		why string
	}{
		"none":      {func(c context.Context) context.Context { return c }, "no credentials"},
		"malformed": {func(c context.Context) context.Context { return bearer(c, "not-a-token") }, "not an apron token"},
		"basic-bad": {func(c context.Context) context.Context {
			return metadata.AppendToOutgoingContext(c, "authorization", "Basic %%%")
		}, "base64"},
		"scheme": {func(c context.Context) context.Context {
			return metadata.AppendToOutgoingContext(c, "authorization", "Digest x")
		}, "bearer"},
		"unknown": {func(c context.Context) context.Context { return bearer(c, unknown) }, "unknown token"},
		"expired": {func(c context.Context) context.Context { return bearer(c, expired) }, "expired"},
		"revoked": {func(c context.Context) context.Context { return bearer(c, revoked) }, "revoked"},
	}
	for name, r := range refused {
		for _, c := range calls {
			err := c.run(r.ctx(ctx))
			code, msg := grpcCode(err)
			if code != codes.Unauthenticated || !strings.Contains(strings.ToLower(msg), r.why) {
				t.Errorf("%s token, %s: got %v %q, want UNAUTHENTICATED mentioning %q", name, c.name, code, msg, r.why)
			}
			for _, secret := range []string{expired, revoked, unknown} {
				if strings.Contains(msg, secret[len(secret)-20:]) {
					t.Errorf("%s token, %s: the error echoes the token: %q", name, c.name, msg)
				}
			}
		}
	}
	grants := map[string]map[string]bool{
		"read a":  {"any": true, "read a": true},
		"write a": {"any": true, "write a": true, "write c": true},
		"admin":   nil, // everything
	}
	tokens := map[string]string{"read a": readA, "write a": writeA, "admin": srv.Admin}
	for who, g := range grants {
		for _, c := range calls {
			err := c.run(bearer(ctx, tokens[who]))
			if g == nil || g[c.needs] {
				if err != nil {
					t.Errorf("token %q, %s: %v", who, c.name, err)
				}
				continue
			}
			code, msg := grpcCode(err)
			want := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(c.needs, "read "), "write "), "admin")
			if code != codes.PermissionDenied || !strings.Contains(msg, fmt.Sprintf("%q", want)) && c.needs != "admin" {
				t.Errorf("token %q, %s (needs %s): got %v %q, want PERMISSION_DENIED naming %q", who, c.name, c.needs, code, msg, want)
			}
		}
	}
	// The health check is for load balancers: no token.
	checkHealth(t, srv.Addr)
	// Failed authentications are counted.
	if !strings.Contains(srv.Stderr(), "authentication failed") {
		t.Error("no failed authentication was logged")
	}
}

// TestAuthBasicLogin: a Handshake with Basic user:token answers the
// bearer token in its headers, where arrow-go's client, the JDBC driver
// and pyarrow read it; the user name is ignored; a wrong password is
// UNAUTHENTICATED.
func TestAuthBasicLogin(t *testing.T) {
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	authed, err := fc.AuthenticateBasicToken(ctx, "anyone", srv.Admin)
	if err != nil {
		t.Fatalf("basic login: %v", err)
	}
	if _, err := tokenAction(authed, fc, "", "apron.token.list", nil); err != nil {
		t.Fatalf("call with the bearer token from the handshake: %v", err)
	}
	// The header itself, as clients that read only headers see it.
	hs, err := fc.Handshake(metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+srv.Admin))))
	if err != nil {
		t.Fatal(err)
	}
	hs.CloseSend()
	md, err := hs.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+srv.Admin {
		t.Fatalf("handshake response header authorization = %q", got)
	}
	if _, err := fc.AuthenticateBasicToken(ctx, "admin", "wrong"); err == nil {
		t.Fatal("a wrong password logged in")
	} else {
		wantCode(t, err, codes.Unauthenticated, "not an apron token")
	}
}

// TestAuthCrossDatabase: a token that may read database a reads nothing
// of b through any SQL shape, learns nothing of b's tables, and sees only
// a in the metadata and the system tables.
func TestAuthCrossDatabase(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	sc := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)
	for _, db := range []string{"a", "b"} {
		rec := idRecord(mem, 0, 10)
		if _, err := sqlIngest(bearer(ctx, srv.Admin), sc, db, "t", rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	tokA, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read", "write")}, "")
	actx := bearer(ctx, tokA)
	// Query tickets (one DoGet, flightsvc/queryticket.go) answer for the
	// token that sends them, with its permissions; without one, not at all.
	_, err := ticketRows(ctx, t, fc, mem, ticketJSON("a", "SELECT * FROM t"))
	wantCode(t, err, codes.Unauthenticated)
	_, err = ticketRows(bearer(ctx, "apron_not_a_token"), t, fc, mem, ticketJSON("a", "SELECT * FROM t"))
	wantCode(t, err, codes.Unauthenticated)
	if rows, err := ticketRows(actx, t, fc, mem, ticketJSON("a", "SELECT * FROM t")); err != nil || len(rows) != 10 {
		t.Errorf("a query ticket of a's token reading a: %d rows, %v", len(rows), err)
	}
	// Nor do they (or the database header) tell a database the token may
	// not read from one that does not exist.
	for _, db := range []string{"b", "B", "nope"} {
		_, err := ticketRows(actx, t, fc, mem, ticketJSON(db, "SELECT * FROM t"))
		wantCode(t, err, codes.PermissionDenied, fmt.Sprintf("%q", db))
		_, err = countSQL(metadata.AppendToOutgoingContext(actx, "database", db), sc, "SELECT 1")
		wantCode(t, err, codes.PermissionDenied, fmt.Sprintf("%q", db))
	}
	for _, q := range []string{
		"SELECT * FROM b.t",
		"SELECT * FROM B.T",
		`SELECT * FROM "b"."t"`,
		"SELECT * FROM apron.b.t",
		"SELECT * FROM b.no_such_table",
		"FROM b.t",
		"TABLE b.t",
		"SELECT * FROM a.t JOIN b.t USING (id)",
		"SELECT * FROM a.t WHERE id IN (SELECT id FROM b.t)",
		"SELECT (SELECT max(id) FROM b.t)",
		"WITH x AS (SELECT * FROM b.t) SELECT * FROM x",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r, b.t WHERE n < 3) SELECT * FROM r",
		"SELECT id FROM a.t UNION ALL SELECT id FROM b.t",
		"SELECT * FROM a.t, LATERAL (SELECT * FROM b.t WHERE b.t.id = a.t.id)",
		"SELECT * FROM a.t WHERE EXISTS (SELECT 1 FROM b.t)",
		"EXPLAIN SELECT * FROM b.t",
		"EXPLAIN ANALYZE SELECT * FROM b.t",
		"DESCRIBE b.t",
		"SUMMARIZE b.t",
		"SHOW ALL TABLES",
	} {
		_, err := countSQL(actx, sc, q)
		code, msg := grpcCode(err)
		if code != codes.PermissionDenied || !strings.Contains(msg, `"b"`) && !strings.Contains(msg, `"B"`) {
			t.Errorf("%s: got %v %q, want PERMISSION_DENIED naming database b", q, code, msg)
		}
		_, err = ticketRows(actx, t, fc, mem, ticketJSON("a", q))
		if code, msg := grpcCode(err); code != codes.PermissionDenied || !strings.Contains(msg, `"b"`) && !strings.Contains(msg, `"B"`) {
			t.Errorf("%s as a query ticket: got %v %q, want PERMISSION_DENIED naming database b", q, code, msg)
		}
	}
	for _, q := range []string{
		"INSERT INTO a.t SELECT * FROM b.t",
		"INSERT INTO b.t (time, id) VALUES (TIMESTAMP '2026-01-01 00:00:00', 1)",
		"INSERT INTO a.t SELECT * FROM a.t WHERE id IN (SELECT id FROM b.t)",
	} {
		_, err := sc.ExecuteUpdate(actx, q)
		wantCode(t, err, codes.PermissionDenied, "database")
	}
	// The current database is b: unqualified names resolve there.
	for _, q := range []string{"SELECT * FROM t", "SHOW TABLES", "DESCRIBE t"} {
		if _, err := countSQL(metadata.AppendToOutgoingContext(actx, "database", "b"), sc, q); err == nil {
			t.Errorf("%s with current database b was allowed", q)
		} else {
			wantCode(t, err, codes.PermissionDenied, `"b"`)
		}
	}
	if n, err := countSQL(metadata.AppendToOutgoingContext(actx, "database", "a"), sc, "SHOW TABLES"); err != nil || n != 1 {
		t.Errorf("SHOW TABLES in a: %d rows, %v", n, err)
	}
	// What a may read works.
	if n, err := countSQL(actx, sc, "SELECT * FROM a.t JOIN a.t AS u USING (id)"); err != nil || n != 10 {
		t.Errorf("self-join of a: %d rows, %v", n, err)
	}
	// System tables show a only.
	for q, want := range map[string]int64{
		"SELECT * FROM system.databases":                       1,
		"SELECT * FROM system.tables":                          1,
		"SELECT * FROM system.columns WHERE database_name='b'": 0,
		"SELECT * FROM system.tokens":                          0,
		"SELECT * FROM system.segments":                        0,
		"SELECT * FROM system.queries":                         1, // itself
	} {
		if n, err := countSQL(actx, sc, q); err != nil || n != want {
			t.Errorf("%s: %d rows (%v), want %d", q, n, err, want)
		}
	}
	if n, err := countSQL(bearer(ctx, srv.Admin), sc, "SELECT * FROM system.tokens"); err != nil || n != 2 {
		t.Errorf("admin system.tokens: %d rows (%v), want 2", n, err)
	}
	// Metadata lists a only.
	info, err := sc.GetDBSchemas(actx, &flightsql.GetDBSchemasOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readInfo(actx, sc, info); err != nil || n != 1 {
		t.Errorf("GetDBSchemas: %d rows (%v), want 1", n, err)
	}
	info, err = sc.GetTables(actx, &flightsql.GetTablesOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readInfo(actx, sc, info); err != nil || n != 1 {
		t.Errorf("GetTables: %d rows (%v), want 1", n, err)
	}
	lf, err := fc.ListFlights(actx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for {
		fi, err := lf.Recv()
		if err != nil {
			break
		}
		listed = append(listed, strings.Join(fi.GetFlightDescriptor().GetPath(), "."))
	}
	if strings.Join(listed, ",") != "a.t" {
		t.Errorf("ListFlights: %v, want [a.t]", listed)
	}
	_, err = fc.GetFlightInfo(actx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"b", "t"}})
	wantCode(t, err, codes.PermissionDenied, `"b"`)
}

// TestAuthHandlesBound: tickets, prepared statements and sessions made
// with one token cannot be used with another, not even an admin's.
func TestAuthHandlesBound(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	sc := sqlClient(t, srv.Addr, mem)
	ctx := testCtx(t)
	rec := idRecord(mem, 0, 10)
	defer rec.Release()
	if _, err := sqlIngest(bearer(ctx, srv.Admin), sc, "a", "t", rec); err != nil {
		t.Fatal(err)
	}
	tok1, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read")}, "")
	tok2, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read")}, "")
	one, two := bearer(ctx, tok1), bearer(ctx, tok2)

	info, err := sc.Execute(one, "SELECT * FROM a.t")
	if err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]context.Context{"other token": two, "admin": bearer(ctx, srv.Admin)} {
		_, err := readInfo(other, sc, info)
		wantCode(t, err, codes.PermissionDenied, "another token")
		_, err = sc.CancelFlightInfo(other, &flight.CancelFlightInfoRequest{Info: info})
		if code, _ := grpcCode(err); code != codes.PermissionDenied {
			t.Errorf("%s cancelling another token's query: %v", name, err)
		}
	}
	if n, err := readInfo(one, sc, info); err != nil || n != 10 {
		t.Fatalf("own ticket: %d rows, %v", n, err)
	}
	pathInfo, err := fc.GetFlightInfo(one, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "t"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = readInfo(two, sc, pathInfo)
	wantCode(t, err, codes.PermissionDenied, "another token")

	p, err := sc.Prepare(one, "SELECT * FROM a.t")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(one)
	// Redeem the handle with the other token through a prepared statement
	// object sharing it.
	stolen, err := sc.LoadPreparedStatementFromResult(&flightsql.CreatePreparedStatementResult{PreparedStatementHandle: p.Handle()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stolen.Execute(two)
	wantCode(t, err, codes.PermissionDenied, "another token")

	// A session is bound too: with another token, its cookie starts a
	// new, empty session.
	var hdr metadata.MD
	if _, err := sc.SetSessionOptions(one, &flight.SetSessionOptionsRequest{SessionOptions: map[string]*flight.SessionOptionValue{
		"schema": {OptionValue: &flightpb.SessionOptionValue_StringValue{StringValue: "a"}},
	}}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	cookie := sessionCookie(hdr)
	if cookie == "" {
		t.Fatal("no session cookie set")
	}
	got, err := sc.GetSessionOptions(metadata.AppendToOutgoingContext(two, "cookie", cookie), &flight.GetSessionOptionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.GetSessionOptions()["schema"]; ok {
		t.Error("another token read the session's options")
	}
	got, err = sc.GetSessionOptions(metadata.AppendToOutgoingContext(one, "cookie", cookie), &flight.GetSessionOptionsRequest{})
	if err != nil || got.GetSessionOptions()["schema"].GetStringValue() != "a" {
		t.Errorf("own session: %v %v", got, err)
	}
}

// TestAuthRevokeOpenStream: a token revoked while its DoPut stream is
// open fails at the stream's next batch; the rows acknowledged before
// stay.
func TestAuthRevokeOpenStream(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	tok, id := makeToken(t, fc, srv.Admin, []any{perm("a", "read", "write")}, "")
	stream, err := fc.DoPut(bearer(ctx, tok))
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(idSchema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "t"}})
	defer w.Close()
	send := func(from int64) error {
		rec := idRecord(mem, from, 5)
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			return err
		}
		_, err := stream.Recv()
		return err
	}
	if err := send(0); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if _, err := tokenAction(ctx, fc, srv.Admin, "apron.token.revoke", map[string]any{"id": id}); err != nil {
		t.Fatal(err)
	}
	err = send(5)
	wantCode(t, err, codes.Unauthenticated, "revoked")
	if n, err := countSQL(bearer(ctx, srv.Admin), sqlClient(t, srv.Addr, mem), "SELECT * FROM a.t"); err != nil || n != 5 {
		t.Fatalf("rows after the revocation: %d, %v; want the 5 acknowledged", n, err)
	}
}

// TestAuthTokensDurable: tokens made and revoked survive a restart and a
// kill -9 right after the action answered.
func TestAuthTokensDurable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	srv := startAuthServer(t, dir)
	ctx := testCtx(t)
	fc := flightClient(t, srv.Addr)
	kept, _ := makeToken(t, fc, srv.Admin, []any{perm("*", "read", "write")}, "")
	gone, goneID := makeToken(t, fc, srv.Admin, []any{perm("*", "read")}, "")
	if _, err := tokenAction(ctx, fc, srv.Admin, "apron.token.revoke", map[string]any{"id": goneID}); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t) // kill -9 just after the answers
	s2 := &authServer{server: startServerEnv(t, nil, srv.args, dir), Admin: srv.Admin}
	sc := sqlClient(t, s2.Addr, mem)
	rec := idRecord(mem, 0, 3)
	defer rec.Release()
	if _, err := sqlIngest(bearer(ctx, kept), sc, "a", "t", rec); err != nil {
		t.Fatalf("token made before kill -9: %v", err)
	}
	_, err := countSQL(bearer(ctx, gone), sc, "SELECT 1")
	wantCode(t, err, codes.Unauthenticated, "revoked")
	s3 := s2.Restart(t)
	if _, err := countSQL(bearer(ctx, kept), sqlClient(t, s3.Addr, mem), "SELECT count(*) FROM a.t"); err != nil {
		t.Fatalf("after a clean restart: %v", err)
	}
}

// sessionCookie is the "name=value" of the session cookie a response set.
func sessionCookie(md metadata.MD) string {
	for _, v := range md.Get("set-cookie") {
		if c, err := http.ParseSetCookie(v); err == nil && c.Name == "arrow_flight_session_id" {
			return c.Name + "=" + c.Value
		}
	}
	return ""
}
