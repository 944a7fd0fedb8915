package catalog

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
)

// Column is one column of a table.
type Column struct {
	Name string
	// Type is the column's logical type (see LogicalType).
	Type arrow.DataType
	// ID is stable for the life of the column and unique within its table;
	// the time column is 0. Storage refers to columns by ID so that a future
	// rename does not rewrite data.
	ID int
}

// Table is an immutable value: a change to a table builds a new *Table.
// Do not modify the exported fields of a Table obtained from the catalog.
type Table struct {
	Database string
	Name     string
	ID       uint64
	// Columns are in table order: time first, then first-seen order.
	Columns []Column

	index  map[string]int // column name → position in Columns
	schema atomic.Pointer[arrow.Schema]
	// accepted is the last write schema that PlanWrite found to fit this
	// table without change. Because the table is immutable, the verdict
	// stays true for its life, and a write reusing the same *arrow.Schema
	// (every batch of one stream does) is planned with one pointer compare.
	accepted atomic.Pointer[arrow.Schema]
}

// newTable builds a table and its lookup structures. cols must already be
// valid: time first, unique names and IDs, logical types.
func newTable(db, name string, id uint64, cols []Column) *Table {
	t := &Table{Database: db, Name: name, ID: id, Columns: cols, index: make(map[string]int, len(cols))}
	for i, c := range cols {
		t.index[c.Name] = i
	}
	t.schema.Store(buildSchema(cols))
	return t
}

// ArrowSchema returns the schema readers see: one field per column in table
// order, every field nullable except time (a column absent from a batch
// reads as null). The schema is built once per table and shared.
func (t *Table) ArrowSchema() *arrow.Schema {
	if s := t.schema.Load(); s != nil {
		return s
	}
	// Only reached for a Table built outside this package.
	s := buildSchema(t.Columns)
	t.schema.CompareAndSwap(nil, s)
	return t.schema.Load()
}

func buildSchema(cols []Column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Name != TimeColumn}
	}
	return arrow.NewSchema(fields, nil)
}

// Column looks up a column by name and returns it with its position in
// Columns.
func (t *Table) Column(name string) (Column, int, bool) {
	if t.index != nil {
		i, ok := t.index[name]
		if !ok {
			return Column{}, -1, false
		}
		return t.Columns[i], i, true
	}
	for i, c := range t.Columns {
		if c.Name == name {
			return c, i, true
		}
	}
	return Column{}, -1, false
}

// nextColumnID is the ID the next added column gets. IDs are never reused,
// so it is one past the largest ever given out; without drops that is the
// largest present.
func (t *Table) nextColumnID() int {
	next := 0
	for _, c := range t.Columns {
		if c.ID >= next {
			next = c.ID + 1
		}
	}
	return next
}
