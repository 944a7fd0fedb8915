package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/apron-db/apron/catalog"
)

// Prefix starts every token, so that secret scanners and people recognise
// one.
const Prefix = "apron_"

const (
	idBytes     = 8
	secretBytes = 32
	idLen       = 2 * idBytes
	// TokenLen is the length of a token.
	TokenLen = len(Prefix) + idLen + 2*secretBytes
)

// Generate returns a new token and its catalog record, not yet stored.
func Generate(description string, now time.Time) (string, *catalog.Token, error) {
	var raw [idBytes + secretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("auth: reading random bytes: %w", err)
	}
	tok := Prefix + hex.EncodeToString(raw[:])
	rec := &catalog.Token{ID: tok[len(Prefix) : len(Prefix)+idLen], Hash: Hash(tok), Description: description, Created: now.UTC()}
	return tok, rec, nil
}

// Hash is what the catalog stores of a token.
func Hash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// ParseID returns the id inside a token, or false if s is not shaped like
// one (so that a wrong header is told apart from an unknown token).
func ParseID(s string) (string, bool) {
	if len(s) != TokenLen || !strings.HasPrefix(s, Prefix) {
		return "", false
	}
	for i := len(Prefix); i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return s[len(Prefix) : len(Prefix)+idLen], true
}

// Valid reports whether s is shaped like a token (ParseID succeeds).
func Valid(s string) bool {
	_, ok := ParseID(s)
	return ok
}
