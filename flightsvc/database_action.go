package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
)

// actionDatabaseUpdate changes a database's settings: its retention
// (buffer/retention.go).
const actionDatabaseUpdate = "apron.database.update"

type databaseUpdate struct {
	Database  string  `json:"database"`
	Retention *string `json:"retention"`
}

// databaseSettings answers apron.database.update.
type databaseSettings struct {
	Database           string `json:"database"`
	Retention          string `json:"retention"`
	EffectiveRetention string `json:"effective_retention"`
}

func (s *SQLServer) updateDatabase(ctx context.Context, body []byte, send func([]byte) error) error {
	if len(body) > maxActionBody {
		return fmt.Errorf("%w: the action body is %d bytes, at most %d", errInvalidRequest, len(body), maxActionBody)
	}
	var req databaseUpdate
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("%w: %s body: %w; want {\"database\": \"...\", \"retention\": \"30d\"}", errInvalidRequest, actionDatabaseUpdate, err)
	}
	if req.Database == "" {
		return fmt.Errorf("%w: %s: no database", errInvalidRequest, actionDatabaseUpdate)
	}
	callFrom(ctx).setDatabase(req.Database)
	if err := auth.FromContext(ctx).Write(req.Database); err != nil {
		return err
	}
	if req.Retention == nil {
		return fmt.Errorf("%w: %s: nothing to change; the settings are: retention", errInvalidRequest, actionDatabaseUpdate)
	}
	r, err := catalog.ParseRetention(*req.Retention)
	if err != nil {
		return err
	}
	if _, err := s.wb.SetRetention(req.Database, r); err != nil {
		return err
	}
	snap := s.wb.Catalog().Snapshot()
	out, err := json.Marshal(databaseSettings{Database: req.Database, Retention: catalog.FormatRetention(r),
		EffectiveRetention: catalog.FormatRetention(s.wb.EffectiveRetention(snap, req.Database))})
	if err != nil {
		return err
	}
	return send(out)
}
