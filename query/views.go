//go:build duckdb_arrow

package query

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/catalog"
)

// viewSync keeps one DuckDB schema per Apron database and one view per
// table, made on a connection of their own, one sync at a time.
type viewSync struct {
	e *Engine
	// synced is the catalog version last synced, plus one (0: never).
	synced atomic.Uint64

	mu struct {
		sync.Mutex
		admin duck.Connection
		// DuckDB names are case-insensitive: by lower-cased name, the
		// Apron name that owns a schema or view.
		schemas map[string]string
		views   map[string]view
		warned  map[string]bool
	}
}

type view struct {
	db, table string
	id        uint64 // the table's: a table dropped and made again is another
	ncols     int
	retention time.Duration // its database's, in force (retention.go)
}

func (v *viewSync) init(e *Engine) error {
	v.e = e
	v.mu.schemas = make(map[string]string)
	v.mu.views = make(map[string]view)
	v.mu.warned = make(map[string]bool)
	if duck.Connect(e.db, &v.mu.admin) == duck.StateError {
		return errors.New("query: connecting to DuckDB failed")
	}
	// The Flight SQL catalog is apron: tools that qualify names fully
	// (SELECT … FROM apron.db.table) must find them. DuckDB's own database
	// is "memory"; an attached in-memory one takes Apron's name, and every
	// connection USEs it.
	if err := exec(v.mu.admin, "ATTACH ':memory:' AS "+Catalog); err != nil {
		return fmt.Errorf("query: attaching the apron catalog: %w", err)
	}
	// Apron's times are UTC; so are DuckDB's casts of times with a zone.
	if err := exec(v.mu.admin, "SET GLOBAL TimeZone = 'UTC'"); err != nil {
		return fmt.Errorf("query: setting the time zone: %w", err)
	}
	if err := exec(v.mu.admin, "CREATE SCHEMA apron."+quoteIdent(SystemSchema)); err != nil {
		return fmt.Errorf("query: creating the system schema: %w", err)
	}
	for name := range systemTables {
		stmt := fmt.Sprintf("CREATE VIEW apron.%s.%s AS SELECT * FROM %s(%s, %s, 0)",
			quoteIdent(SystemSchema), quoteIdent(name), scanFunction, quoteLiteral(SystemSchema), quoteLiteral(name))
		if err := exec(v.mu.admin, stmt); err != nil {
			return fmt.Errorf("query: creating system.%s: %w", name, err)
		}
	}
	v.mu.schemas[SystemSchema] = SystemSchema
	// now() is DuckDB's TIMESTAMP WITH TIME ZONE, which DuckDB will not
	// compare with a TIMESTAMP_NS column: Apron's now() is the same
	// instant as a plain (UTC) TIMESTAMP, so that time > now() - INTERVAL
	// 5 MINUTE works. current_timestamp stays DuckDB's.
	if err := exec(v.mu.admin, "CREATE MACRO apron.main.now() AS CAST(get_current_timestamp() AS TIMESTAMP)"); err != nil {
		return fmt.Errorf("query: creating now(): %w", err)
	}
	return v.sync()
}

func (v *viewSync) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	duck.Disconnect(&v.mu.admin)
}

// sync makes the schemas and views match the catalog, if it changed since
// the last sync.
func (v *viewSync) sync() error {
	cat := v.e.wb.Catalog()
	if v.synced.Load() == cat.Version()+1 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	snap := cat.Snapshot()
	if v.synced.Load() == snap.Version()+1 {
		return nil
	}
	for _, d := range snap.Databases() {
		ld := strings.ToLower(d.Name)
		if owner, ok := v.mu.schemas[ld]; !ok {
			if err := exec(v.mu.admin, "CREATE SCHEMA IF NOT EXISTS apron."+quoteIdent(d.Name)); err != nil {
				return fmt.Errorf("query: creating schema for database %q: %w", d.Name, err)
			}
			v.mu.schemas[ld] = d.Name
		} else if owner != d.Name {
			v.warnOnce("database:"+d.Name, "database not queryable: its name differs only in case from another's",
				"database", d.Name, "other", owner)
			continue
		}
		for _, t := range d.TableList() {
			key := ld + "\x00" + strings.ToLower(t.Name)
			cur, ok := v.mu.views[key]
			if ok && cur.table != t.Name {
				v.warnOnce("table:"+d.Name+"."+t.Name, "table not queryable: its name differs only in case from another's",
					"database", d.Name, "table", t.Name, "other", cur.table)
				continue
			}
			retention := v.e.wb.EffectiveRetention(snap, d.Name)
			if ok && cur.id == t.ID && cur.ncols == len(t.Columns) && cur.retention == retention {
				continue
			}
			body := fmt.Sprintf("SELECT * FROM %s(%s, %s, %d)%s",
				scanFunction, quoteLiteral(d.Name), quoteLiteral(t.Name), len(t.Columns), retentionFilter(retention))
			nv := view{db: d.Name, table: t.Name, id: t.ID, ncols: len(t.Columns), retention: retention}
			stmt := fmt.Sprintf("CREATE OR REPLACE VIEW apron.%s.%s AS %s", quoteIdent(d.Name), quoteIdent(t.Name), body)
			if err := exec(v.mu.admin, stmt); err != nil {
				return fmt.Errorf("query: creating view for table %q.%q: %w", d.Name, t.Name, err)
			}
			v.mu.views[key] = nv
		}
	}
	if err := v.dropGoneLocked(snap); err != nil {
		return err
	}
	v.synced.Store(snap.Version() + 1)
	return nil
}

// dropGoneLocked drops the views of dropped tables and the schemas of
// dropped databases. Queries running on them keep what they bound.
func (v *viewSync) dropGoneLocked(snap *catalog.Snapshot) error {
	for key, cur := range v.mu.views {
		if _, ok := snap.Table(cur.db, cur.table); ok {
			continue
		}
		stmt := fmt.Sprintf("DROP VIEW IF EXISTS apron.%s.%s", quoteIdent(cur.db), quoteIdent(cur.table))
		if err := exec(v.mu.admin, stmt); err != nil {
			return fmt.Errorf("query: dropping the view of dropped table %q.%q: %w", cur.db, cur.table, err)
		}
		delete(v.mu.views, key)
	}
	for ld, owner := range v.mu.schemas {
		if owner == SystemSchema {
			continue
		}
		if _, ok := snap.Database(owner); ok {
			continue
		}
		if err := exec(v.mu.admin, "DROP SCHEMA IF EXISTS apron."+quoteIdent(owner)+" CASCADE"); err != nil {
			return fmt.Errorf("query: dropping the schema of dropped database %q: %w", owner, err)
		}
		delete(v.mu.schemas, ld)
	}
	return nil
}

func (v *viewSync) warnOnce(key, msg string, args ...any) {
	if v.mu.warned[key] {
		return
	}
	v.mu.warned[key] = true
	v.e.log.Warn(msg, args...)
}
