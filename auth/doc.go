// Package auth is Apron's authentication and authorization: API tokens,
// what they permit, and the checks every request goes through.
//
// # Tokens
//
// A token is "apron_" followed by a 16-hex-digit id and 64 hex digits of
// secret (256 random bits from crypto/rand): 86 characters of [a-z0-9_],
// safe in headers, URLs and shells. The id is public (lists show it); the
// catalog stores the SHA-256 of the whole token, never the token, which is
// shown once, when it is made. SHA-256 rather than a password hash:
// the secret is random and long, so there is nothing to brute-force, and
// a check costs a microsecond rather than the milliseconds bcrypt or
// argon2 would add to every call.
//
// Checking a token looks its id up in the current catalog snapshot (an
// atomic load and a map read: no lock that writers share) and compares
// hashes with crypto/subtle in constant time.
//
// # Permissions
//
// admin permits everything, managing tokens included. Otherwise a token
// has grants per database ("*" is every database, present and future) of
// read and/or write, and may have metrics (the HTTP /metrics and
// /debug/pprof/ endpoints). Creating a database is a write to it. The
// system tables are readable by every token, but show only rows of
// databases it can read (system.tokens: admins only).
//
// A Principal is a checked token for the span of one request; Check
// re-reads the catalog, so that a long stream (a DoPut, a DoGet) notices a
// revocation or an expiry at its next batch.
package auth
