package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apron-db/apron/wal"
)

// DDL (CREATE and DROP of tables and databases) changes the catalog
// without a WAL record: like a token change, the catalog file is its log.
// Each change is saved (atomically, fsynced) before it is published, so
// it is in force exactly when it is durable, and a failed save changes
// nothing.
//
// # Drops
//
// A table's rows are found by name (the object layout and the WAL records
// name tables, see buffer/doc.go), so a dropped table leaves a Dropped
// record behind: rows of that name in segments From to To-1 belong to the
// dropped table (or to a dropped database's table), and every reader, the
// WAL replay and the persister skip them (Snapshot.Hidden). The write path
// makes sure no row of the dropped table is in a segment at or above To
// (it rolls the open segment over first), so a table of the same name
// created at once never shows an old row. A drop hides every segment
// below To (From 0); a range with a From is for rows that never became a
// table's (an aborted replace, replace.go).

// Dropped records a dropped table, or a dropped database when Table is
// empty.
type Dropped struct {
	Database string
	Table    string
	// ID is the dropped table's (or database's) id.
	ID uint64
	// From and To bound the segments (From inclusive, To exclusive) whose
	// rows of this name are the dropped ones.
	From, To uint64
}

// ColumnDef is a column of CREATE TABLE.
type ColumnDef struct {
	Name string
	Type arrow.DataType
}

// Hidden says whether the rows of db.table in segment seg were dropped,
// or are those of a replace in progress (replace.go): they are not the
// table the catalog has now (or will have, if it is created).
func (s *Snapshot) Hidden(db, table string, seg uint64) bool {
	if len(s.replacing) > 0 {
		if r := s.replacing[dropKey(db, table)]; r != nil && seg >= r.From {
			return true
		}
	}
	if len(s.dropped) == 0 {
		return false
	}
	idx := s.droppedIndex()
	for _, r := range idx[dropKey(db, "")] {
		if seg >= r.From && seg < r.To {
			return true
		}
	}
	for _, r := range idx[dropKey(db, table)] {
		if seg >= r.From && seg < r.To {
			return true
		}
	}
	return false
}

// dropKey is the key of db.table in the index of drops ("" table: the
// database).
func dropKey(db, table string) string { return db + "\x00" + table }

// droppedIndex groups the drops by name, built once per snapshot.
func (s *Snapshot) droppedIndex() map[string][]Dropped {
	s.droppedOnce.Do(func() {
		s.droppedByName = make(map[string][]Dropped, len(s.dropped))
		for _, d := range s.dropped {
			k := dropKey(d.Database, d.Table)
			s.droppedByName[k] = append(s.droppedByName[k], d)
		}
	})
	return s.droppedByName
}

// HasDropped says whether anything was ever dropped (or a replace is in
// progress); readers skip the per-table lookups when not.
func (s *Snapshot) HasDropped() bool { return len(s.dropped) > 0 || len(s.replacing) > 0 }

// DroppedList is every Dropped record, oldest first.
func (s *Snapshot) DroppedList() []Dropped { return slices.Clone(s.dropped) }

// CreateDatabase creates db, saving the catalog to path first. An
// existing db is ErrDatabaseExists unless ifNotExists, when nothing
// changes.
func (c *Catalog) CreateDatabase(path, db string, ifNotExists bool) (created bool, err error) {
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if _, ok := s.databases[db]; ok {
			if ifNotExists {
				return nil, nil
			}
			return nil, newError(ErrDatabaseExists, "catalog: database %s already exists", quoteName(db))
		}
		if err := checkNewDatabase(s, c.limits, db); err != nil {
			return nil, err
		}
		return applyChange(s, &Change{Database: db, NewDatabase: true})
	})
}

// CreateTable creates db.table with cols (one of them time, which becomes
// column 0; the others keep their order), creating db too if it does not
// exist. An existing table is ErrTableExists unless ifNotExists, when
// nothing changes (even if its columns differ, as in SQL).
func (c *Catalog) CreateTable(path, db, table string, cols []ColumnDef, ifNotExists bool) (created bool, err error) {
	fields := make([]arrow.Field, len(cols))
	for i, cd := range cols {
		fields[i] = arrow.Field{Name: cd.Name, Type: cd.Type, Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if err := s.ReplaceConflict(db, table); err != nil {
			return nil, err
		}
		if _, ok := s.Table(db, table); ok {
			if ifNotExists {
				return nil, nil
			}
			return nil, newError(ErrTableExists, "catalog: table %s already exists in database %s", quoteName(table), quoteName(db))
		}
		ch, err := planCreate(s, s.databases[db], c.limits, db, table, schema, WriteOptions{})
		if err != nil {
			return nil, err
		}
		return applyChange(s, ch)
	})
}

// DropTable drops db.table; liveFrom is the first segment that holds no
// row of it (every lower one is hidden). A missing table is ErrTableNotFound unless ifExists.
func (c *Catalog) DropTable(path, db, table string, liveFrom uint64, ifExists bool) (dropped bool, err error) {
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if err := s.ReplaceConflict(db, table); err != nil {
			return nil, err
		}
		d := s.databases[db]
		var t *Table
		if d != nil {
			t = d.Tables[table]
		}
		if t == nil {
			if ifExists {
				return nil, nil
			}
			return nil, tableNotFound(db, table, d != nil)
		}
		tables := make(map[string]*Table, len(d.Tables))
		for k, v := range d.Tables {
			if k != table {
				tables[k] = v
			}
		}
		nd := newDatabase(d.Name, d.ID, tables)
		nd.Retention = d.Retention
		next := s.withDatabase(nd, s.nextDatabaseID, s.nextTableID)
		next.dropped = withDrop(s.dropped, Dropped{Database: db, Table: table, ID: t.ID, To: liveFrom})
		next.lvcs = withoutCache(s.lvcs, func(l *LastValueCache) bool { return l.Database == db && l.Table == table })
		return next, nil
	})
}

// DropDatabase drops db and, with cascade, its tables; without cascade a
// database that has tables is ErrDatabaseNotEmpty. A missing database is
// ErrDatabaseNotFound unless ifExists.
func (c *Catalog) DropDatabase(path, db string, liveFrom uint64, cascade, ifExists bool) (dropped bool, err error) {
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if err := s.ReplaceConflict(db, ""); err != nil {
			return nil, err
		}
		d := s.databases[db]
		if d == nil {
			if ifExists {
				return nil, nil
			}
			return nil, newError(ErrDatabaseNotFound, "catalog: database %s does not exist", quoteName(db))
		}
		if len(d.Tables) > 0 && !cascade {
			names := make([]string, 0, 3)
			for _, t := range d.sorted {
				if len(names) == 3 {
					names = append(names, "…")
					break
				}
				names = append(names, t.Name)
			}
			return nil, newError(ErrDatabaseNotEmpty, "catalog: database %s has %d tables (%s); drop them first, or use DROP SCHEMA %s CASCADE",
				quoteName(db), len(d.Tables), strings.Join(names, ", "), quoteName(db))
		}
		dbs := make(map[string]*Database, len(s.databases))
		for k, v := range s.databases {
			if k != db {
				dbs[k] = v
			}
		}
		next := newSnapshot(s.version+1, dbs, s.nextDatabaseID, s.nextTableID)
		next.tokens, next.replacing = s.tokens, s.replacing
		next.lvcs = withoutCache(s.lvcs, func(l *LastValueCache) bool { return l.Database == db })
		next.dropped = withDrop(s.dropped, Dropped{Database: db, ID: d.ID, To: liveFrom})
		return next, nil
	})
}

// withDrop is drops with d, a drop of a whole prefix of segments (From 0),
// added: the ranges it covers (of the same name, or of the database's
// tables when d is the database's) go, so the records grow with the names
// dropped, not with every drop of them. drops is not modified.
func withDrop(drops []Dropped, d Dropped) []Dropped {
	out := make([]Dropped, 0, len(drops)+1)
	for _, o := range drops {
		// d hides every segment below d.To: a range of the same name (or
		// of one of the database's tables) that ends there is inside it.
		covered := o.To <= d.To && o.Database == d.Database && (d.Table == "" || o.Table == d.Table)
		if !covered {
			out = append(out, o)
		}
	}
	return append(out, d)
}

// checkNewDatabase checks the name and limits of a database to create.
func checkNewDatabase(s *Snapshot, lim Limits, db string) error {
	if err := ValidateDatabaseName(db); err != nil {
		return err
	}
	for _, o := range s.sorted {
		if strings.EqualFold(o.Name, db) {
			return newError(ErrInvalidName, "catalog: database %s differs from the existing database %s only in case, and SQL does not tell them apart",
				quoteName(db), quoteName(o.Name))
		}
	}
	if len(s.databases) >= lim.MaxDatabases {
		return newError(ErrLimitExceeded, "catalog: limit of %d databases reached (--max-databases); database %s not created",
			lim.MaxDatabases, quoteName(db))
	}
	return nil
}

// commitDDL computes the next snapshot with next (nil: nothing to do),
// saves it to path and only then publishes it. On error nothing changes.
func (c *Catalog) commitDDL(path string, next func(*Snapshot) (*Snapshot, error)) (bool, error) {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	n, err := next(c.snap.Load())
	if err != nil || n == nil {
		return false, err
	}
	if err := c.saveAndPublish(path, n); err != nil {
		return false, err
	}
	return true, nil
}

// saveAndPublish writes next to path and, once it is durable, makes it
// the current snapshot.
func (c *Catalog) saveAndPublish(path string, next *Snapshot) error {
	data, err := encodeSnapshot(next)
	if err != nil {
		return fmt.Errorf("catalog: save %s: %w", path, err)
	}
	c.save.Lock()
	defer c.save.Unlock()
	if err := wal.WriteFileAtomic(c.fsys(), path, data); err != nil {
		// Whether the new file replaced the old is unknown: the next Save
		// must write again.
		c.save.valid = false
		return fmt.Errorf("catalog: save %s: %w", path, err)
	}
	c.snap.Store(next)
	c.save.path, c.save.version, c.save.valid = path, next.version, true
	return nil
}
