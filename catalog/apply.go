package catalog

import "github.com/apache/arrow-go/v18/arrow"

// Apply makes ch part of the catalog and publishes a new snapshot. It is
// idempotent: a database, table or column that already exists (a column
// with the same type) is left alone, so replaying a logged change is safe.
// A column that exists with another type fails with ErrTypeMismatch, the
// last line of defence against a plan/apply race. The version grows only
// if something changed. Limits are not checked: they belong to planning,
// and a replayed change was accepted under the limits of its time.
//
// On error nothing is changed.
func (c *Catalog) Apply(ch *Change) error {
	if ch == nil {
		return nil
	}
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	next, err := applyChange(c.snap.Load(), ch)
	if err != nil || next == nil {
		return err
	}
	c.snap.Store(next)
	return nil
}

// applyChange returns the snapshot after ch, or nil if ch changes nothing.
func applyChange(s *Snapshot, ch *Change) (*Snapshot, error) {
	if ch.Replace {
		return applyReplacing(s, ch)
	}
	nextDB, nextTable := s.nextDatabaseID, s.nextTableID
	dbChanged := false
	d := s.databases[ch.Database]
	if d == nil {
		if !ch.NewDatabase {
			return nil, newError(ErrDatabaseNotFound, "catalog: apply: database %s does not exist", quoteName(ch.Database))
		}
		if err := ValidateDatabaseName(ch.Database); err != nil {
			return nil, err
		}
		d = newDatabase(ch.Database, nextDB, nil)
		nextDB++
		dbChanged = true
	}
	if ch.Table == "" && !ch.NewTable && len(ch.NewColumns) == 0 {
		// A database-only change (CREATE DATABASE).
		if !dbChanged {
			return nil, nil
		}
		return s.withDatabase(d, nextDB, nextTable), nil
	}

	t := d.Tables[ch.Table]
	var cols []Column
	var tableID uint64
	if t == nil {
		if !ch.NewTable {
			return nil, tableNotFound(ch.Database, ch.Table, !dbChanged)
		}
		if err := ValidateTableName(ch.Database, ch.Table); err != nil {
			return nil, err
		}
		tc, err := timeColumnOf(ch)
		if err != nil {
			return nil, err
		}
		cols = []Column{tc}
		tableID = nextTable
		nextTable++
	} else {
		cols = t.Columns
		tableID = t.ID
	}

	added, err := addColumns(ch.Database, ch.Table, cols, ch.NewColumns)
	if err != nil {
		return nil, err
	}
	if t != nil && len(added) == len(cols) {
		return nil, nil // everything already present
	}
	nt := newTable(ch.Database, ch.Table, tableID, added)
	return s.withDatabase(d.withTable(nt), nextDB, nextTable), nil
}

// timeColumnOf finds the time column a new table's change must carry.
func timeColumnOf(ch *Change) (Column, error) {
	for _, c := range ch.NewColumns {
		if c.Name != TimeColumn {
			continue
		}
		if !isTimeType(c.Type) {
			return Column{}, wrongTimeType(ch.Database, ch.Table, c.Type)
		}
		return Column{Name: TimeColumn, Type: timeType, ID: 0}, nil
	}
	return Column{}, missingTime(ch.Database, ch.Table)
}

// addColumns returns cols with the missing ones of add appended, with fresh
// IDs. cols is never modified: it may be shared with a published table.
func addColumns(db, table string, cols, add []Column) ([]Column, error) {
	out := cols
	copied := false
	next := 0
	for _, c := range cols {
		next = max(next, c.ID+1)
	}
	for _, a := range add {
		lt, ok := LogicalType(a.Type)
		if !ok {
			return nil, unsupported(db, table, arrow.Field{Name: a.Name, Type: a.Type})
		}
		if i := indexOf(out, a.Name); i >= 0 {
			if !arrow.TypeEqual(out[i].Type, lt) {
				return nil, newError(ErrTypeMismatch, "catalog: db %s table %s column %s: stored type %s, sent type %s",
					quoteName(db), quoteName(table), quoteName(a.Name), typeName(out[i].Type), typeName(a.Type))
			}
			continue
		}
		if err := ValidateColumnName(db, table, a.Name); err != nil {
			return nil, err
		}
		if !copied {
			out = append(make([]Column, 0, len(cols)+len(add)), cols...)
			copied = true
		}
		out = append(out, Column{Name: a.Name, Type: storedType(lt), ID: next})
		next++
	}
	return out, nil
}

// indexOf is a linear search; Apply runs rarely and on few columns, so a
// map would cost more than it saves.
func indexOf(cols []Column, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}
