package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
)

// Token management actions (admin only; JSON bodies, see auth.CreateRequest).
const (
	actionTokenCreate = "apron.token.create"
	actionTokenList   = "apron.token.list"
	actionTokenRevoke = "apron.token.revoke"
)

// maxActionBody bounds the body of Apron's own actions.
const maxActionBody = 1 << 20

var apronActions = []*flight.ActionType{
	{Type: actionTokenCreate, Description: `Make an API token (admin). Body: {"description": "...", "permissions": "admin" | [{"database": "db or *", "actions": ["read", "write"]}, {"actions": ["metrics"]}], "expires_in": "720h"}. Answers {"id", "token", ...}: the only time the token is shown.`},
	{Type: actionTokenList, Description: "List the API tokens (admin): one result per token, JSON {id, description, permissions, created, expires, last_used, revoked}."},
	{Type: actionTokenRevoke, Description: `Revoke an API token (admin). Body: {"id": "..."}. Calls with it fail from the next one on, open streams at their next batch.`},
	{Type: actionDatabaseUpdate, Description: `Change a database's settings (write on it). Body: {"database": "...", "retention": "30d" | "36h" | "none" | "default"}. Answers {"database", "retention", "effective_retention"}.`},
}

// createdToken answers apron.token.create.
type createdToken struct {
	Token string `json:"token"`
	auth.TokenInfo
}

// revokedToken answers apron.token.revoke.
type revokedToken struct {
	ID      string    `json:"id"`
	Revoked time.Time `json:"revoked"`
}

// apronAction serves the actions of apronActions; ok is false for any
// other action type.
func (s *SQLServer) apronAction(ctx context.Context, a *flight.Action, send func([]byte) error) (ok bool, err error) {
	switch a.GetType() {
	case actionTokenCreate, actionTokenList, actionTokenRevoke:
	case actionDatabaseUpdate:
		return true, s.updateDatabase(ctx, a.GetBody(), send)
	default:
		return false, nil
	}
	who := auth.FromContext(ctx)
	if err := who.RequireAdmin("manage tokens (" + a.GetType() + ")"); err != nil {
		return true, err
	}
	if len(a.GetBody()) > maxActionBody {
		return true, fmt.Errorf("%w: the action body is %d bytes, at most %d", errInvalidRequest, len(a.GetBody()), maxActionBody)
	}
	switch a.GetType() {
	case actionTokenCreate:
		return true, s.createToken(who, a.GetBody(), send)
	case actionTokenList:
		return true, s.listTokens(send)
	default:
		return true, s.revokeToken(who, a.GetBody(), send)
	}
}

func (s *SQLServer) createToken(who *auth.Principal, body []byte, send func([]byte) error) error {
	now := time.Now()
	rec, err := auth.ParseCreate(body, now)
	if err != nil {
		return err
	}
	tok, gen, err := auth.Generate(rec.Description, now)
	if err != nil {
		return err
	}
	rec.ID, rec.Hash, rec.CreatedBy = gen.ID, gen.Hash, who.ID()
	if err := s.wb.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{rec}}); err != nil {
		return fmt.Errorf("making the token: %w", err)
	}
	s.log.Info("token created", "id", rec.ID, "description", rec.Description, "permissions", auth.Permissions(rec),
		"expires", rec.Expires, "by", who.ID())
	out, err := json.Marshal(createdToken{Token: tok, TokenInfo: s.tokenInfo(rec)})
	if err != nil {
		return err
	}
	return send(out)
}

func (s *SQLServer) listTokens(send func([]byte) error) error {
	for _, t := range s.wb.Catalog().Snapshot().Tokens() {
		out, err := json.Marshal(s.tokenInfo(t))
		if err != nil {
			return err
		}
		if err := send(out); err != nil {
			return err
		}
	}
	return nil
}

func (s *SQLServer) revokeToken(who *auth.Principal, body []byte, send func([]byte) error) error {
	var req struct {
		ID string `json:"id"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.ID == "" {
		return fmt.Errorf("%w: the body must be {\"id\": \"<token id>\"} (apron.token.list shows the ids)", errInvalidRequest)
	}
	now := time.Now()
	if err := s.wb.ChangeTokens(catalog.TokenChange{Revoke: []string{req.ID}, Now: now}); err != nil {
		return fmt.Errorf("revoking token %q: %w", req.ID, err)
	}
	s.log.Info("token revoked", "id", req.ID, "by", who.ID())
	out, err := json.Marshal(revokedToken{ID: req.ID, Revoked: now.UTC()})
	if err != nil {
		return err
	}
	return send(out)
}

// tokenInfo is t as the list shows it; without authentication there is
// no verifier to know last uses.
func (s *SQLServer) tokenInfo(t *catalog.Token) auth.TokenInfo {
	if s.verifier == nil {
		return auth.NewVerifier(s.wb.Catalog(), nil).Info(t)
	}
	return s.verifier.Info(t)
}
