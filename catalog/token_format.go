package catalog

import (
	"encoding/hex"
	"fmt"
	"time"
)

// fileToken is a token in the catalog file (format_version 2):
//
//	{"id": "3f9c0a7be41d2c55", "sha256": "<64 hex digits>",
//	 "description": "grafana", "admin": false, "metrics": false,
//	 "databases": [{"name": "metrics", "read": true, "write": false}],
//	 "created": "2026-12-01T10:00:00Z", "expires": "2027-01-01T10:00:00Z",
//	 "created_by": "…", "revoked": "2026-12-05T08:00:00Z"}
type fileToken struct {
	ID          string      `json:"id"`
	SHA256      string      `json:"sha256"`
	Description string      `json:"description,omitempty"`
	Admin       bool        `json:"admin,omitempty"`
	Metrics     bool        `json:"metrics,omitempty"`
	Databases   []fileGrant `json:"databases,omitempty"`
	Created     time.Time   `json:"created"`
	Expires     *time.Time  `json:"expires,omitempty"`
	CreatedBy   string      `json:"created_by,omitempty"`
	Revoked     *time.Time  `json:"revoked,omitempty"`
}

type fileGrant struct {
	Name  string `json:"name"`
	Read  bool   `json:"read,omitempty"`
	Write bool   `json:"write,omitempty"`
}

func encodeToken(t *Token) fileToken {
	ft := fileToken{ID: t.ID, SHA256: hex.EncodeToString(t.Hash[:]), Description: t.Description, Admin: t.Admin,
		Metrics: t.Metrics, Created: t.Created.UTC(), CreatedBy: t.CreatedBy}
	if !t.Expires.IsZero() {
		e := t.Expires.UTC()
		ft.Expires = &e
	}
	if !t.Revoked.IsZero() {
		r := t.Revoked.UTC()
		ft.Revoked = &r
	}
	for _, g := range t.Grants {
		ft.Databases = append(ft.Databases, fileGrant{Name: g.Database, Read: g.Read, Write: g.Write})
	}
	return ft
}

func decodeToken(ft fileToken) (*Token, error) {
	t := &Token{ID: ft.ID, Description: ft.Description, Admin: ft.Admin, Metrics: ft.Metrics, Created: ft.Created, CreatedBy: ft.CreatedBy}
	h, err := hex.DecodeString(ft.SHA256)
	if err != nil || len(h) != len(t.Hash) {
		return nil, fmt.Errorf("token %q: sha256 is not 64 hex digits", ft.ID)
	}
	copy(t.Hash[:], h)
	if ft.Expires != nil {
		t.Expires = *ft.Expires
	}
	if ft.Revoked != nil {
		t.Revoked = *ft.Revoked
	}
	for _, g := range ft.Databases {
		t.Grants = append(t.Grants, Grant{Database: g.Name, Read: g.Read, Write: g.Write})
	}
	return t, nil
}
