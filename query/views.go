//go:build duckdb_arrow

package query

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/catalog"
)

// viewSync keeps one DuckDB schema per Apron database and one view per
// table, made on a connection of their own, one sync at a time.
type viewSync struct {
	e *Engine
	// synced is the catalog version last synced, plus one (0: never).
	synced atomic.Uint64
	// bindMu is held (read) by a query from setting its file macros until
	// its statement is bound, and by sync (write) while it changes views.
	bindMu sync.RWMutex

	mu struct {
		sync.Mutex
		admin duck.Connection
		// DuckDB names are case-insensitive: by lower-cased name, the
		// Apron name that owns a schema or view.
		schemas map[string]string
		views   map[string]view
		warned  map[string]bool
		nextID  int
	}
}

type view struct {
	db, table string
	ncols     int
	// id names the view's file macro (0: none, the scan reads the files);
	// cols are its columns and empty the macro's body without files.
	id    int
	cols  []nativeCol
	empty string
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
	v.bindMu.Lock()
	defer v.bindMu.Unlock()
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
			if ok && cur.ncols == len(t.Columns) {
				continue
			}
			scan := fmt.Sprintf("SELECT * FROM %s(%s, %s, %d)",
				scanFunction, quoteLiteral(d.Name), quoteLiteral(t.Name), len(t.Columns))
			nv := view{db: d.Name, table: t.Name, ncols: len(t.Columns)}
			body := scan
			if v.e.cache != nil {
				cols, err := v.columns(scan, t.Columns)
				if err != nil {
					return fmt.Errorf("query: columns of table %q.%q: %w", d.Name, t.Name, err)
				}
				if cols != nil {
					v.mu.nextID++
					nv.id, nv.cols, nv.empty = v.mu.nextID, cols, emptyBody(cols)
					// The admin connection binds the view: its macro
					// stays empty.
					if err := exec(v.mu.admin, macroSQL(macroName(nv.id), nv.empty)); err != nil {
						return fmt.Errorf("query: file macro for table %q.%q: %w", d.Name, t.Name, err)
					}
					body = scan + " UNION ALL SELECT * FROM temp.main." + macroName(nv.id) + "()"
				}
			}
			stmt := fmt.Sprintf("CREATE OR REPLACE VIEW apron.%s.%s AS %s", quoteIdent(d.Name), quoteIdent(t.Name), body)
			if err := exec(v.mu.admin, stmt); err != nil {
				return fmt.Errorf("query: creating view for table %q.%q: %w", d.Name, t.Name, err)
			}
			v.mu.views[key] = nv
		}
	}
	v.synced.Store(snap.Version() + 1)
	return nil
}

func (v *viewSync) warnOnce(key, msg string, args ...any) {
	if v.mu.warned[key] {
		return
	}
	v.mu.warned[key] = true
	v.e.log.Warn(msg, args...)
}

// columns returns the names and DuckDB types of the columns of scan (a
// SELECT from apron_scan) and the Apron columns they come from; nil when
// the files cannot be read natively (names that differ only in case).
func (v *viewSync) columns(scan string, tcols []catalog.Column) ([]nativeCol, error) {
	rows, err := queryStrings(v.mu.admin, "SELECT column_name, column_type FROM (DESCRIBE "+scan+")")
	if err != nil {
		return nil, err
	}
	if len(rows) != len(tcols) {
		return nil, fmt.Errorf("%d columns, the catalog has %d", len(rows), len(tcols))
	}
	seen := map[string]bool{}
	cols := make([]nativeCol, len(rows))
	for i, r := range rows {
		l := strings.ToLower(tcols[i].Name)
		if seen[l] {
			return nil, nil
		}
		seen[l] = true
		cols[i] = nativeCol{name: r[0], src: tcols[i].Name, typ: r[1]}
	}
	return cols, nil
}
