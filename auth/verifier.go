package auth

import (
	"crypto/subtle"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apron-db/apron/catalog"
)

// usedResolution is how often a token's last use is recorded: a busy
// token's calls do not all write the same cache line.
const usedResolution = time.Second

// Verifier checks tokens against the catalog's current snapshot.
type Verifier struct {
	cat  *catalog.Catalog
	now  func() time.Time
	used sync.Map // token id → *atomic.Int64, unix nanoseconds of the last use
}

// NewVerifier checks tokens against cat. now is the clock (nil: time.Now).
func NewVerifier(cat *catalog.Catalog, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{cat: cat, now: now}
}

// Verify returns the Principal of token, or an error wrapping
// ErrUnauthenticated that says whether the token is malformed, unknown,
// expired or revoked.
func (v *Verifier) Verify(token string) (*Principal, error) {
	id, ok := ParseID(token)
	if !ok {
		return nil, unauthenticated("malformed", fmt.Sprintf("the credential is not an Apron token (those start with %q and are %d characters long)", Prefix, TokenLen))
	}
	t, err := v.lookup(id, Hash(token))
	if err != nil {
		return nil, err
	}
	v.noteUse(id)
	return &Principal{tok: t, v: v}, nil
}

// lookup finds the token with id and hash in force.
func (v *Verifier) lookup(id string, hash [32]byte) (*catalog.Token, error) {
	t, ok := v.cat.Snapshot().Token(id)
	if !ok || subtle.ConstantTimeCompare(t.Hash[:], hash[:]) != 1 {
		// Not "wrong secret": whether an id exists is not the caller's
		// to learn without the token.
		return nil, unauthenticated("unknown", "unknown token: this server did not issue it (or its data dir was replaced); ask an admin for a token")
	}
	if !t.Revoked.IsZero() {
		return nil, unauthenticated("revoked", fmt.Sprintf("token %s was revoked at %s; ask an admin for a new one", t.ID, t.Revoked.UTC().Format(time.RFC3339)))
	}
	if !t.Expires.IsZero() && !v.now().Before(t.Expires) {
		return nil, unauthenticated("expired", fmt.Sprintf("token %s expired at %s; ask an admin for a new one", t.ID, t.Expires.UTC().Format(time.RFC3339)))
	}
	return t, nil
}

func (v *Verifier) noteUse(id string) {
	now := v.now().UnixNano()
	u, ok := v.used.Load(id)
	if !ok {
		u, _ = v.used.LoadOrStore(id, new(atomic.Int64))
	}
	last := u.(*atomic.Int64)
	if l := last.Load(); now-l >= int64(usedResolution) {
		last.CompareAndSwap(l, now)
	}
}

// LastUsed is when the token was last presented since the server started
// (to usedResolution), zero if not since then.
func (v *Verifier) LastUsed(id string) time.Time {
	if u, ok := v.used.Load(id); ok {
		if n := u.(*atomic.Int64).Load(); n != 0 {
			return time.Unix(0, n).UTC()
		}
	}
	return time.Time{}
}

// Catalog is the catalog tokens are checked against.
func (v *Verifier) Catalog() *catalog.Catalog { return v.cat }
