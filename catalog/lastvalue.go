package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Last-value caches: a table may have one, which keeps the latest Count
// rows of each distinct combination of its key columns (package buffer
// holds the rows; this package only the definition). The definition is
// durable in the catalog file (format version 5); dropping the table or
// its database drops it, and a replace keeps it while its key columns are
// still string columns of the new table.

// MaxLastValueCount bounds the rows a last-value cache keeps per key.
const MaxLastValueCount = 1000

// LastValueCache is the definition of a table's last-value cache.
type LastValueCache struct {
	Database, Table string
	// Name is the cache's name, unique per table (a table has at most one
	// cache today): given at creation or "<table>_last".
	Name string
	// Keys are the key columns: string columns of the table. Empty: the
	// table is one series.
	Keys []string
	// Count is the rows kept per key, 1 to MaxLastValueCount.
	Count int
}

// LastValueCache returns the cache definition of db.table, if it has one.
func (s *Snapshot) LastValueCache(db, table string) (*LastValueCache, bool) {
	l, ok := s.lvcs[dropKey(db, table)]
	return l, ok
}

// LastValueCaches returns every cache definition, sorted by database and
// table.
func (s *Snapshot) LastValueCaches() []*LastValueCache {
	out := slices.Collect(maps.Values(s.lvcs))
	slices.SortFunc(out, func(a, b *LastValueCache) int {
		return strings.Compare(dropKey(a.Database, a.Table), dropKey(b.Database, b.Table))
	})
	return out
}

// CreateLastValueCache creates the cache def describes (Keys nil: the
// table's string columns; Count 0: 1; Name "": <table>_last), saving the
// catalog to path first. A table that has a cache is ErrCacheExists
// unless ifNotExists, when nothing changes. created says whether it was
// created; the definition stored is returned.
func (c *Catalog) CreateLastValueCache(path string, def LastValueCache, ifNotExists bool) (out LastValueCache, created bool, err error) {
	created, err = c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if err := s.ReplaceConflict(def.Database, def.Table); err != nil {
			return nil, err
		}
		t, ok := s.Table(def.Database, def.Table)
		if !ok {
			_, dbOK := s.Database(def.Database)
			return nil, tableNotFound(def.Database, def.Table, dbOK)
		}
		if old, ok := s.LastValueCache(def.Database, def.Table); ok {
			if ifNotExists {
				out = *old
				return nil, nil
			}
			return nil, newError(ErrCacheExists, "catalog: table %s of database %s has a last-value cache already (%s); drop it first (DROP LAST VALUE CACHE ON %s.%s)",
				quoteName(def.Table), quoteName(def.Database), quoteName(old.Name), def.Database, def.Table)
		}
		l, err := completeLastValue(t, def)
		if err != nil {
			return nil, err
		}
		out = l
		next := s.copyNext()
		next.lvcs = maps.Clone(s.lvcs)
		if next.lvcs == nil {
			next.lvcs = map[string]*LastValueCache{}
		}
		next.lvcs[dropKey(l.Database, l.Table)] = &l
		return next, nil
	})
	return out, created, err
}

// DropLastValueCache drops the cache of db.table, saving the catalog to
// path first. A table without one is ErrCacheNotFound unless ifExists.
func (c *Catalog) DropLastValueCache(path, db, table string, ifExists bool) (dropped bool, err error) {
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if _, ok := s.LastValueCache(db, table); !ok {
			if ifExists {
				return nil, nil
			}
			if _, ok := s.Table(db, table); !ok {
				_, dbOK := s.Database(db)
				return nil, tableNotFound(db, table, dbOK)
			}
			return nil, newError(ErrCacheNotFound, "catalog: table %s of database %s has no last-value cache", quoteName(table), quoteName(db))
		}
		next := s.copyNext()
		next.lvcs = withoutCache(s.lvcs, func(l *LastValueCache) bool { return l.Database == db && l.Table == table })
		return next, nil
	})
}

// copyNext is the next version of s, sharing everything.
func (s *Snapshot) copyNext() *Snapshot {
	next := newSnapshot(s.version+1, s.databases, s.nextDatabaseID, s.nextTableID)
	next.tokens, next.dropped, next.replacing, next.lvcs = s.tokens, s.dropped, s.replacing, s.lvcs
	return next
}

// completeLastValue fills in def's defaults and checks it against t.
func completeLastValue(t *Table, def LastValueCache) (LastValueCache, error) {
	where := fmt.Sprintf("last-value cache of table %s in database %s", quoteName(t.Name), quoteName(t.Database))
	if def.Name == "" {
		def.Name = t.Name + "_last"
	}
	if err := validateIdent(def.Name); err != nil {
		return def, newError(ErrInvalidName, "catalog: %s: name %s: %v", where, quoteName(def.Name), err)
	}
	if def.Count == 0 {
		def.Count = 1
	}
	if def.Count < 1 || def.Count > MaxLastValueCount {
		return def, newError(ErrInvalidSchema, "catalog: %s: COUNT %d is outside 1 to %d", where, def.Count, MaxLastValueCount)
	}
	if def.Keys == nil {
		def.Keys = []string{}
		for _, c := range t.Columns {
			if c.Type.ID() == arrow.STRING {
				def.Keys = append(def.Keys, c.Name)
			}
		}
	} else {
		def.Keys = slices.Clone(def.Keys)
	}
	seen := map[string]bool{}
	for _, k := range def.Keys {
		c, _, ok := t.Column(k)
		if !ok {
			return def, newError(ErrInvalidSchema, "catalog: %s: key column %s is not a column of the table", where, quoteName(k))
		}
		if c.Type.ID() != arrow.STRING {
			return def, newError(ErrInvalidSchema, "catalog: %s: key column %s is %s; key columns are string columns", where, quoteName(k), c.Type)
		}
		if seen[k] {
			return def, newError(ErrInvalidSchema, "catalog: %s: key column %s appears twice", where, quoteName(k))
		}
		seen[k] = true
	}
	def.Database, def.Table = t.Database, t.Name
	return def, nil
}

// validateIdent checks a cache name: what a column name may be.
func validateIdent(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("want 1 to 128 bytes")
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("want letters, digits and _")
		}
	}
	return nil
}

// withoutCache is m without the definitions drop says so of; nil when
// none is left.
func withoutCache(m map[string]*LastValueCache, drop func(*LastValueCache) bool) map[string]*LastValueCache {
	var out map[string]*LastValueCache
	for k, v := range m {
		if drop(v) {
			continue
		}
		if out == nil {
			out = make(map[string]*LastValueCache, len(m))
		}
		out[k] = v
	}
	return out
}

// validCaches is m without the definitions whose table is gone or whose
// key columns are no longer string columns of it (after a replace).
func validCaches(s *Snapshot, m map[string]*LastValueCache) map[string]*LastValueCache {
	return withoutCache(m, func(l *LastValueCache) bool {
		t, ok := s.Table(l.Database, l.Table)
		if !ok {
			return true
		}
		_, err := completeLastValue(t, *l)
		return err != nil
	})
}

// fileLastValue is a LastValueCache in the catalog file (format version 5).
type fileLastValue struct {
	Database string   `json:"database"`
	Table    string   `json:"table"`
	Name     string   `json:"name"`
	Keys     []string `json:"keys"`
	Count    int      `json:"count"`
}
