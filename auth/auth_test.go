package auth

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apron-db/apron/catalog"
)

func newCatalog(t *testing.T, tokens ...*catalog.Token) (*catalog.Catalog, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	c, err := catalog.Load(path, catalog.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) > 0 {
		if err := c.ChangeTokens(path, catalog.TokenChange{Add: tokens}); err != nil {
			t.Fatal(err)
		}
	}
	return c, path
}

func TestGenerateAndParse(t *testing.T) {
	now := time.Now()
	tok, rec, err := Generate("d", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != TokenLen || !strings.HasPrefix(tok, Prefix) {
		t.Fatalf("token %d characters: %q…", len(tok), tok[:10])
	}
	id, ok := ParseID(tok)
	if !ok || id != rec.ID || rec.Hash != Hash(tok) || !rec.Created.Equal(now.UTC()) {
		t.Fatalf("ParseID %q %v, record %+v", id, ok, rec)
	}
	tok2, _, _ := Generate("d", now)
	if tok2 == tok {
		t.Fatal("two tokens alike")
	}
	for _, bad := range []string{"", tok[:len(tok)-1], tok + "0", "x" + tok[1:], strings.ToUpper(tok), tok[:20] + "g" + tok[21:]} {
		if _, ok := ParseID(bad); ok {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
}

// TestVerify: known tokens pass; unknown, wrong-secret, expired and
// revoked ones are refused saying which, without the token; Check notices
// a revocation after Verify.
func TestVerify(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	admin, adminRec, _ := Generate("admin", now)
	adminRec.Admin = true
	reader, readerRec, _ := Generate("reader", now)
	readerRec.Grants = []catalog.Grant{{Database: "metrics", Read: true}}
	readerRec.Expires = now.Add(time.Hour)
	c, path := newCatalog(t, adminRec, readerRec)
	clock := now
	v := NewVerifier(c, func() time.Time { return clock })

	p, err := v.Verify(admin)
	if err != nil || !p.Admin() || p.ID() != adminRec.ID {
		t.Fatalf("admin: %v %v", p, err)
	}
	p, err = v.Verify(reader)
	if err != nil {
		t.Fatal(err)
	}
	if !p.CanRead("metrics") || !p.CanRead("METRICS") || p.CanWrite("metrics") || p.CanRead("other") || p.Admin() || p.Metrics() {
		t.Fatal("reader's permissions wrong")
	}
	if err := p.Write("metrics"); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `"metrics"`) {
		t.Fatalf("Write: %v", err)
	}
	if v.LastUsed(readerRec.ID).IsZero() {
		t.Fatal("last use not recorded")
	}

	wrongSecret := reader[:len(reader)-4] + "0000"
	if wrongSecret == reader {
		wrongSecret = reader[:len(reader)-4] + "1111"
	}
	for name, c := range map[string]struct{ tok, reason string }{
		"malformed": {"Bearer x", "malformed"}, "unknown id": {Prefix + strings.Repeat("0", 80), "unknown"}, "wrong secret": {wrongSecret, "unknown"},
	} {
		_, err := v.Verify(c.tok)
		if !errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), c.tok[len(c.tok)/2:]) || Reason(err) != c.reason {
			t.Errorf("%s: %v (reason %q, want %q)", name, err, Reason(err), c.reason)
		}
	}
	clock = now.Add(2 * time.Hour)
	if _, err := v.Verify(reader); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") || Reason(err) != "expired" {
		t.Fatalf("expired: %v", err)
	}
	if err := p.Check(); err == nil {
		t.Fatal("Check of an expired token passed")
	}
	clock = now
	pa, _ := v.Verify(admin)
	second, secondRec, _ := Generate("second admin", now)
	secondRec.Admin = true
	if err := c.ChangeTokens(path, catalog.TokenChange{Add: []*catalog.Token{secondRec}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeTokens(path, catalog.TokenChange{Revoke: []string{adminRec.ID}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := pa.Check(); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") || Reason(err) != "revoked" {
		t.Fatalf("Check after revoke: %v", err)
	}
	if _, err := v.Verify(second); err != nil {
		t.Fatal(err)
	}
	var none *Principal
	if !none.CanWrite("x") || !none.Admin() || none.Check() != nil || none.ID() != "" {
		t.Fatal("a nil Principal (no authentication) must permit everything")
	}
}

func TestParseCreate(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tk, err := ParseCreate([]byte(`{"description":"g","permissions":[{"database":"b","actions":["read"]},{"database":"a","actions":["write"]},{"database":"a","actions":["read"]},{"actions":["metrics"]}],"expires_in":"30d"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if PermissionString(tk) != "read:a,write:a,read:b,metrics" || !tk.Expires.Equal(now.Add(30*24*time.Hour)) {
		t.Fatalf("%s, expires %s", PermissionString(tk), tk.Expires)
	}
	if tk, err := ParseCreate([]byte(`{"permissions":"admin"}`), now); err != nil || !tk.Admin {
		t.Fatalf("admin: %v", err)
	}
	for _, bad := range []string{
		``, `[]`, `{}`, `{"permissions":"root"}`, `{"permissions":[]}`,
		`{"permissions":[{"database":"a","actions":["delete"]}]}`,
		`{"permissions":[{"database":"a","actions":[]}]}`,
		`{"permissions":[{"actions":["read"]}]}`,
		`{"permissions":[{"database":"a","actions":["metrics"]}]}`,
		`{"permissions":[{"database":"a/b","actions":["read"]}]}`,
		`{"permissions":"admin","expires_in":"-1h"}`,
		`{"permissions":"admin","expires_in":"soon"}`,
		`{"permissions":"admin","colour":1}`,
		`{"permissions":"admin"} {}`,
	} {
		if _, err := ParseCreate([]byte(bad), now); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// BenchmarkVerify is the cost a token check adds to every call.
func BenchmarkVerify(b *testing.B) {
	tok, rec, _ := Generate("bench", time.Now())
	rec.Admin = true
	path := filepath.Join(b.TempDir(), "catalog.json")
	c, _ := catalog.Load(path, catalog.Limits{})
	if err := c.ChangeTokens(path, catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
		b.Fatal(err)
	}
	v := NewVerifier(c, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
