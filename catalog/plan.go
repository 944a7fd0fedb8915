package catalog

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// PlanWrite checks a write of a batch with schema into db.table and returns
// what the write would change in the catalog, or nil if nothing. It changes
// nothing, not even on error. Errors wrap one of the package's sentinels.
//
// For an existing table whose columns already cover the batch, PlanWrite
// does not allocate.
func (c *Catalog) PlanWrite(db, table string, schema *arrow.Schema, opts WriteOptions) (*Change, error) {
	return planWrite(c.snap.Load(), c.limits, db, table, schema, opts)
}

func planWrite(s *Snapshot, lim Limits, db, table string, schema *arrow.Schema, opts WriteOptions) (*Change, error) {
	if schema == nil {
		return nil, newError(ErrInvalidSchema, "catalog: db %s table %s: write has no schema", quoteName(db), quoteName(table))
	}
	if len(s.replacing) > 0 || opts.Replace != 0 {
		r := s.replacing[dropKey(db, table)]
		switch {
		case r != nil && r.ID == opts.Replace:
			return planReplacing(r, lim, schema)
		case r != nil:
			return nil, replaceConflict(r)
		case opts.Replace != 0:
			return nil, notReplacing(db, table)
		}
	}
	d := s.databases[db]
	if d != nil {
		if t := d.Tables[table]; t != nil {
			return planAppend(t, schema, lim, opts)
		}
	}
	return planCreate(s, d, lim, db, table, schema, opts)
}

// planAppend plans a write into the existing table t. Stored names are
// valid, so only names of new columns are checked.
func planAppend(t *Table, schema *arrow.Schema, lim Limits, opts WriteOptions) (*Change, error) {
	if !opts.Replay && opts.IfExists == FailIfExists {
		return nil, newError(ErrTableExists, "catalog: table %s already exists in database %s", quoteName(t.Name), quoteName(t.Database))
	}
	if t.accepted.Load() == schema {
		return nil, nil
	}

	// seen marks the table columns the batch sends, to catch duplicate
	// names without a map; a stack array covers the default column limit.
	var seenBuf [8]uint64
	seen := seenBuf[:]
	if n := (len(t.Columns) + 63) / 64; n > len(seen) {
		seen = make([]uint64, n)
	}
	var added []Column
	for i := 0; i < schema.NumFields(); i++ {
		f := schema.Field(i)
		if j, ok := t.index[f.Name]; ok {
			if seen[j/64]&(1<<(j%64)) != 0 {
				return nil, duplicateColumn(t.Database, t.Name, f.Name)
			}
			seen[j/64] |= 1 << (j % 64)
			if err := checkFieldType(t.Database, t.Name, t.Columns[j].Type, f); err != nil {
				return nil, err
			}
			continue
		}
		col, err := newColumn(t.Database, t.Name, f)
		if err != nil {
			return nil, err
		}
		for _, a := range added {
			if a.Name == col.Name {
				return nil, duplicateColumn(t.Database, t.Name, f.Name)
			}
			if !opts.Replay && strings.EqualFold(a.Name, col.Name) {
				return nil, caseCollision(t.Database, t.Name, col.Name, a.Name, false)
			}
		}
		if !opts.Replay {
			for _, c := range t.Columns {
				if strings.EqualFold(c.Name, col.Name) {
					return nil, caseCollision(t.Database, t.Name, col.Name, c.Name, true)
				}
			}
		}
		added = append(added, col)
	}
	// Column 0 is time in every table.
	if seen[0]&1 == 0 {
		return nil, missingTime(t.Database, t.Name)
	}
	if len(added) == 0 {
		t.accepted.Store(schema)
		return nil, nil
	}
	if total := len(t.Columns) + len(added); !opts.Replay && total > lim.MaxColumnsPerTable {
		return nil, columnLimit(lim, t.Database, t.Name, total)
	}
	return &Change{Database: t.Database, Table: t.Name, NewColumns: added}, nil
}

// planCreate plans a write into a table that does not exist; d is nil if
// the database does not exist either.
func planCreate(s *Snapshot, d *Database, lim Limits, db, table string, schema *arrow.Schema, opts WriteOptions) (*Change, error) {
	if d == nil {
		if err := ValidateDatabaseName(db); err != nil {
			return nil, err
		}
	}
	if err := ValidateTableName(db, table); err != nil {
		return nil, err
	}
	if !opts.Replay {
		if err := caseCollisionOf(s, d, db, table); err != nil {
			return nil, err
		}
	}
	if !opts.Replay && opts.IfNotExists == FailIfNotExists {
		return nil, tableNotFound(db, table, d != nil)
	}
	cols, err := newTableColumns(db, table, schema, opts.Replay)
	if err != nil {
		return nil, err
	}
	if !opts.Replay {
		if err := newTableLimits(s, d, lim, db, table); err != nil {
			return nil, err
		}
		if len(cols) > lim.MaxColumnsPerTable {
			return nil, columnLimit(lim, db, table, len(cols))
		}
	}
	return &Change{Database: db, NewDatabase: d == nil, Table: table, NewTable: true, NewColumns: cols}, nil
}

// caseCollisionOf refuses a new db.table (d: its database, nil if new)
// whose name differs from an existing one's only in case: SQL names are
// case-insensitive, so a query could not tell them apart.
func caseCollisionOf(s *Snapshot, d *Database, db, table string) error {
	if d == nil {
		for _, o := range s.sorted {
			if strings.EqualFold(o.Name, db) && o.Name != db {
				return newError(ErrInvalidName, "catalog: database %s differs from the existing database %s only in case, and SQL does not tell them apart; write to %s",
					quoteName(db), quoteName(o.Name), quoteName(o.Name))
			}
		}
		return nil
	}
	for _, o := range d.Tables {
		if strings.EqualFold(o.Name, table) && o.Name != table {
			return newError(ErrInvalidName, "catalog: db %s: table %s differs from the existing table %s only in case, and SQL does not tell them apart; write to %s",
				quoteName(db), quoteName(table), quoteName(o.Name), quoteName(o.Name))
		}
	}
	return nil
}

// newTableLimits checks --max-databases and --max-tables for a new
// db.table (d: its database, nil if new).
func newTableLimits(s *Snapshot, d *Database, lim Limits, db, table string) error {
	if d == nil && len(s.databases) >= lim.MaxDatabases {
		return newError(ErrLimitExceeded, "catalog: limit of %d databases reached (--max-databases); database %s not created",
			lim.MaxDatabases, quoteName(db))
	}
	if s.numTables >= lim.MaxTables {
		return newError(ErrLimitExceeded, "catalog: limit of %d tables reached (--max-tables); table %s not created in database %s",
			lim.MaxTables, quoteName(table), quoteName(db))
	}
	return nil
}

// newTableColumns turns a batch schema into the columns of a new table:
// time first, then the others in batch order. Names that differ only in
// case are refused, unless replaying.
func newTableColumns(db, table string, schema *arrow.Schema, replay bool) ([]Column, error) {
	n := schema.NumFields()
	cols := make([]Column, 1, max(n, 1))
	names := make(map[string]string, n) // lower-cased name → name
	hasTime := false
	for i := 0; i < n; i++ {
		f := schema.Field(i)
		lower := strings.ToLower(f.Name)
		if other, dup := names[lower]; dup {
			if other == f.Name {
				return nil, duplicateColumn(db, table, f.Name)
			}
			if !replay {
				return nil, caseCollision(db, table, f.Name, other, false)
			}
		}
		names[lower] = f.Name
		if f.Name == TimeColumn {
			if !isTimeType(f.Type) {
				return nil, wrongTimeType(db, table, f.Type)
			}
			cols[0] = Column{Name: TimeColumn, Type: timeType}
			hasTime = true
			continue
		}
		col, err := newColumn(db, table, f)
		if err != nil {
			return nil, err
		}
		cols = append(cols, col)
	}
	if !hasTime {
		return nil, missingTime(db, table)
	}
	return cols, nil
}

// checkFieldType checks a batch field against the stored type of the
// column with the same name.
func checkFieldType(db, table string, stored arrow.DataType, f arrow.Field) error {
	if f.Name == TimeColumn {
		if !isTimeType(f.Type) {
			return wrongTimeType(db, table, f.Type)
		}
		return nil
	}
	lt, ok := LogicalType(f.Type)
	if !ok {
		return unsupported(db, table, f)
	}
	if !arrow.TypeEqual(stored, lt) {
		return newError(ErrTypeMismatch, "catalog: db %s table %s column %s: stored type %s, sent type %s",
			quoteName(db), quoteName(table), quoteName(f.Name), typeName(stored), typeName(f.Type))
	}
	return nil
}

// newColumn validates a batch field that is not yet a column.
func newColumn(db, table string, f arrow.Field) (Column, error) {
	if f.Name == TimeColumn {
		// Reached only if a table lost its time column, which Load and
		// Apply prevent; refuse rather than add a second one.
		return Column{}, missingTime(db, table)
	}
	if err := ValidateColumnName(db, table, f.Name); err != nil {
		return Column{}, err
	}
	lt, ok := LogicalType(f.Type)
	if !ok {
		return Column{}, unsupported(db, table, f)
	}
	return Column{Name: f.Name, Type: storedType(lt)}, nil
}

func unsupported(db, table string, f arrow.Field) error {
	return newError(ErrUnsupportedType, "catalog: db %s table %s column %s: unsupported type %s; supported: %s",
		quoteName(db), quoteName(table), quoteName(f.Name), typeName(f.Type), supportedTypes)
}

func duplicateColumn(db, table, name string) error {
	return newError(ErrInvalidSchema, "catalog: db %s table %s: duplicate column %s in batch", quoteName(db), quoteName(table), quoteName(name))
}

// caseCollision is the error for a new column whose name differs from
// another's (stored already, or sent beside it) only in case.
func caseCollision(db, table, name, other string, stored bool) error {
	where := "sent in the same batch"
	if stored {
		where = "of the table"
	}
	return newError(ErrInvalidSchema, "catalog: db %s table %s: column %s differs from the column %s %s only in case, and SQL does not tell them apart; rename one",
		quoteName(db), quoteName(table), quoteName(name), quoteName(other), where)
}

func missingTime(db, table string) error {
	return newError(ErrInvalidSchema, "catalog: db %s table %s: batch has no %q column", quoteName(db), quoteName(table), TimeColumn)
}

func wrongTimeType(db, table string, got arrow.DataType) error {
	return newError(ErrInvalidSchema, "catalog: db %s table %s: column %q must be %s without time zone, got %s",
		quoteName(db), quoteName(table), TimeColumn, timeType, typeName(got))
}

func columnLimit(lim Limits, db, table string, total int) error {
	return newError(ErrLimitExceeded, "catalog: limit of %d columns per table exceeded (--max-columns-per-table); table %s in database %s would have %d columns",
		lim.MaxColumnsPerTable, quoteName(table), quoteName(db), total)
}
