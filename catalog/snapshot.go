package catalog

import (
	"slices"
	"strings"
	"sync"
)

// Snapshot is an immutable view of the catalog at one version. Readers hold
// on to a snapshot for the duration of a query so that every table they
// look at comes from the same version.
type Snapshot struct {
	version   uint64
	databases map[string]*Database
	sorted    []*Database // databases sorted by name
	numTables int         // across all databases, for --max-tables

	// IDs handed out next. IDs are never reused, so they outlive drops and
	// are persisted rather than recomputed.
	nextDatabaseID uint64
	nextTableID    uint64

	// tokens are the API tokens by id (token.go); shared between
	// snapshots until a token change copies the map.
	tokens map[string]*Token

	// dropped are the drops of tables and databases, oldest first
	// (ddl.go); shared between snapshots, appended to by copy.
	dropped []Dropped
	// droppedByName indexes dropped, made on first use (Hidden).
	droppedOnce   sync.Once
	droppedByName map[string][]Dropped

	// replacing are the replaces in progress by dropKey (replace.go);
	// shared between snapshots until a replace change copies the map.
	replacing map[string]*replacing

	// lvcs are the last-value cache definitions by dropKey
	// (lastvalue.go); shared between snapshots until a change copies
	// the map.
	lvcs map[string]*LastValueCache
}

func emptySnapshot() *Snapshot {
	return &Snapshot{databases: map[string]*Database{}, nextDatabaseID: 1, nextTableID: 1}
}

// newSnapshot derives the sorted list and table count from dbs.
func newSnapshot(version uint64, dbs map[string]*Database, nextDB, nextTable uint64) *Snapshot {
	s := &Snapshot{version: version, databases: dbs, nextDatabaseID: nextDB, nextTableID: nextTable}
	s.sorted = make([]*Database, 0, len(dbs))
	for _, d := range dbs {
		s.sorted = append(s.sorted, d)
		s.numTables += len(d.Tables)
	}
	slices.SortFunc(s.sorted, func(a, b *Database) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// withDatabase returns the next version of s with d added or replaced.
func (s *Snapshot) withDatabase(d *Database, nextDB, nextTable uint64) *Snapshot {
	dbs := make(map[string]*Database, len(s.databases)+1)
	for k, v := range s.databases {
		dbs[k] = v
	}
	dbs[d.Name] = d
	next := newSnapshot(s.version+1, dbs, nextDB, nextTable)
	next.tokens, next.dropped, next.replacing, next.lvcs = s.tokens, s.dropped, s.replacing, s.lvcs
	return next
}

// Version is the catalog version this snapshot shows. It grows by one with
// every Apply that changes something.
func (s *Snapshot) Version() uint64 { return s.version }

// NumTables is the number of tables across all databases.
func (s *Snapshot) NumTables() int { return s.numTables }

// Database returns the named database.
func (s *Snapshot) Database(db string) (*Database, bool) {
	d, ok := s.databases[db]
	return d, ok
}

// Table returns the named table.
func (s *Snapshot) Table(db, table string) (*Table, bool) {
	d, ok := s.databases[db]
	if !ok {
		return nil, false
	}
	t, ok := d.Tables[table]
	return t, ok
}

// Databases returns all databases sorted by name.
func (s *Snapshot) Databases() []*Database { return slices.Clone(s.sorted) }

// Tables returns the tables of db sorted by name, or nil if db does not
// exist.
func (s *Snapshot) Tables(db string) []*Table {
	d, ok := s.databases[db]
	if !ok {
		return nil
	}
	return d.TableList()
}

// LookupDatabase is Database with an error for the client: it wraps
// ErrDatabaseNotFound.
func (s *Snapshot) LookupDatabase(db string) (*Database, error) {
	d, ok := s.databases[db]
	if !ok {
		return nil, newError(ErrDatabaseNotFound, "catalog: database %s does not exist", quoteName(db))
	}
	return d, nil
}

// LookupTable is Table with an error for the client: it wraps
// ErrTableNotFound, also when the database is missing (the message says
// which).
func (s *Snapshot) LookupTable(db, table string) (*Table, error) {
	d, ok := s.databases[db]
	if !ok {
		return nil, tableNotFound(db, table, false)
	}
	t, ok := d.Tables[table]
	if !ok {
		return nil, tableNotFound(db, table, true)
	}
	return t, nil
}

func tableNotFound(db, table string, dbExists bool) error {
	if !dbExists {
		return newError(ErrTableNotFound, "catalog: table %s not found: database %s does not exist", quoteName(table), quoteName(db))
	}
	return newError(ErrTableNotFound, "catalog: table %s not found in database %s", quoteName(table), quoteName(db))
}
