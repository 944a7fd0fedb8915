package auth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apron-db/apron/catalog"
)

// Principal is the checked token a request runs as. The methods of a nil
// *Principal permit everything: that is a server running without
// authentication (--without-auth), where no request carries one. With
// authentication on, flightsvc refuses every call it cannot give a
// Principal, so a handler never sees nil then.
type Principal struct {
	tok *catalog.Token
	v   *Verifier
}

// ID is the token's id ("" for nil).
func (p *Principal) ID() string {
	if p == nil {
		return ""
	}
	return p.tok.ID
}

// Token is the token's catalog record (nil for nil).
func (p *Principal) Token() *catalog.Token {
	if p == nil {
		return nil
	}
	return p.tok
}

// Admin says whether the token is an admin token (true for nil).
func (p *Principal) Admin() bool { return p == nil || p.tok.Admin }

// Metrics says whether the token may read the metrics endpoints.
func (p *Principal) Metrics() bool { return p == nil || p.tok.Admin || p.tok.Metrics }

// CanRead says whether the token may read db.
func (p *Principal) CanRead(db string) bool { return p.grant(db, true) }

// CanWrite says whether the token may write db.
func (p *Principal) CanWrite(db string) bool { return p.grant(db, false) }

// Database names are compared without case, as SQL compares them: the
// catalog refuses two databases whose names differ only in case, so this
// never grants one for the other.
func (p *Principal) grant(db string, read bool) bool {
	if p == nil || p.tok.Admin {
		return true
	}
	for _, g := range p.tok.Grants {
		if g.Database == catalog.AllDatabases || strings.EqualFold(g.Database, db) {
			if read && g.Read || !read && g.Write {
				return true
			}
		}
	}
	return false
}

// Read is nil if the token may read db, else an error wrapping
// ErrPermissionDenied that names the database and the permission.
func (p *Principal) Read(db string) error {
	if p.CanRead(db) {
		return nil
	}
	return denied(fmt.Sprintf("token %s may not read database %q: it needs the read permission on it (apron.token.create with {\"database\": %q, \"actions\": [\"read\"]})", p.tok.ID, db, db))
}

// Write is Read for writing.
func (p *Principal) Write(db string) error {
	if p.CanWrite(db) {
		return nil
	}
	return denied(fmt.Sprintf("token %s may not write database %q: it needs the write permission on it (apron.token.create with {\"database\": %q, \"actions\": [\"write\"]})", p.tok.ID, db, db))
}

// RequireAdmin is nil for an admin token.
func (p *Principal) RequireAdmin(what string) error {
	if p.Admin() {
		return nil
	}
	return denied(fmt.Sprintf("token %s may not %s: that needs an admin token", p.tok.ID, what))
}

// Check is nil while the token is still in force: not revoked, not
// expired. A stream calls it before each batch.
func (p *Principal) Check() error {
	if p == nil {
		return nil
	}
	_, err := p.v.lookup(p.tok.ID, p.tok.Hash)
	return err
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the Principal of the request, nil if it has none
// (authentication is off).
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// LastUsed is when the token id was last presented (Verifier.LastUsed);
// zero for nil.
func (p *Principal) LastUsed(id string) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.v.LastUsed(id)
}
