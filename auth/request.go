package auth

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apron-db/apron/catalog"
)

// ErrInvalidRequest is wrapped by errors in a token request's body.
var ErrInvalidRequest = errors.New("invalid token request")

// Limits of a token request.
const (
	maxDescription = 1024
	maxGrants      = 1000
)

// CreateRequest is the body of apron.token.create:
//
//	{"description": "grafana",
//	 "permissions": [{"database": "metrics", "actions": ["read"]},
//	                 {"actions": ["metrics"]}]   // or "admin"
//	 "expires_in": "720h"}                       // or "30d"; absent: never
type CreateRequest struct {
	Description string          `json:"description"`
	Permissions json.RawMessage `json:"permissions"`
	ExpiresIn   string          `json:"expires_in"`
}

// Permission is one element of a permission list: actions read and/or
// write on a database (or "*"), or, without a database, metrics.
type Permission struct {
	Database string   `json:"database,omitempty"`
	Actions  []string `json:"actions"`
}

// ParseCreate reads an apron.token.create body and returns the token's
// catalog record with everything but its id and hash (which Generate
// fills). now is the creation time.
func ParseCreate(body []byte, now time.Time) (*catalog.Token, error) {
	var req CreateRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: the body must be a JSON object {\"description\", \"permissions\", \"expires_in\"}: %w", ErrInvalidRequest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: the body has data after its JSON object", ErrInvalidRequest)
	}
	if len(req.Description) > maxDescription {
		return nil, fmt.Errorf("%w: description is %d bytes, at most %d", ErrInvalidRequest, len(req.Description), maxDescription)
	}
	t := &catalog.Token{Description: req.Description, Created: now.UTC()}
	if err := parsePermissions(req.Permissions, t); err != nil {
		return nil, err
	}
	if req.ExpiresIn != "" {
		d, err := ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: expires_in %q: want a positive duration such as \"720h\" or \"30d\"", ErrInvalidRequest, req.ExpiresIn)
		}
		t.Expires = now.Add(d).UTC()
	}
	return t, nil
}

func parsePermissions(raw json.RawMessage, t *catalog.Token) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("%w: permissions missing: \"admin\" or a list such as [{\"database\": \"metrics\", \"actions\": [\"read\", \"write\"]}]", ErrInvalidRequest)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "admin" {
			return fmt.Errorf("%w: permissions %q: the one string allowed is \"admin\"; else give a list of {\"database\", \"actions\"}", ErrInvalidRequest, s)
		}
		t.Admin = true
		return nil
	}
	var perms []Permission
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&perms); err != nil {
		return fmt.Errorf("%w: permissions: want \"admin\" or a list of {\"database\": NAME or \"*\", \"actions\": [\"read\", \"write\"]} (or {\"actions\": [\"metrics\"]}): %w", ErrInvalidRequest, err)
	}
	if len(perms) == 0 {
		return fmt.Errorf("%w: permissions is empty: a token that may do nothing is of no use", ErrInvalidRequest)
	}
	if len(perms) > maxGrants {
		return fmt.Errorf("%w: %d permissions, at most %d (use \"*\" for every database)", ErrInvalidRequest, len(perms), maxGrants)
	}
	grants := map[string]*catalog.Grant{}
	for _, p := range perms {
		if len(p.Actions) == 0 {
			return fmt.Errorf("%w: permission for database %q has no actions", ErrInvalidRequest, p.Database)
		}
		if p.Database == "" {
			for _, a := range p.Actions {
				if a != "metrics" {
					return fmt.Errorf("%w: action %q needs a database (a name or \"*\"); only \"metrics\" goes without one", ErrInvalidRequest, a)
				}
			}
			t.Metrics = true
			continue
		}
		if p.Database != catalog.AllDatabases {
			if err := catalog.ValidateDatabaseName(p.Database); err != nil {
				return fmt.Errorf("%w: permissions: %w", ErrInvalidRequest, err)
			}
		}
		g := grants[p.Database]
		if g == nil {
			g = &catalog.Grant{Database: p.Database}
			grants[p.Database] = g
		}
		for _, a := range p.Actions {
			switch a {
			case "read":
				g.Read = true
			case "write":
				g.Write = true
			case "metrics":
				return fmt.Errorf("%w: \"metrics\" is not per database: give it as {\"actions\": [\"metrics\"]}", ErrInvalidRequest)
			default:
				return fmt.Errorf("%w: permissions: action %q on database %q: want \"read\" or \"write\"", ErrInvalidRequest, a, p.Database)
			}
		}
	}
	for _, g := range grants {
		t.Grants = append(t.Grants, *g)
	}
	slices.SortFunc(t.Grants, func(a, b catalog.Grant) int { return cmp.Compare(a.Database, b.Database) })
	return nil
}

// ParseDuration is time.ParseDuration that also takes whole days ("30d").
func ParseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(d, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// Permissions renders t's permissions as a create request takes them:
// "admin", or the list.
func Permissions(t *catalog.Token) any {
	if t.Admin {
		return "admin"
	}
	out := []Permission{}
	for _, g := range t.Grants {
		p := Permission{Database: g.Database}
		if g.Read {
			p.Actions = append(p.Actions, "read")
		}
		if g.Write {
			p.Actions = append(p.Actions, "write")
		}
		out = append(out, p)
	}
	if t.Metrics {
		out = append(out, Permission{Actions: []string{"metrics"}})
	}
	return out
}

// TokenInfo is one token as apron.token.list answers it.
type TokenInfo struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Permissions any        `json:"permissions"`
	Created     time.Time  `json:"created"`
	Expires     *time.Time `json:"expires"`
	LastUsed    *time.Time `json:"last_used"`
	Revoked     *time.Time `json:"revoked,omitempty"`
	CreatedBy   string     `json:"created_by,omitempty"`
}

// Info is t as apron.token.list shows it.
func (v *Verifier) Info(t *catalog.Token) TokenInfo {
	ti := TokenInfo{ID: t.ID, Description: t.Description, Permissions: Permissions(t), Created: t.Created, CreatedBy: t.CreatedBy}
	if !t.Expires.IsZero() {
		e := t.Expires
		ti.Expires = &e
	}
	if !t.Revoked.IsZero() {
		r := t.Revoked
		ti.Revoked = &r
	}
	if u := v.LastUsed(t.ID); !u.IsZero() {
		ti.LastUsed = &u
	}
	return ti
}

// PermissionString is t's permissions in one line: "admin", or e.g.
// "read:metrics,write:metrics,read:*,metrics".
func PermissionString(t *catalog.Token) string {
	if t.Admin {
		return "admin"
	}
	var parts []string
	for _, g := range t.Grants {
		if g.Read {
			parts = append(parts, "read:"+g.Database)
		}
		if g.Write {
			parts = append(parts, "write:"+g.Database)
		}
	}
	if t.Metrics {
		parts = append(parts, "metrics")
	}
	return strings.Join(parts, ",")
}
