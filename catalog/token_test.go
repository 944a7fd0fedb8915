package catalog

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

var tokenTime = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func testToken(id string, admin bool, grants ...Grant) *Token {
	return &Token{ID: id, Hash: sha256.Sum256([]byte("secret of " + id)), Description: "token " + id,
		Admin: admin, Grants: grants, Created: tokenTime}
}

// TestTokensSavedAndKept: a token change is in the file when it returns,
// survives a reload, and later schema changes keep the tokens.
func TestTokensSavedAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	reader := testToken("reader1", false, Grant{Database: "metrics", Read: true})
	reader.Expires = tokenTime.Add(time.Hour)
	if err := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("admin1", true), reader}}); err != nil {
		t.Fatal(err)
	}
	write(t, c, "metrics", "cpu", cpu())
	if _, ok := c.Snapshot().Token("admin1"); !ok {
		t.Fatal("a schema change dropped the tokens")
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := loaded.Snapshot().Token("reader1")
	if !ok || got.Hash != reader.Hash || !got.Expires.Equal(reader.Expires) || len(got.Grants) != 1 || !got.Grants[0].Read || got.Grants[0].Write {
		t.Fatalf("reloaded token %+v, want %+v", got, reader)
	}
	if _, ok := loaded.Table("metrics", "cpu"); !ok || loaded.Version() != c.Version() {
		t.Fatal("tables or version lost")
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(`"format_version": 2`)) || bytes.Contains(data, []byte("secret of")) {
		t.Fatalf("file is not format 2 or holds a secret:\n%s", data)
	}
}

// TestTokenRevoke: revoked tokens are kept marked, a second revoke and an
// unknown id are refused, the last admin token cannot go, and revoked
// tokens are forgotten after revokedKept.
func TestTokenRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c, _ := Load(path, Limits{})
	if err := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("admin1", true), testToken("admin2", true)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeTokens(path, TokenChange{Revoke: []string{"admin1"}, Now: tokenTime}); err != nil {
		t.Fatal(err)
	}
	if tk, _ := c.Snapshot().Token("admin1"); tk == nil || !tk.Revoked.Equal(tokenTime) {
		t.Fatalf("revoked token %+v", tk)
	}
	if err := c.ChangeTokens(path, TokenChange{Revoke: []string{"admin1"}}); !errors.Is(err, ErrTokenNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if err := c.ChangeTokens(path, TokenChange{Revoke: []string{"nope"}}); !errors.Is(err, ErrTokenNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	v := c.Version()
	if err := c.ChangeTokens(path, TokenChange{Revoke: []string{"admin2"}}); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("last admin: %v", err)
	}
	if c.Version() != v {
		t.Fatal("a refused change changed the catalog")
	}
	later := tokenTime.Add(revokedKept + time.Hour)
	if err := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("reader", false, Grant{Database: "*", Read: true})}, Now: later}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Snapshot().Token("admin1"); ok {
		t.Fatal("a token revoked long ago is still kept")
	}
}

// TestTokenValidation: what the rest of the server relies on is checked
// before anything is written.
func TestTokenValidation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c, _ := Load(path, Limits{})
	for name, tk := range map[string]*Token{
		"empty id":     testToken("", true),
		"upper id":     testToken("ABC", true),
		"no hash":      {ID: "x", Created: tokenTime, Admin: true},
		"no created":   {ID: "x", Hash: [32]byte{1}, Admin: true},
		"bad database": testToken("x", false, Grant{Database: "a/b", Read: true}),
		"no action":    testToken("x", false, Grant{Database: "a"}),
		"unsorted":     testToken("x", false, Grant{Database: "b", Read: true}, Grant{Database: "a", Read: true}),
	} {
		if err := c.ChangeTokens(path, TokenChange{Add: []*Token{tk}}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a refused change wrote the file")
	}
}

// TestTokenGoldenFile pins format_version 2 (catalog_v2.golden.json).
// Regenerate with APRON_UPDATE_GOLDEN=1.
func TestTokenGoldenFile(t *testing.T) {
	c := sample(t)
	path := filepath.Join(t.TempDir(), "catalog.json")
	reader := testToken("reader1", false, Grant{Database: "*", Read: true}, Grant{Database: "metrics", Write: true})
	reader.Metrics, reader.Expires, reader.CreatedBy = true, tokenTime.Add(720*time.Hour), "admin1"
	revoked := testToken("old1", false, Grant{Database: "metrics", Read: true})
	if err := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("admin1", true), reader, revoked}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeTokens(path, TokenChange{Revoke: []string{"old1"}, Now: tokenTime.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "catalog_v2.golden.json", c.Snapshot())
}

// TestTokenPowerLoss cuts the power at every operation of a token change
// (create, write, fsync, rename, directory fsync of the catalog file) and
// after a power loss at the worst moment the file system allows: the
// catalog always loads, and holds the new token whenever ChangeTokens had
// returned nil (and, when it had failed, either the old or the new
// catalog, never a mix).
func TestTokenPowerLoss(t *testing.T) {
	for n := 0; ; n++ {
		dir := t.TempDir()
		path := filepath.Join(dir, "catalog.json")
		c, err := Load(path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("first", true)}}); err != nil {
			t.Fatal(err)
		}
		fsys := waltest.New(wal.OSFS())
		c, err = LoadFS(fsys, path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		fsys.CrashAfter(n)
		changeErr := c.ChangeTokens(path, TokenChange{Add: []*Token{testToken("second", false, Grant{Database: "a", Read: true})}})
		crashed := fsys.Crashed()
		if err := fsys.PowerLoss(); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(path, Limits{})
		if err != nil {
			t.Fatalf("crash after %d ops: the catalog does not load: %v", n, err)
		}
		_, first := loaded.Snapshot().Token("first")
		_, second := loaded.Snapshot().Token("second")
		if !first {
			t.Fatalf("crash after %d ops: the earlier token is gone", n)
		}
		if changeErr == nil && !second {
			t.Fatalf("crash after %d ops: ChangeTokens returned nil but the token did not survive the power loss", n)
		}
		if !crashed {
			if changeErr != nil || !second {
				t.Fatalf("no crash: %v", changeErr)
			}
			t.Logf("power cut at each of the %d operations of a token change", n)
			return
		}
		if n > 100 {
			t.Fatal("the change never completed")
		}
	}
}
