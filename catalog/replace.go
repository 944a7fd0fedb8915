package catalog

import (
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// # Replaces
//
// A replace (ADBC ingest mode replace, Flight SQL if_exists REPLACE)
// makes a stream's batches the whole new content of a table, with the
// columns of the batches. Like a drop, it works on segment ranges, since
// a table's rows are found by name (buffer/doc.go):
//
//   - BeginReplace records, durably, a replace of db.table whose rows go
//     to segments From and up (the write path rolls the open segment over
//     first, so no older row is there). Until it is over, every reader
//     skips the rows of that name in those segments (Snapshot.Hidden):
//     readers see the old table, or none if there was none. The replace
//     gets the id its table will have; its columns are planned, as the
//     batches come, against a table of its own (WriteOptions.Replace),
//     kept in memory only. Every other write and DDL on the name is
//     refused with ErrReplaceInProgress: it would mix into the new
//     content, or change the table the replace commits over.
//   - CommitReplace, in one save, drops the old table (its rows in the
//     segments below From: Dropped{From: 0, To: From}), makes the
//     replace's table the table of that name, and ends the replace: a
//     reader sees the old table or the new one.
//   - AbortReplace ends the replace and hides its rows (Dropped{From,
//     To}, To the first segment that holds none of them): the old table
//     is as it was.
//
// A replace found in a catalog file at startup was cut short by a crash
// or a shutdown: the write path aborts it before the WAL replay, which
// then skips its records. The catalog file lists a replace in progress
// (format version 4) without its columns: only its abort is left.

// Replacing is a replace in progress of Database.Table: its rows are in
// the segments from From on; its table will have id ID.
type Replacing struct {
	Database, Table string
	ID              uint64
	From            uint64
}

// replacing is a replace in progress and its new table, nil until its
// first batch is planned (and in a loaded catalog).
type replacing struct {
	Replacing
	table *Table
}

// Replaces lists the replaces in progress, by database and table.
func (s *Snapshot) Replaces() []Replacing {
	out := make([]Replacing, 0, len(s.replacing))
	for _, r := range s.replacing {
		out = append(out, r.Replacing)
	}
	slices.SortFunc(out, func(a, b Replacing) int {
		if c := strings.Compare(a.Database, b.Database); c != 0 {
			return c
		}
		return strings.Compare(a.Table, b.Table)
	})
	return out
}

// ReplacingFrom is the lowest segment that holds rows of a replace in
// progress, math.MaxUint64 if none is: rows from there on may yet become
// a table's or be hidden, so they are not persisted before it is over.
func (s *Snapshot) ReplacingFrom() uint64 {
	from := uint64(math.MaxUint64)
	for _, r := range s.replacing {
		from = min(from, r.From)
	}
	return from
}

// ReplaceConflict is ErrReplaceInProgress if db.table (table "": any
// table of db) is being replaced, nil otherwise: a write or DDL on it
// must wait until the replace is over.
func (s *Snapshot) ReplaceConflict(db, table string) error {
	if len(s.replacing) == 0 {
		return nil
	}
	if table != "" {
		if r := s.replacing[dropKey(db, table)]; r != nil {
			return replaceConflict(r)
		}
		return nil
	}
	for _, r := range s.Replaces() {
		if r.Database == db {
			return newError(ErrReplaceInProgress, "catalog: table %s of database %s is being replaced (ADBC ingest mode replace): database %s cannot be dropped until the replace commits or aborts; retry then",
				quoteName(r.Table), quoteName(db), quoteName(db))
		}
	}
	return nil
}

func replaceConflict(r *replacing) error {
	return newError(ErrReplaceInProgress, "catalog: table %s in database %s is being replaced (ADBC ingest mode replace): other writes and DDL on it are refused until the replace commits or aborts; retry then",
		quoteName(r.Table), quoteName(r.Database))
}

func notReplacing(db, table string) error {
	return newError(ErrReplaceInProgress, "catalog: no replace of table %s in database %s is in progress (it committed or was aborted)",
		quoteName(table), quoteName(db))
}

// CheckReplace says whether a replace of db.table may begin: none is in
// progress, and if the table does not exist, ifNotExists creates it and
// a write could (valid names, none differing from another's only in
// case, limits).
func (c *Catalog) CheckReplace(db, table string, ifNotExists IfNotExists) error {
	return checkReplace(c.snap.Load(), c.limits, db, table, ifNotExists)
}

func checkReplace(s *Snapshot, lim Limits, db, table string, ifNotExists IfNotExists) error {
	if err := s.ReplaceConflict(db, table); err != nil {
		return err
	}
	d := s.databases[db]
	if d != nil && d.Tables[table] != nil {
		return nil
	}
	if d == nil {
		if err := ValidateDatabaseName(db); err != nil {
			return err
		}
	}
	if err := ValidateTableName(db, table); err != nil {
		return err
	}
	if err := caseCollisionOf(s, d, db, table); err != nil {
		return err
	}
	if ifNotExists == FailIfNotExists {
		return tableNotFound(db, table, d != nil)
	}
	return newTableLimits(s, d, lim, db, table)
}

// BeginReplace records a replace of db.table whose rows go to the
// segments from from on, saving the catalog to path first; the write
// path makes sure no older row of the table is in them. Its writes carry
// WriteOptions.Replace = the returned ID.
func (c *Catalog) BeginReplace(path, db, table string, from uint64, ifNotExists IfNotExists) (Replacing, error) {
	var out Replacing
	_, err := c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		if err := checkReplace(s, c.limits, db, table, ifNotExists); err != nil {
			return nil, err
		}
		r := &replacing{Replacing: Replacing{Database: db, Table: table, ID: s.nextTableID, From: from}}
		next := s.withReplacing(dropKey(db, table), r)
		next.nextTableID++
		out = r.Replacing
		return next, nil
	})
	return out, err
}

// CommitReplace makes the replace id of db.table the table of that name,
// dropping the old one, in one save to path; the write path makes sure
// every row of the replace is durable first. On error the replace is
// still in progress: abort it.
func (c *Catalog) CommitReplace(path, db, table string, id uint64) error {
	_, err := c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		k := dropKey(db, table)
		r := s.replacing[k]
		if r == nil || r.ID != id {
			return nil, notReplacing(db, table)
		}
		if r.table == nil {
			return nil, newError(ErrInvalidSchema, "catalog: the replace of table %s in database %s has no columns: no batch was planned", quoteName(table), quoteName(db))
		}
		d := s.databases[db]
		nextDB := s.nextDatabaseID
		// A table or database made since the replace began may differ
		// from its name only in case.
		if err := caseCollisionOf(s, d, db, table); err != nil {
			return nil, err
		}
		if d == nil {
			d = newDatabase(db, nextDB, nil)
			nextDB++
		}
		old := d.Tables[table]
		next := s.withDatabase(d.withTable(newTable(db, table, r.ID, r.table.Columns)), nextDB, s.nextTableID)
		if old != nil {
			next.dropped = withDrop(s.dropped, Dropped{Database: db, Table: table, ID: old.ID, To: r.From})
		}
		next.replacing = without(s.replacing, k)
		next.lvcs = validCaches(next, s.lvcs)
		return next, nil
	})
	return err
}

// AbortReplace ends the replace id of db.table, hiding its rows: to is
// the first segment that holds none of them. aborted is false if it was
// not in progress.
func (c *Catalog) AbortReplace(path, db, table string, id, to uint64) (aborted bool, err error) {
	return c.commitDDL(path, func(s *Snapshot) (*Snapshot, error) {
		k := dropKey(db, table)
		r := s.replacing[k]
		if r == nil || r.ID != id {
			return nil, nil
		}
		next := s.withReplacing(k, nil)
		if to > r.From {
			next.dropped = append(slices.Clip(s.dropped), Dropped{Database: db, Table: table, ID: r.ID, From: r.From, To: to})
		}
		return next, nil
	})
}

// planReplacing plans a write of the replace r: the first batch makes its
// table, later ones may add columns to it.
func planReplacing(r *replacing, lim Limits, schema *arrow.Schema) (*Change, error) {
	if r.table == nil {
		cols, err := newTableColumns(r.Database, r.Table, schema, false)
		if err != nil {
			return nil, err
		}
		if len(cols) > lim.MaxColumnsPerTable {
			return nil, columnLimit(lim, r.Database, r.Table, len(cols))
		}
		return &Change{Database: r.Database, Table: r.Table, NewTable: true, NewColumns: cols, Replace: true}, nil
	}
	ch, err := planAppend(r.table, schema, lim, WriteOptions{})
	if ch != nil {
		ch.Replace = true
	}
	return ch, err
}

// applyReplacing applies a change planned by planReplacing.
func applyReplacing(s *Snapshot, ch *Change) (*Snapshot, error) {
	k := dropKey(ch.Database, ch.Table)
	r := s.replacing[k]
	if r == nil {
		return nil, notReplacing(ch.Database, ch.Table)
	}
	var cols []Column
	if r.table == nil {
		tc, err := timeColumnOf(ch)
		if err != nil {
			return nil, err
		}
		cols = []Column{tc}
	} else {
		cols = r.table.Columns
	}
	added, err := addColumns(ch.Database, ch.Table, cols, ch.NewColumns)
	if err != nil {
		return nil, err
	}
	if r.table != nil && len(added) == len(cols) {
		return nil, nil
	}
	return s.withReplacing(k, &replacing{Replacing: r.Replacing, table: newTable(ch.Database, ch.Table, r.ID, added)}), nil
}

// withReplacing returns the next version of s with the replace of key k
// set to r (nil: ended).
func (s *Snapshot) withReplacing(k string, r *replacing) *Snapshot {
	next := newSnapshot(s.version+1, s.databases, s.nextDatabaseID, s.nextTableID)
	next.tokens, next.dropped, next.lvcs = s.tokens, s.dropped, s.lvcs
	next.replacing = without(s.replacing, k)
	if r != nil {
		if next.replacing == nil {
			next.replacing = map[string]*replacing{}
		}
		next.replacing[k] = r
	}
	return next
}

// without is a copy of m without k; nil if that leaves it empty.
func without(m map[string]*replacing, k string) map[string]*replacing {
	var out map[string]*replacing
	for kk, v := range m {
		if kk == k {
			continue
		}
		if out == nil {
			out = make(map[string]*replacing, len(m))
		}
		out[kk] = v
	}
	return out
}
