package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The authentication and TLS tests of real client libraries: arrow-adbc's
// Go Flight SQL driver, Python's ADBC driver and pyarrow.flight, and the
// Flight SQL JDBC driver, each with the credentials and TLS options its
// users set (see pki_test.go for the TLS options of each).

// adbcOpen opens an ADBC Flight SQL connection to uri with the database
// options opts; the connection (if any) is closed at the end of the test.
// Opening does not fail for want of credentials (the driver ignores a
// failed GetSqlInfo), only a Basic login does.
func adbcOpen(t testing.TB, uri string, opts map[string]string, mem memory.Allocator) (adbc.Connection, error) {
	t.Helper()
	all := map[string]string{adbc.OptionKeyURI: uri}
	for k, v := range opts {
		all[k] = v
	}
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(all)
	if err != nil {
		return nil, err
	}
	cn, err := db.Open(testCtx(t))
	if err != nil {
		db.Close()
		return nil, err
	}
	t.Cleanup(func() {
		cn.Close()
		db.Close()
	})
	return cn, nil
}

// adbcCount runs sql (one row, one integer column: a count) over ADBC.
func adbcCount(ctx context.Context, cn adbc.Connection, sql string) (int64, error) {
	rdr, err := adbcQuery(ctx, cn, sql)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var vals []any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			vals = append(vals, rec.Column(0).GetOneForMarshal(i))
		}
	}
	if err := rdr.Err(); err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("%s: %d rows, want 1", sql, len(vals))
	}
	switch v := vals[0].(type) {
	case int64:
		return v, nil
	case uint64:
		return int64(v), nil
	case int32:
		return int64(v), nil
	}
	return 0, fmt.Errorf("%s: a %T %v, want an integer", sql, vals[0], vals[0])
}

// expectADBC is wantADBC saying what failed.
func expectADBC(t testing.TB, what string, err error, want adbc.Status, parts ...string) {
	t.Helper()
	var ae adbc.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: got %v (%T), want an ADBC error %v", what, err, err, want)
		return
	}
	if ae.Code != want {
		t.Errorf("%s: got ADBC status %v (%v), want %v", what, ae.Code, err, want)
		return
	}
	for _, p := range parts {
		if !stringsContainsFold(ae.Msg, p) {
			t.Errorf("%s: %q does not mention %q", what, ae.Msg, p)
		}
	}
}

// TestAuthADBCGo: the Go ADBC Flight SQL driver with a bearer token
// (adbc.flight.sql.authorization_header) and with a Basic login (username
// anything, password the token) ingests and reads back; a token that may
// only read a is refused the ingest into a (PERMISSION_DENIED, ADBC
// UNAUTHORIZED) but reads; no credentials and a wrong password are
// UNAUTHENTICATED.
func TestAuthADBCGo(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	t.Logf("client: arrow-adbc Go Flight SQL driver %s", moduleVersion("github.com/apache/arrow-adbc/go/adbc"))
	srv := startAuthServer(t, t.TempDir())
	fc := flightClient(t, srv.Addr)
	ctx := testCtx(t)
	uri := "grpc://" + srv.Addr
	rw, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read", "write")}, "")
	readA, _ := makeToken(t, fc, srv.Admin, []any{perm("a", "read")}, "")

	ways := []struct {
		name, table string
		opts        map[string]string
	}{
		{"bearer", "bearer", map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + rw}},
		{"basic", "basic", map[string]string{adbc.OptionKeyUsername: "anyone", adbc.OptionKeyPassword: rw}},
	}
	for i, w := range ways {
		cn, err := adbcOpen(t, uri, w.opts, mem)
		if err != nil {
			t.Fatalf("%s: open: %v", w.name, err)
		}
		// When the login's Handshake stream finishes, arrow-go's client
		// middleware hands the driver the stream's headers and trailers
		// joined, and the driver sends every authorization value in them
		// on each later call. A stream not read to io.EOF finishes in its
		// finalizer: collect it now, so that the calls below send what
		// the driver keeps for good.
		for range 3 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		n := int64(3 + i)
		rec := idRecord(mem, 0, n)
		got, err := adbcIngest(ctx, cn, "a", w.table, "adbc.ingest.mode.create", rec)
		rec.Release()
		if err != nil || got != n {
			t.Fatalf("%s: ingest: %d rows, %v; want %d", w.name, got, err, n)
		}
		if c, err := adbcCount(ctx, cn, "SELECT count(*) FROM a."+w.table); err != nil || c != n {
			t.Fatalf("%s: count: %d, %v; want %d", w.name, c, err, n)
		}
	}

	// Read only: the ingest is refused, the query works.
	cn, err := adbcOpen(t, uri, map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + readA}, mem)
	if err != nil {
		t.Fatalf("read-only token: open: %v", err)
	}
	rec := idRecord(mem, 100, 2)
	_, err = adbcIngest(ctx, cn, "a", "bearer", "adbc.ingest.mode.append", rec)
	rec.Release()
	expectADBC(t, "ingest with a read-only token", err, adbc.StatusUnauthorized, `"a"`)
	if c, err := adbcCount(ctx, cn, "SELECT count(*) FROM a.bearer"); err != nil || c != 3 {
		t.Errorf("read-only token: count: %d, %v; want 3 (the refused ingest wrote nothing)", c, err)
	}

	// No credentials: the driver opens (it ignores the failed GetSqlInfo);
	// every call is UNAUTHENTICATED.
	cn, err = adbcOpen(t, uri, nil, mem)
	if err != nil {
		expectADBC(t, "open without credentials", err, adbc.StatusUnauthenticated, "no credentials")
	} else {
		_, err = adbcCount(ctx, cn, "SELECT count(*) FROM a.bearer")
		expectADBC(t, "query without credentials", err, adbc.StatusUnauthenticated, "no credentials")
		rec := idRecord(mem, 100, 2)
		_, err = adbcIngest(ctx, cn, "a", "bearer", "adbc.ingest.mode.append", rec)
		rec.Release()
		expectADBC(t, "ingest without credentials", err, adbc.StatusUnauthenticated, "no credentials")
	}

	// A Basic login with a wrong password fails at open (the handshake);
	// a bearer header with an unknown token at the first call.
	_, err = adbcOpen(t, uri, map[string]string{adbc.OptionKeyUsername: "anyone", adbc.OptionKeyPassword: "wrong"}, mem)
	expectADBC(t, "basic login with a wrong password", err, adbc.StatusUnauthenticated, "not an apron token")
	unknown := "apron_" + strings.Repeat("0", 16) + strings.Repeat("ab", 32)
	cn, err = adbcOpen(t, uri, map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + unknown}, mem)
	if err != nil {
		t.Fatalf("open with an unknown bearer token: %v", err)
	}
	_, err = adbcCount(ctx, cn, "SELECT count(*) FROM a.bearer")
	expectADBC(t, "query with an unknown token", err, adbc.StatusUnauthenticated, "unknown token")
}

// TestAuthADBCGoTLS: the Go ADBC driver over TLS (grpc+tls://) trusting
// the test CA (tls_root_certs, PEM text) with a bearer token reads and
// writes; without the CA the connection fails on the certificate, over
// plaintext it fails, and without a token it is UNAUTHENTICATED. With
// mTLS, a client without a certificate fails and one with the test
// client certificate (mtls_cert_chain, mtls_private_key) works.
func TestAuthADBCGoTLS(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	pki := newTestPKI(t)
	ctx := testCtx(t)

	t.Run("tls", func(t *testing.T) {
		srv := startAuthServer(t, t.TempDir(), pki.ServerFlags(false)...)
		uri := "grpc+tls://" + srv.Addr
		cn, err := adbcOpen(t, uri, tlsOpts(t, pki, false, srv.Admin), mem)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		ingestAndCount(ctx, t, cn, "over TLS", 7, mem)

		// Not trusting the CA: the system roots do not know it.
		err = adbcOpenQuery(ctx, t, uri, bearerOpts(srv.Admin), "SELECT count(*) FROM a.t", mem)
		expectADBC(t, "TLS without the CA", err, adbc.StatusIO, "certificate")

		// Plaintext to the TLS port.
		err = adbcOpenQuery(ctx, t, "grpc://"+srv.Addr, bearerOpts(srv.Admin), "SELECT count(*) FROM a.t", mem)
		expectADBC(t, "plaintext to the TLS server", err, adbc.StatusIO)

		// TLS does not stand in for a token.
		err = adbcOpenQuery(ctx, t, uri, tlsOpts(t, pki, false, ""), "SELECT count(*) FROM a.t", mem)
		expectADBC(t, "TLS without a token", err, adbc.StatusUnauthenticated, "no credentials")
	})

	t.Run("mtls", func(t *testing.T) {
		srv := startAuthServer(t, t.TempDir(), pki.ServerFlags(true)...)
		uri := "grpc+tls://" + srv.Addr
		err := adbcOpenQuery(ctx, t, uri, tlsOpts(t, pki, false, srv.Admin), "SELECT 1", mem)
		// UNAVAILABLE; the message varies with when the client learns of
		// the refusal (TLS 1.3: "certificate required", "broken pipe" or
		// "connection reset").
		expectADBC(t, "mTLS without a client certificate", err, adbc.StatusIO)

		cn, err := adbcOpen(t, uri, tlsOpts(t, pki, true, srv.Admin), mem)
		if err != nil {
			t.Fatalf("open with the client certificate: %v", err)
		}
		ingestAndCount(ctx, t, cn, "over mTLS", 4, mem)

		// The client certificate does not stand in for a token.
		err = adbcOpenQuery(ctx, t, uri, tlsOpts(t, pki, true, ""), "SELECT count(*) FROM a.t", mem)
		expectADBC(t, "mTLS without a token", err, adbc.StatusUnauthenticated, "no credentials")
	})
}

// TestAuthPython runs testdata/auth_python.py: Python's ADBC driver with
// a bearer header and with username/password, over plaintext and TLS;
// pyarrow.flight's Basic login (authenticate_basic_token) and its bearer
// header on an admin action and a PATH DoGet, over plaintext and TLS; and
// the refusals (no credentials, wrong password, read-only token on
// another database or an admin action, TLS without the CA), each with the
// exception class and ADBC status its users catch. APRON_TEST_PYTHON as for TestPythonADBC.
func TestAuthPython(t *testing.T) {
	py := os.Getenv("APRON_TEST_PYTHON")
	if py == "" {
		skipClient(t, "APRON_TEST_PYTHON is not set: no Python with adbc_driver_flightsql and pyarrow (test.sh sets one up)")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	pki := newTestPKI(t)
	plain := startAuthServer(t, t.TempDir())
	secure := startAuthServer(t, t.TempDir(), pki.ServerFlags(false)...)
	seedTable(t, "grpc://"+plain.Addr, bearerOpts(plain.Admin), 10, mem)
	seedTable(t, "grpc+tls://"+secure.Addr, tlsOpts(t, pki, false, secure.Admin), 12, mem)
	readA, readID := makeToken(t, flightClient(t, plain.Addr), plain.Admin, []any{perm("a", "read")}, "")

	script, err := filepath.Abs(filepath.Join("testdata", "auth_python.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), py, script)
	cmd.Env = append(os.Environ(),
		"APRON_ADDR="+plain.Addr,
		"APRON_ADMIN="+plain.Admin,
		"APRON_READ_TOKEN="+readA,
		"APRON_READ_TOKEN_ID="+readID,
		"APRON_ROWS=10",
		"APRON_TLS_ADDR="+secure.Addr,
		"APRON_TLS_ADMIN="+secure.Admin,
		"APRON_TLS_CA="+pki.CA,
		"APRON_TLS_ROWS=12",
	)
	runClient(t, "python auth client", cmd)
}

// TestAuthJDBC runs testdata/JdbcAuthClient.java with the Flight SQL JDBC
// driver: user/password (a Basic handshake, then the bearer token it
// answers) and token= over plaintext, token= over TLS with tlsRootCerts
// (the test CA's PEM file) and over mTLS with clientCertificate and
// clientKey, each counting a seeded table; a wrong password, no
// credentials, an unknown token, TLS without the CA or without a token
// and mTLS without a client certificate fail with the right error. The
// driver needs no disableCertificateVerification nor hostname override
// for 127.0.0.1 (an IP SAN of the server certificate).
// APRON_TEST_JDBC_JAR as for TestJDBC.
func TestAuthJDBC(t *testing.T) {
	jar := os.Getenv("APRON_TEST_JDBC_JAR")
	if jar == "" {
		skipClient(t, "APRON_TEST_JDBC_JAR is not set: no Flight SQL JDBC driver (test.sh fetches one)")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the connections close
	pki := newTestPKI(t)
	plain := startAuthServer(t, t.TempDir())
	secure := startAuthServer(t, t.TempDir(), pki.ServerFlags(false)...)
	mutual := startAuthServer(t, t.TempDir(), pki.ServerFlags(true)...)
	seedTable(t, "grpc://"+plain.Addr, bearerOpts(plain.Admin), 10, mem)
	seedTable(t, "grpc+tls://"+secure.Addr, tlsOpts(t, pki, false, secure.Admin), 12, mem)
	seedTable(t, "grpc+tls://"+mutual.Addr, tlsOpts(t, pki, true, mutual.Admin), 14, mem)
	readA, _ := makeToken(t, flightClient(t, plain.Addr), plain.Admin, []any{perm("a", "read")}, "")

	src, err := filepath.Abs(filepath.Join("testdata", "JdbcAuthClient.java"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testCtx(t), "java", "--add-opens=java.base/java.nio=ALL-UNNAMED",
		"-cp", jar, src,
		plain.Addr, readA, "10",
		secure.Addr, secure.Admin, "12",
		mutual.Addr, mutual.Admin, "14",
		pki.CA, pki.ClientCert, pki.ClientKey)
	runClient(t, "JDBC auth client", cmd)
}

// runClient runs the client program cmd, whose output ends in "ok" when
// all its checks passed, and logs the output.
func runClient(t *testing.T, what string, cmd *exec.Cmd) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, out, stderr.String())
	}
	t.Logf("%s:\n%s", what, out)
}

// ingestAndCount creates table a.t with rows rows over cn and counts them
// back; what says how cn connects, for the failures.
func ingestAndCount(ctx context.Context, t testing.TB, cn adbc.Connection, what string, rows int64, mem memory.Allocator) {
	t.Helper()
	rec := idRecord(mem, 0, rows)
	n, err := adbcIngest(ctx, cn, "a", "t", "adbc.ingest.mode.create", rec)
	rec.Release()
	if err != nil || n != rows {
		t.Fatalf("ingest %s: %d rows, %v", what, n, err)
	}
	if c, err := adbcCount(ctx, cn, "SELECT count(*) FROM a.t"); err != nil || c != rows {
		t.Fatalf("count %s: %d, %v; want %d", what, c, err, rows)
	}
}

// adbcOpenQuery opens an ADBC connection to uri with opts and, if that
// works, runs sql (a count) on it; it returns the error of whichever
// failed, for the refusals the driver reports at either.
func adbcOpenQuery(ctx context.Context, t testing.TB, uri string, opts map[string]string, sql string, mem memory.Allocator) error {
	t.Helper()
	cn, err := adbcOpen(t, uri, opts, mem)
	if err == nil {
		_, err = adbcCount(ctx, cn, sql)
	}
	return err
}

// seedTable creates table a.t with rows rows over ADBC at uri with the
// database options opts.
func seedTable(t *testing.T, uri string, opts map[string]string, rows int64, mem memory.Allocator) {
	t.Helper()
	cn, err := adbcOpen(t, uri, opts, mem)
	if err != nil {
		t.Fatalf("seeding %s: open: %v", uri, err)
	}
	rec := idRecord(mem, 0, rows)
	defer rec.Release()
	if n, err := adbcIngest(testCtx(t), cn, "a", "t", "adbc.ingest.mode.create", rec); err != nil || n != rows {
		t.Fatalf("seeding %s: %d rows, %v", uri, n, err)
	}
}

// bearerOpts are the ADBC options of a bearer token.
func bearerOpts(token string) map[string]string {
	return map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + token}
}

// tlsOpts are the ADBC options of token (none if "") over TLS trusting
// the test CA, with the client certificate if mTLS.
func tlsOpts(t testing.TB, pki *testPKI, mTLS bool, token string) map[string]string {
	opts := map[string]string{}
	if token != "" {
		opts = bearerOpts(token)
	}
	opts[adbcflightsql.OptionSSLRootCerts] = readFile(t, pki.CA)
	if mTLS {
		opts[adbcflightsql.OptionMTLSCertChain] = readFile(t, pki.ClientCert)
		opts[adbcflightsql.OptionMTLSPrivateKey] = readFile(t, pki.ClientKey)
	}
	return opts
}

// readFile is the content of path.
func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
