package catalog

import (
	"slices"
	"strings"
	"time"
)

// Database is an immutable value: a change to one of its tables builds a
// new *Database sharing the unchanged tables. Do not modify it.
type Database struct {
	Name   string
	ID     uint64
	Tables map[string]*Table
	// Retention is how long its rows are kept (retention.go): 0 is the
	// server's default, RetentionNone forever.
	Retention time.Duration

	sorted []*Table // Tables sorted by name
}

func newDatabase(name string, id uint64, tables map[string]*Table) *Database {
	if tables == nil {
		tables = map[string]*Table{}
	}
	return &Database{Name: name, ID: id, Tables: tables, sorted: sortedTables(tables)}
}

func sortedTables(tables map[string]*Table) []*Table {
	out := make([]*Table, 0, len(tables))
	for _, t := range tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Table) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TableList returns the database's tables sorted by name. The slice is the
// caller's to keep.
func (d *Database) TableList() []*Table {
	if d.sorted == nil && len(d.Tables) > 0 {
		return sortedTables(d.Tables) // a Database built outside this package
	}
	return slices.Clone(d.sorted)
}

// withTable returns a copy of d with t added or replaced.
func (d *Database) withTable(t *Table) *Database {
	tables := make(map[string]*Table, len(d.Tables)+1)
	for k, v := range d.Tables {
		tables[k] = v
	}
	tables[t.Name] = t
	nd := newDatabase(d.Name, d.ID, tables)
	nd.Retention = d.Retention
	return nd
}
