package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

var printedTokenRE = regexp.MustCompile(`(?m)^\s+(apron_[0-9a-f]{80})\s*$`)

// TestAuthFirstStart: the first start of a data dir prints an admin token
// once on stderr, which works; the next start prints none and the token
// still works; the log never holds it.
func TestAuthFirstStart(t *testing.T) {
	dir := t.TempDir()
	s := startServerEnv(t, nil, authServerArgs(dir), dir)
	m := printedTokenRE.FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("no admin token printed at the first start:\n%s", s.Stderr())
	}
	tok := m[1]
	if !strings.Contains(s.Stderr(), "apron token create --admin --data-dir") {
		t.Error("the first start does not say how to make a new admin token")
	}
	ctx := testCtx(t)
	fc := flightClient(t, s.Addr)
	if _, err := tokenAction(ctx, fc, tok, "apron.token.list", nil); err != nil {
		t.Fatalf("the printed token: %v", err)
	}
	_, err := tokenAction(ctx, fc, "", "apron.token.list", nil)
	wantCode(t, err, codes.Unauthenticated, "no credentials")
	s2 := s.Restart(t)
	if strings.Count(s2.Stderr(), "apron_") != 0 {
		t.Fatalf("the second start printed a token:\n%s", s2.Stderr())
	}
	if _, err := tokenAction(ctx, flightClient(t, s2.Addr), tok, "apron.token.list", nil); err != nil {
		t.Fatalf("the printed token after a restart: %v", err)
	}
}

// TestAuthAdminTokenFile: a missing --admin-token-file is written (0600)
// with a new admin token, which the log does not show; an existing one is
// read, and made an admin token if the catalog lacks it; one that does
// not hold a token stops the start.
func TestAuthAdminTokenFile(t *testing.T) {
	s := startAuthServer(t, t.TempDir())
	file := s.args[len(s.args)-1]
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if strings.Contains(s.Stderr(), s.Admin) {
		t.Fatal("the log shows the admin token")
	}
	// The same file on a new data dir: its token becomes an admin token
	// there.
	dir2 := t.TempDir()
	s2 := startServerEnv(t, nil, authServerArgs(dir2, "--admin-token-file", file), dir2)
	if _, err := tokenAction(testCtx(t), flightClient(t, s2.Addr), s.Admin, "apron.token.list", nil); err != nil {
		t.Fatalf("the file's token on a new data dir: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir3 := t.TempDir()
	sb := launch(t, nil, authServerArgs(dir3, "--admin-token-file", bad))
	<-sb.done
	if out := sb.log.String(); !strings.Contains(out, "does not hold an Apron token") || strings.Contains(out, "hunter2") {
		t.Fatalf("a file without a token: %s", out)
	}
}

// TestAuthWithoutAuthOnNetwork: --without-auth on every interface is
// refused, unless --without-auth-on-network is given too, which starts
// with a warning.
func TestAuthWithoutAuthOnNetwork(t *testing.T) {
	code, out := startServerExpectFailure(t, t.TempDir(), "--addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(out, "--without-auth") || !strings.Contains(out, "--without-auth-on-network") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out = startServerExpectFailure(t, t.TempDir(), "--metrics-addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(out, "--metrics-addr") {
		t.Fatalf("metrics on the network without auth: exit %d:\n%s", code, out)
	}
	s := startServer(t, t.TempDir(), "--addr", "0.0.0.0:0", "--without-auth-on-network")
	if !strings.Contains(s.Stderr(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("no warning:\n%s", s.Stderr())
	}
}

// TestAuthMetrics: on a non-loopback address, /metrics needs a token with
// the metrics permission (or admin).
func TestAuthMetrics(t *testing.T) {
	s := startAuthServer(t, t.TempDir(), "--metrics-addr", "0.0.0.0:0")
	m := regexp.MustCompile(`metrics_addr=\S*:(\d+)`).FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("no metrics address:\n%s", s.Stderr())
	}
	url := "http://127.0.0.1:" + m[1] + "/metrics"
	fc := flightClient(t, s.Addr)
	reader, _ := makeToken(t, fc, s.Admin, []any{perm("*", "read")}, "")
	scraper, _ := makeToken(t, fc, s.Admin, []any{map[string]any{"actions": []string{"metrics"}}}, "")
	for name, c := range map[string]struct {
		token string
		want  int
	}{
		"none": {"", http.StatusUnauthorized}, "bad": {"apron_nope", http.StatusUnauthorized},
		"reader": {reader, http.StatusForbidden}, "metrics": {scraper, http.StatusOK}, "admin": {s.Admin, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", url, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: HTTP %d, want %d", name, resp.StatusCode, c.want)
		}
	}
	for _, p := range []string{"/debug/pprof/cmdline"} {
		resp, err := http.Get("http://127.0.0.1:" + m[1] + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: HTTP %d", p, resp.StatusCode)
		}
	}
}

// TestAuthTokenCLI: apron token create, list and revoke against the real
// server, with the admin token from APRON_TOKEN; the made token works,
// and once revoked fails.
func TestAuthTokenCLI(t *testing.T) {
	s := startAuthServer(t, t.TempDir())
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(apronBin, append([]string{"token"}, args...)...)
		cmd.Env = append(os.Environ(), "APRON_HOST="+s.Addr, "APRON_TOKEN="+s.Admin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := run("create", "--description", "cli", "--read", "a", "--write", "a")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, errOut)
	}
	tok := strings.TrimSpace(out)
	if !printedTokenRE.MatchString("  " + tok) {
		t.Fatalf("create printed %q", out)
	}
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := idRecord(mem, 0, 2)
	defer rec.Release()
	sc := sqlClient(t, s.Addr, mem)
	if _, err := sqlIngest(bearer(ctx, tok), sc, "a", "t", rec); err != nil {
		t.Fatalf("the CLI's token: %v", err)
	}
	out, errOut, err = run("list")
	if err != nil || !strings.Contains(out, "cli") || !strings.Contains(out, "read:a") {
		t.Fatalf("list: %v\n%s%s", err, out, errOut)
	}
	id := tok[len("apron_") : len("apron_")+16]
	if _, errOut, err = run("revoke", id); err != nil {
		t.Fatalf("revoke: %v\n%s", err, errOut)
	}
	_, err = sqlIngest(bearer(ctx, tok), sc, "a", "t", rec)
	wantCode(t, err, codes.Unauthenticated, "revoked")
	// Without a token the CLI says what the server said.
	cmd := exec.Command(apronBin, "token", "list", "--host", s.Addr)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "UNAUTHENTICATED") {
		t.Fatalf("list without a token: %v\n%s", err, b)
	}
}

// TestAuthHostileActionBodies: malformed bodies of the token actions are
// refused INVALID_ARGUMENT, saying what the body must be, and change
// nothing.
func TestAuthHostileActionBodies(t *testing.T) {
	s := startAuthServer(t, t.TempDir())
	fc := flightClient(t, s.Addr)
	ctx := testCtx(t)
	before, err := tokenAction(ctx, fc, s.Admin, "apron.token.list", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ action, body string }{
		{"apron.token.create", `{`},
		{"apron.token.create", `[]`},
		{"apron.token.create", `{"permissions": "root"}`},
		{"apron.token.create", `{"permissions": [{"database": "../x", "actions": ["read"]}]}`},
		{"apron.token.create", `{"permissions": [{"database": "a", "actions": ["drop"]}]}`},
		{"apron.token.create", `{"permissions": "admin", "expires_in": "-5m"}`},
		{"apron.token.create", `{"permissions": "admin", "extra": true}`},
		{"apron.token.create", `{"permissions": "admin"} trailing`},
		{"apron.token.create", `{"permissions": "admin", "description": "` + strings.Repeat("x", 2000) + `"}`},
		{"apron.token.create", `{"permissions": "admin", "description": "` + strings.Repeat("x", 2<<20) + `"}`},
		{"apron.token.revoke", ``},
		{"apron.token.revoke", `{"id": ""}`},
		{"apron.token.revoke", `{"id": "x", "also": "y"}`},
		{"apron.token.revoke", `"x"`},
	} {
		stream, err := fc.DoAction(bearer(ctx, s.Admin), &flight.Action{Type: c.action, Body: []byte(c.body)})
		if err == nil {
			_, err = stream.Recv()
		}
		body := c.body
		if len(body) > 60 {
			body = body[:60] + "…"
		}
		if code, msg := grpcCode(err); code != codes.InvalidArgument || !strings.Contains(msg, "body") && !strings.Contains(msg, "permissions") && !strings.Contains(msg, "expires_in") && !strings.Contains(msg, "description") {
			t.Errorf("%s %q: %v %q, want INVALID_ARGUMENT saying what is wrong", c.action, body, code, msg)
		}
	}
	after, err := tokenAction(ctx, fc, s.Admin, "apron.token.list", nil)
	if err != nil || len(after) != len(before) {
		t.Fatalf("tokens after the refused actions: %d (%v), before %d", len(after), err, len(before))
	}
}
