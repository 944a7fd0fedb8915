package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/internal/testpki"
)

// clearClientEnv unsets APRON_<connection flag> for the test, so that the
// environment the tests run in does not leak into them.
func clearClientEnv(t *testing.T) {
	t.Helper()
	for _, n := range append(clientFlagNames, "data-dir", "force", "admin", "read", "write", "metrics", "description", "expires-in", "json") {
		env := "APRON_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
		t.Setenv(env, "")
		os.Unsetenv(env)
	}
}

// createBody parses args as apron token create's and returns the request
// body, decoded.
func createBody(t *testing.T, args ...string) map[string]any {
	t.Helper()
	f, err := parseTokenCreateFlags(args, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	body, err := f.request()
	if err != nil {
		t.Fatalf("request %q: %v", args, err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTokenCreateBodyMergesReadWrite(t *testing.T) {
	clearClientEnv(t)
	m := createBody(t, "--read", "a", "--write", "a", "--read", "b")
	want := `[{"actions":["read","write"],"database":"a"},{"actions":["read"],"database":"b"}]`
	if got := jsonOf(t, m["permissions"]); got != want {
		t.Fatalf("permissions %s, want %s", got, want)
	}
	if _, ok := m["expires_in"]; ok && m["expires_in"] != "" {
		t.Fatalf("expires_in %v, want none", m["expires_in"])
	}

	// Order is of first mention; read before write; metrics last; a
	// repeated flag counts once.
	m = createBody(t, "--write", "x", "--metrics", "--read", "*", "--read", "x", "--write", "x", "--description", "grafana", "--expires-in", "30d")
	want = `[{"actions":["read","write"],"database":"x"},{"actions":["read"],"database":"*"},{"actions":["metrics"]}]`
	if got := jsonOf(t, m["permissions"]); got != want {
		t.Fatalf("permissions %s, want %s", got, want)
	}
	if m["description"] != "grafana" || m["expires_in"] != "30d" {
		t.Fatalf("body %v", m)
	}
}

func TestTokenCreateBodyAdmin(t *testing.T) {
	clearClientEnv(t)
	m := createBody(t, "--admin", "--description", "ops", "--expires-in", "720h")
	if m["permissions"] != "admin" || m["description"] != "ops" || m["expires_in"] != "720h" {
		t.Fatalf("body %v", m)
	}
	// The server's parser agrees.
	f, err := parseTokenCreateFlags([]string{"--admin"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := f.request()
	rec, err := auth.ParseCreate(body, time.Now())
	if err != nil || !rec.Admin || !rec.Expires.IsZero() {
		t.Fatalf("ParseCreate(%s) = %+v, %v", body, rec, err)
	}
}

func TestTokenCreateFlagErrors(t *testing.T) {
	clearClientEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no permission given"},
		{[]string{"--description", "x"}, "no permission given"},
		{[]string{"--admin", "--data-dir", dir}, "--force"},
		{[]string{"--admin", "--data-dir", dir, "--force", "--host", "127.0.0.1:1"}, "--host"},
		{[]string{"--admin", "--data-dir", dir, "--force", "--token", "apron_x"}, "--token"},
		{[]string{"--admin", "--force"}, "--force is only for --data-dir"},
		{[]string{"--admin", "--read", "a"}, "--admin already permits everything"},
		{[]string{"--read", "a", "--expires-in", "soon"}, "--expires-in"},
		{[]string{"--read", "a", "--expires-in", "-1h"}, "--expires-in"},
		{[]string{"--read", ""}, "database name"},
		{[]string{"--write", " "}, "database name"},
		{[]string{"--read", "no such db!"}, "no such db!"},
		{[]string{"--admin", "grafana"}, "--description"},
	} {
		_, err := parseTokenCreateFlags(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "apron_x") {
			t.Errorf("%q: error %v shows the token", tc.args, err)
		}
	}
	// A bad flag is a usage error, reported by the flag package.
	var stderr bytes.Buffer
	_, err := parseTokenCreateFlags([]string{"--no-such-flag"}, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage: apron token create") {
		t.Fatalf("bad flag: %v, stderr %q", err, stderr.String())
	}
	if _, err := parseTokenCreateFlags([]string{"-h"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
}

// TestTokenCreateEnv: the connection flags come from APRON_HOST, … ; the
// others do not, so that APRON_DATA_DIR, set for the server, leaves
// apron token create a client command.
func TestTokenCreateEnv(t *testing.T) {
	clearClientEnv(t)
	t.Setenv("APRON_HOST", "grpc+tls://db.example.com:443")
	t.Setenv("APRON_TOKEN", "apron_secret")
	t.Setenv("APRON_DATA_DIR", t.TempDir())
	t.Setenv("APRON_FORCE", "true")
	f, err := parseTokenCreateFlags([]string{"--read", "a"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if f.client.host != "grpc+tls://db.example.com:443" || f.client.token != "apron_secret" || f.dataDir != "" || f.force {
		t.Fatalf("flags %+v", f)
	}
	f, err = parseTokenCreateFlags([]string{"--read", "a", "--host", "h:1"}, &bytes.Buffer{})
	if err != nil || f.client.host != "h:1" {
		t.Fatalf("command line over env: %+v, %v", f, err)
	}
	// Offline, the environment's connection settings are not a conflict.
	f, err = parseTokenCreateFlags([]string{"--admin", "--data-dir", t.TempDir(), "--force"}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("offline with APRON_HOST set: %v", err)
	}
	if f.description != defaultOfflineDescription {
		t.Fatalf("offline description %q", f.description)
	}
}

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		addr string
		tls  bool
	}{
		{"127.0.0.1:8082", "127.0.0.1:8082", false},
		{"localhost:1", "localhost:1", false},
		{"[::1]:8082", "[::1]:8082", false},
		{"grpc://db.example.com:8082", "db.example.com:8082", false},
		{"grpc+tcp://10.0.0.1:8082", "10.0.0.1:8082", false},
		{"grpc+tls://db.example.com:443", "db.example.com:443", true},
		{"GRPC+TLS://db.example.com:443/", "db.example.com:443", true},
	} {
		addr, useTLS, err := parseHost(tc.in)
		if err != nil || addr != tc.addr || useTLS != tc.tls {
			t.Errorf("parseHost(%q) = %q, %v, %v; want %q, %v", tc.in, addr, useTLS, err, tc.addr, tc.tls)
		}
	}
	for _, in := range []string{"", "http://h:1", "https://h:1", "grpc+unix:///tmp/s", "h", "grpc://h", ":8082", "grpc://u@h:1", "grpc://h:1/path", "grpc://h:1?x=1"} {
		if addr, _, err := parseHost(in); err == nil {
			t.Errorf("parseHost(%q) = %q, want an error", in, addr)
		}
	}
}

func TestDialOptionsTLSFlags(t *testing.T) {
	for _, c := range []clientFlags{
		{host: "127.0.0.1:1", tlsCA: "ca.pem"},
		{host: "grpc://127.0.0.1:1", tlsSkipVerify: true},
		{host: "grpc+tls://127.0.0.1:1", tlsCert: "c.pem"},
		{host: "grpc+tls://127.0.0.1:1", tlsCA: filepath.Join(t.TempDir(), "missing.pem")},
	} {
		if _, _, err := c.dialOptions(&bytes.Buffer{}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	var stderr bytes.Buffer
	c := clientFlags{host: "grpc+tls://127.0.0.1:1", tlsSkipVerify: true}
	if _, _, err := c.dialOptions(&stderr); err != nil || !strings.Contains(stderr.String(), "warning: --tls-skip-verify") {
		t.Fatalf("skip verify: %v, stderr %q", err, stderr.String())
	}
}

func TestTokenCommandUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"-h"}, {"nope"}} {
		var stderr bytes.Buffer
		err := tokenCommand(args, &bytes.Buffer{}, &stderr)
		for _, w := range []string{"create", "list", "revoke", "example"} {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%q: usage %q lacks %q", args, stderr.String(), w)
			}
		}
		want := 2
		if len(args) == 1 && args[0] == "-h" {
			want = 0
		}
		if code := exitCode(err, &bytes.Buffer{}); code != want {
			t.Errorf("%q: exit %d, want %d", args, code, want)
		}
	}
	var stderr bytes.Buffer
	if code := exitCode(errors.New("boom"), &stderr); code != 1 || stderr.String() != "apron: boom\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// firstLine is s's first line and whether there was exactly one.
func firstLine(s string) (string, bool) {
	line, rest, _ := strings.Cut(s, "\n")
	return line, rest == ""
}

// TestTokenCreateOffline: an admin token made in a stopped server's data
// dir is in its catalog; while a buffer holds the dir, it is refused.
func TestTokenCreateOffline(t *testing.T) {
	clearClientEnv(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	// A data dir a server has started on has a catalog; one without is
	// refused.
	if err := tokenCommand([]string{"create", "--admin", "--data-dir", dir, "--force"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "catalog.json") {
		t.Fatalf("data dir without a catalog: %v", err)
	}
	cfg := buffer.DefaultConfig()
	cfg.DataDir = dir
	wb, err := buffer.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tokenCommand([]string{"create", "--admin", "--data-dir", dir, "--force"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	token, one := firstLine(stdout.String())
	if !one || !auth.Valid(token) {
		t.Fatalf("stdout %q: want one line, the token", stdout.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Fatalf("stderr shows the token: %q", stderr.String())
	}
	for _, w := range []string{"only time", "store it now", "permissions admin", "expires never"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr %q lacks %q", stderr.String(), w)
		}
	}

	checkToken := func(token string, admin bool, desc string) {
		t.Helper()
		cat, err := catalog.Load(filepath.Join(dir, "catalog.json"), catalog.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := auth.ParseID(token)
		rec, ok := cat.Snapshot().Token(id)
		if !ok {
			t.Fatalf("token %s not in the catalog", id)
		}
		if rec.Hash != auth.Hash(token) || rec.Admin != admin || rec.Description != desc || !rec.Revoked.IsZero() || rec.CreatedBy != "" {
			t.Fatalf("catalog record %+v", rec)
		}
	}
	checkToken(token, true, defaultOfflineDescription)

	// A second one, with --json.
	stdout.Reset()
	stderr.Reset()
	if err := tokenCommand([]string{"create", "--admin", "--data-dir", dir, "--force", "--json", "--description", "second", "--expires-in", "1d"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var ct createdToken
	if err := json.Unmarshal(stdout.Bytes(), &ct); err != nil || ct.Expires == nil || string(ct.Permissions) != `"admin"` || ct.Description != "second" {
		t.Fatalf("--json stdout %q: %+v, %v", stdout.String(), ct, err)
	}
	checkToken(ct.Token, true, "second")

	// The server's buffer opens the catalog, and then holds the data dir.
	b, err := buffer.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stdout.Reset()
	err = tokenCommand([]string{"create", "--admin", "--data-dir", dir, "--force"}, &stdout, &stderr)
	if !errors.Is(err, buffer.ErrLocked) || !strings.Contains(err.Error(), "stop the server first") {
		t.Fatalf("create while the buffer is open: %v, want ErrLocked saying to stop the server", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("a failed create printed %q", stdout.String())
	}
}

func TestTokenCreateOfflineMissingDir(t *testing.T) {
	clearClientEnv(t)
	dir := filepath.Join(t.TempDir(), "missing")
	err := tokenCommand([]string{"create", "--admin", "--data-dir", dir, "--force"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("missing data dir: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the missing data dir was created")
	}
}

func TestPrintTokenList(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	used := now.Add(-time.Minute)
	past := now.Add(-time.Hour)
	future := now.Add(time.Hour)
	infos := []auth.TokenInfo{
		{ID: "00000000000000aa", Description: "root", Permissions: "admin", Created: created, LastUsed: &used},
		{ID: "00000000000000bb", Description: "grafana\tdash", Permissions: []auth.Permission{{Database: "metrics", Actions: []string{"read", "write"}}, {Actions: []string{"metrics"}}}, Created: created, Expires: &future},
		{ID: "00000000000000cc", Permissions: []auth.Permission{{Database: "*", Actions: []string{"read"}}}, Created: created, Expires: &past},
		{ID: "00000000000000dd", Description: "old", Permissions: "admin", Created: created, Revoked: &past, CreatedBy: "00000000000000aa"},
	}
	var results [][]byte
	for _, ti := range infos {
		b, err := json.MarshalIndent(ti, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, b)
	}
	var out bytes.Buffer
	if err := printTokenList(results, false, now, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", out.String())
	}
	col := strings.Index(lines[0], "PERMISSIONS")
	for i, w := range []string{"admin", "read:metrics,write:metrics,metrics", "read:*", "admin"} {
		if !strings.HasPrefix(lines[i+1][col:], w+" ") {
			t.Errorf("line %q: permissions column not %q", lines[i+1], w)
		}
	}
	for i, ws := range [][]string{
		{"root", "never", used.Format(time.RFC3339), "active"},
		{"grafana dash", future.Format(time.RFC3339), " - ", "active"},
		{" - ", "expired"},
		{"old", "revoked " + past.Format(time.RFC3339)},
	} {
		for _, w := range ws {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}

	out.Reset()
	if err := printTokenList(results, true, now, &out); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(infos) {
		t.Fatalf("--json: %q", out.String())
	}
	for i, l := range lines {
		var ti tokenInfo
		if err := json.Unmarshal([]byte(l), &ti); err != nil || ti.ID != infos[i].ID {
			t.Errorf("--json line %q: %+v, %v", l, ti, err)
		}
	}
}

func TestCallError(t *testing.T) {
	c := clientFlags{host: "127.0.0.1:8082", token: "apron_sekrit"}
	err := c.callError(actionTokenList, status.Error(codes.Unauthenticated, "unknown token: this server did not issue it"))
	if err.Error() != "UNAUTHENTICATED: unknown token: this server did not issue it" {
		t.Fatalf("%q", err)
	}
	err = c.callError(actionTokenList, status.Error(codes.PermissionDenied, "token apron_sekrit may not"))
	if !strings.HasPrefix(err.Error(), "PERMISSION_DENIED: ") || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("%q", err)
	}
	err = c.callError(actionTokenList, status.Error(codes.Unavailable, "connection refused"))
	if !strings.Contains(err.Error(), "UNAVAILABLE: connection refused (is apron serve running at 127.0.0.1:8082?") {
		t.Fatalf("%q", err)
	}
	var re *rpcError
	if !errors.As(err, &re) || re.Code != codes.Unavailable {
		t.Fatalf("%#v", err)
	}
	c.token = ""
	err = c.callError(actionTokenList, status.Error(codes.Unauthenticated, "no token"))
	if !strings.Contains(err.Error(), "set --token or APRON_TOKEN") {
		t.Fatalf("%q", err)
	}
}

// fakeTokenServer answers the token actions as the server's contract says,
// for the token tokenWant only.
type fakeTokenServer struct {
	flight.BaseFlightServer
	tokenWant string

	mu      sync.Mutex
	actions []*flight.Action
}

func (s *fakeTokenServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+s.tokenWant {
		return status.Error(codes.Unauthenticated, "unknown token: this server did not issue it (or its data dir was replaced); ask an admin for a token")
	}
	s.mu.Lock()
	s.actions = append(s.actions, a)
	s.mu.Unlock()
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return stream.Send(&flight.Result{Body: b})
	}
	now := time.Now().UTC().Truncate(time.Second)
	switch a.Type {
	case actionTokenCreate:
		rec, err := auth.ParseCreate(a.Body, now)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		tok, g, err := auth.Generate(rec.Description, now)
		if err != nil {
			return err
		}
		var exp *time.Time
		if !rec.Expires.IsZero() {
			exp = &rec.Expires
		}
		return send(map[string]any{"id": g.ID, "token": tok, "description": rec.Description, "permissions": auth.Permissions(rec), "created": now, "expires": exp})
	case actionTokenList:
		for _, ti := range []auth.TokenInfo{
			{ID: "00000000000000aa", Description: "root", Permissions: "admin", Created: now},
			{ID: "00000000000000bb", Permissions: []auth.Permission{{Database: "a", Actions: []string{"read"}}}, Created: now},
		} {
			if err := send(ti); err != nil {
				return err
			}
		}
		return nil
	case actionTokenRevoke:
		var req struct{ ID string }
		if err := json.Unmarshal(a.Body, &req); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if req.ID != "00000000000000bb" {
			return status.Errorf(codes.NotFound, "catalog: no token with id %q (apron.token.list shows the ids)", req.ID)
		}
		return send(map[string]any{"id": req.ID, "revoked": now})
	}
	return status.Errorf(codes.Unimplemented, "unknown action %q", a.Type)
}

// startFakeTokenServer serves fs on a loopback port and returns its address.
func startFakeTokenServer(t *testing.T, fs *fakeTokenServer, opts ...grpc.ServerOption) string {
	t.Helper()
	srv := flight.NewServerWithMiddleware(nil, opts...)
	if err := srv.Init("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv.RegisterFlightService(fs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve()
	}()
	t.Cleanup(func() {
		srv.Shutdown()
		<-done
	})
	return srv.Addr().String()
}

// TestTokenOnline runs create, list and revoke against a fake server that
// keeps the contract of the server's token actions.
func TestTokenOnline(t *testing.T) {
	clearClientEnv(t)
	admin, _, err := auth.Generate("admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeTokenServer{tokenWant: admin}
	addr := startFakeTokenServer(t, fs)
	t.Setenv("APRON_HOST", "grpc://"+addr)
	t.Setenv("APRON_TOKEN", admin)

	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		err := tokenCommand(args, &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := run("create", "--read", "a", "--write", "a", "--read", "b", "--expires-in", "30d", "--description", "etl")
	if err != nil {
		t.Fatal(err)
	}
	token, one := firstLine(stdout)
	if !one || !auth.Valid(token) {
		t.Fatalf("stdout %q", stdout)
	}
	if !strings.Contains(stderr, "permissions read:a,write:a,read:b") || !strings.Contains(stderr, "store it now") || strings.Contains(stderr, token) || strings.Contains(stderr, admin) {
		t.Fatalf("stderr %q", stderr)
	}
	var body map[string]any
	if err := json.Unmarshal(fs.actions[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, body["permissions"]); got != `[{"actions":["read","write"],"database":"a"},{"actions":["read"],"database":"b"}]` {
		t.Fatalf("create body %s", fs.actions[0].Body)
	}

	stdout, _, err = run("create", "--metrics", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ct createdToken
	if err := json.Unmarshal([]byte(stdout), &ct); err != nil || !auth.Valid(ct.Token) || string(ct.Permissions) != `[{"actions":["metrics"]}]` || ct.Expires != nil {
		t.Fatalf("--json %q: %+v, %v", stdout, ct, err)
	}

	stdout, _, err = run("list")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "admin") || !strings.Contains(lines[2], "read:a") {
		t.Fatalf("list:\n%s", stdout)
	}
	stdout, _, err = run("list", "--json")
	if err != nil || strings.Count(stdout, "\n") != 2 {
		t.Fatalf("list --json: %q, %v", stdout, err)
	}

	// Flags after the id are taken too.
	stdout, _, err = run("revoke", "00000000000000bb", "--host", "grpc+tcp://"+addr)
	if err != nil || stdout != "revoked token 00000000000000bb\n" {
		t.Fatalf("revoke: %q, %v", stdout, err)
	}
	_, _, err = run("revoke", "00000000000000ff")
	if err == nil || !strings.HasPrefix(err.Error(), "NOT_FOUND: catalog: no token") {
		t.Fatalf("revoke unknown: %v", err)
	}
	if _, _, err = run("revoke"); exitCode(err, &bytes.Buffer{}) != 2 {
		t.Fatalf("revoke without id: %v", err)
	}

	// A wrong token: the server's message and code, never the token.
	wrong, _, _ := auth.Generate("x", time.Now())
	_, _, err = run("list", "--token", wrong)
	if err == nil || !strings.HasPrefix(err.Error(), "UNAUTHENTICATED: unknown token") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("wrong token: %v", err)
	}
	var stderrBuf bytes.Buffer
	if code := exitCode(err, &stderrBuf); code != 1 || !strings.HasPrefix(stderrBuf.String(), "apron: UNAUTHENTICATED: unknown token") {
		t.Fatalf("exit %d, stderr %q", code, stderrBuf.String())
	}

	// Nobody listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	_, _, err = run("list", "--host", dead)
	if err == nil || !strings.HasPrefix(err.Error(), "UNAVAILABLE: ") {
		t.Fatalf("no server: %v", err)
	}
}

// TestTokenOnlineTLS: grpc+tls:// with --tls-ca, and a client certificate
// (--tls-cert, --tls-key) for a server that requires one.
func TestTokenOnlineTLS(t *testing.T) {
	clearClientEnv(t)
	pki := testpki.New(t, t.TempDir(), "apron test")
	admin, _, _ := auth.Generate("admin", time.Now())
	addr := startFakeTokenServer(t, &fakeTokenServer{tokenWant: admin}, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pki.Server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pki.CAPool(),
	})))
	t.Setenv("APRON_TOKEN", admin)
	t.Setenv("APRON_TLS_CA", pki.CAFile)

	host := "grpc+tls://" + addr
	var stdout bytes.Buffer
	err := tokenCommand([]string{"list", "--host", host, "--tls-cert", pki.ClientCertFile, "--tls-key", pki.ClientKeyFile}, &stdout, &bytes.Buffer{})
	if err != nil || !strings.Contains(stdout.String(), "read:a") {
		t.Fatalf("list over mTLS: %q, %v", stdout.String(), err)
	}
	// Without the client certificate the server refuses the handshake.
	if err := tokenCommand([]string{"list", "--host", host}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("list without a client certificate succeeded")
	}
	// Plain gRPC to a TLS server fails, and says to try grpc+tls://.
	t.Setenv("APRON_TLS_CA", "")
	os.Unsetenv("APRON_TLS_CA")
	err = tokenCommand([]string{"list", "--host", "grpc://" + addr}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "grpc+tls://") {
		t.Fatalf("plain to TLS: %v", err)
	}
	// The system roots do not know the test CA.
	err = tokenCommand([]string{"list", "--host", host, "--tls-cert", pki.ClientCertFile, "--tls-key", pki.ClientKeyFile}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("list with an unknown CA succeeded")
	}
}
