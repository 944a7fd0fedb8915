package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/metadata"
)

// authServer is a server with authentication on and its admin token (of
// --admin-token-file).
type authServer struct {
	*server
	Admin string
}

// startAuthServer starts apron with authentication, its admin token in a
// file of the test's temp dir.
func startAuthServer(t testing.TB, dataDir string, extra ...string) *authServer {
	t.Helper()
	file := filepath.Join(t.TempDir(), "admin-token")
	s := startServerEnv(t, nil, authServerArgs(dataDir, append([]string{"--admin-token-file", file}, extra...)...), dataDir)
	tok, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the admin token file: %v", err)
	}
	return &authServer{server: s, Admin: strings.TrimSpace(string(tok))}
}

// bearer is ctx sending token as a bearer token ("" sends nothing).
func bearer(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// tokenAction runs one of the apron.token.* actions and returns the
// bodies of its results.
func tokenAction(ctx context.Context, c flight.Client, token, typ string, body any) ([][]byte, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	stream, err := c.DoAction(bearer(ctx, token), &flight.Action{Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if err != nil {
			if strings.Contains(err.Error(), "EOF") {
				return out, nil
			}
			return out, err
		}
		out = append(out, r.Body)
	}
}

// makeToken creates a token with permissions (a list of {database,
// actions}, or "admin") and returns it with its id.
func makeToken(t testing.TB, c flight.Client, admin string, permissions any, expiresIn string) (token, id string) {
	t.Helper()
	body := map[string]any{"description": "test token", "permissions": permissions}
	if expiresIn != "" {
		body["expires_in"] = expiresIn
	}
	res, err := tokenAction(testCtx(t), c, admin, "apron.token.create", body)
	if err != nil || len(res) != 1 {
		t.Fatalf("apron.token.create: %v (%d results)", err, len(res))
	}
	var out struct{ ID, Token string }
	if err := json.Unmarshal(res[0], &out); err != nil || out.Token == "" {
		t.Fatalf("create answered %s: %v", res[0], err)
	}
	return out.Token, out.ID
}

// perm is one permission of a token.
func perm(db string, actions ...string) map[string]any {
	return map[string]any{"database": db, "actions": actions}
}
