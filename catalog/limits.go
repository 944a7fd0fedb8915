package catalog

import "fmt"

// Limits bound the size of the catalog. They protect the server from
// clients that create tables or columns by accident (a tag value used as a
// column name, say). A zero field means "use the default".
type Limits struct {
	MaxDatabases       int // --max-databases
	MaxTables          int // --max-tables: total across all databases
	MaxColumnsPerTable int // --max-columns-per-table: including time
}

// DefaultLimits returns the limits used when no flag overrides them.
func DefaultLimits() Limits {
	return Limits{MaxDatabases: 100, MaxTables: 4000, MaxColumnsPerTable: 500}
}

// Validate rejects negative limits. Zero is allowed and means the default.
func (l Limits) Validate() error {
	for _, f := range []struct {
		flag string
		v    int
	}{
		{"--max-databases", l.MaxDatabases},
		{"--max-tables", l.MaxTables},
		{"--max-columns-per-table", l.MaxColumnsPerTable},
	} {
		if f.v < 0 {
			return fmt.Errorf("catalog: %s must not be negative, got %d", f.flag, f.v)
		}
	}
	return nil
}

// withDefaults replaces zero fields by their default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxDatabases <= 0 {
		l.MaxDatabases = d.MaxDatabases
	}
	if l.MaxTables <= 0 {
		l.MaxTables = d.MaxTables
	}
	if l.MaxColumnsPerTable <= 0 {
		l.MaxColumnsPerTable = d.MaxColumnsPerTable
	}
	return l
}
