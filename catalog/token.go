package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Token is an API token as the catalog stores it: never the token itself,
// only its SHA-256 (package auth makes and checks tokens). Tokens are
// immutable values: permissions are fixed when a token is made; a revoked
// token stays, marked, for revokedKept, so that its use is answered
// "revoked" rather than "unknown".
type Token struct {
	ID          string // public: part of the token, shown in lists
	Hash        [32]byte
	Description string
	// Admin may do everything, including managing tokens.
	Admin bool
	// Metrics may read the HTTP /metrics and /debug/pprof/ endpoints.
	Metrics bool
	// Grants are the per-database permissions, sorted by database; the
	// database "*" is every database.
	Grants  []Grant
	Created time.Time
	Expires time.Time // zero: never
	// CreatedBy is the id of the admin token that made this one; "" when
	// made at bootstrap or offline.
	CreatedBy string
	Revoked   time.Time // zero: in force
}

// Grant is what a token may do in one database (or "*", all of them).
type Grant struct {
	Database    string
	Read, Write bool
}

// AllDatabases in a Grant stands for every database, present and future.
const AllDatabases = "*"

// ErrTokenNotFound is wrapped when a token id is not in the catalog.
var ErrTokenNotFound = errors.New("catalog: token not found")

// ErrLastAdmin is wrapped when a change would leave no admin token: then
// nobody could manage tokens without stopping the server.
var ErrLastAdmin = errors.New("catalog: last admin token")

// ErrTooManyTokens is wrapped when a token would be one too many.
var ErrTooManyTokens = errors.New("catalog: too many tokens")

const (
	// tokenIDMax bounds a token id's length in a loaded file.
	tokenIDMax = 64
	// MaxTokens bounds the tokens kept, revoked ones included: every
	// change rewrites the catalog file.
	MaxTokens = 10000
	// revokedKept is how long a revoked token is remembered.
	revokedKept = 30 * 24 * time.Hour
)

// Token returns the token with that id.
func (s *Snapshot) Token(id string) (*Token, bool) {
	t, ok := s.tokens[id]
	return t, ok
}

// Tokens returns every token, oldest first (then by id).
func (s *Snapshot) Tokens() []*Token {
	out := slices.Collect(maps.Values(s.tokens))
	slices.SortFunc(out, func(a, b *Token) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// NumTokens is the number of tokens.
func (s *Snapshot) NumTokens() int { return len(s.tokens) }

// TokenChange adds and removes tokens in one step.
type TokenChange struct {
	Add    []*Token
	Revoke []string  // ids
	Now    time.Time // when: the revocation time; zero: time.Now()
	// AllowNoAdmin lets a change leave no admin token (tests only).
	AllowNoAdmin bool
}

// ChangeTokens applies ch and saves the catalog to path before anything
// else sees it: when it returns nil the change is durable (the catalog
// file is replaced atomically and fsynced) and in force; on error nothing
// changed. A revoke of an id that does not exist wraps ErrTokenNotFound;
// one that would leave no admin token (there is one) wraps ErrLastAdmin.
//
// Token changes are not WAL records: they are rare, small, and need no
// ordering with writes, so the catalog file is their log. They bump the
// catalog version like any change, so the file travels to the object
// store as catalogs/<version>.json.
func (c *Catalog) ChangeTokens(path string, ch TokenChange) error {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	s := c.snap.Load()
	next, err := withTokens(s, ch)
	if err != nil {
		return err
	}
	return c.saveAndPublish(path, next)
}

// withTokens is the next version of s with ch applied.
func withTokens(s *Snapshot, ch TokenChange) (*Snapshot, error) {
	tokens := maps.Clone(s.tokens)
	if tokens == nil {
		tokens = map[string]*Token{}
	}
	now := ch.Now
	if now.IsZero() {
		now = time.Now()
	}
	for id, t := range tokens {
		if !t.Revoked.IsZero() && now.Sub(t.Revoked) > revokedKept {
			delete(tokens, id)
		}
	}
	for _, id := range ch.Revoke {
		t, ok := tokens[id]
		if !ok {
			return nil, newError(ErrTokenNotFound, "catalog: no token with id %q (apron.token.list shows the ids)", id)
		}
		if !t.Revoked.IsZero() {
			return nil, newError(ErrTokenNotFound, "catalog: token %q was already revoked at %s", id, t.Revoked.UTC().Format(time.RFC3339))
		}
		r := *t
		r.Revoked = now
		tokens[id] = &r
	}
	if len(tokens)+len(ch.Add) > MaxTokens {
		return nil, newError(ErrTooManyTokens, "catalog: %d tokens are kept (revoked ones for 30 days), at most %d: revoke unused tokens", len(tokens), MaxTokens)
	}
	for _, t := range ch.Add {
		if err := validateToken(t); err != nil {
			return nil, err
		}
		if _, ok := tokens[t.ID]; ok {
			return nil, fmt.Errorf("catalog: token id %q is in use", t.ID)
		}
		tokens[t.ID] = t
	}
	if !ch.AllowNoAdmin && len(ch.Revoke) > 0 && !hasAdmin(tokens) {
		return nil, newError(ErrLastAdmin, "catalog: revoking the last admin token would leave no way to manage tokens: create another admin token first (or, on a stopped server, apron token create --admin --data-dir DIR --force)")
	}
	next := newSnapshot(s.version+1, s.databases, s.nextDatabaseID, s.nextTableID)
	next.dropped, next.replacing, next.lvcs = s.dropped, s.replacing, s.lvcs
	next.tokens = tokens
	return next, nil
}

func hasAdmin(tokens map[string]*Token) bool {
	for _, t := range tokens {
		if t.Admin && t.Revoked.IsZero() {
			return true
		}
	}
	return false
}

// validateToken checks what the rest of the server relies on.
func validateToken(t *Token) error {
	if t.ID == "" || len(t.ID) > tokenIDMax || strings.ContainsFunc(t.ID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		return fmt.Errorf("catalog: token id %q: want 1-%d characters of a-z and 0-9", t.ID, tokenIDMax)
	}
	if t.Hash == [32]byte{} {
		return fmt.Errorf("catalog: token %s has no hash", t.ID)
	}
	if t.Created.IsZero() {
		return fmt.Errorf("catalog: token %s has no creation time", t.ID)
	}
	if !slices.IsSortedFunc(t.Grants, func(a, b Grant) int { return cmp.Compare(a.Database, b.Database) }) {
		return fmt.Errorf("catalog: token %s: grants not sorted by database", t.ID)
	}
	for i, g := range t.Grants {
		if g.Database != AllDatabases {
			if err := ValidateDatabaseName(g.Database); err != nil {
				return fmt.Errorf("catalog: token %s: %w", t.ID, err)
			}
		}
		if i > 0 && t.Grants[i-1].Database == g.Database {
			return fmt.Errorf("catalog: token %s: database %q granted twice", t.ID, g.Database)
		}
		if !g.Read && !g.Write {
			return fmt.Errorf("catalog: token %s: database %q granted nothing", t.ID, g.Database)
		}
	}
	return nil
}
