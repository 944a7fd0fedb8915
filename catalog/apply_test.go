package catalog

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestApplyAssignsIDsInOrder(t *testing.T) {
	c := New(Limits{})
	write(t, c, "metrics", "cpu", sch(fld("host", str), fld("time", tsNs)))
	write(t, c, "metrics", "mem", cpu())
	write(t, c, "logs", "app", cpu())
	write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld("usage", f64), fld("cores", i64)))

	cpuT, _ := c.Table("metrics", "cpu")
	if got, want := colSummary(cpuT.Columns), "time:timestamp[ns],host:utf8,usage:float64,cores:int64"; got != want {
		t.Fatalf("columns = %s, want %s", got, want)
	}
	for i, col := range cpuT.Columns {
		if col.ID != i {
			t.Errorf("column %q ID = %d, want %d", col.Name, col.ID, i)
		}
	}
	mem, _ := c.Table("metrics", "mem")
	app, _ := c.Table("logs", "app")
	if cpuT.ID != 1 || mem.ID != 2 || app.ID != 3 {
		t.Errorf("table IDs = %d %d %d, want 1 2 3", cpuT.ID, mem.ID, app.ID)
	}
	m, _ := c.Database("metrics")
	l, _ := c.Database("logs")
	if m.ID != 1 || l.ID != 2 {
		t.Errorf("database IDs = %d %d, want 1 2", m.ID, l.ID)
	}
	if c.Version() != 4 {
		t.Errorf("version = %d, want 4", c.Version())
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	c := New(Limits{})
	ch, err := c.PlanWrite("metrics", "cpu", cpu(), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Apply(ch); err != nil {
			t.Fatalf("Apply #%d: %v", i, err)
		}
	}
	if c.Version() != 1 {
		t.Fatalf("version = %d after re-applying the same change, want 1", c.Version())
	}
	// A new-columns change whose columns already exist is a no-op too.
	if err := c.Apply(&Change{Database: "metrics", Table: "cpu", NewColumns: []Column{{Name: "usage", Type: f64}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if c.Version() != 1 {
		t.Fatalf("version = %d, want 1", c.Version())
	}
}

func TestApplyErrors(t *testing.T) {
	cases := []struct {
		name    string
		ch      Change
		wantErr error
		wantMsg string
	}{
		{"type_mismatch", Change{Database: "metrics", Table: "cpu", NewColumns: []Column{{Name: "usage", Type: i64}}},
			ErrTypeMismatch, `column "usage": stored type float64, sent type int64`},
		{"unsupported", Change{Database: "metrics", Table: "cpu", NewColumns: []Column{{Name: "l", Type: arrow.ListOf(i64)}}},
			ErrUnsupportedType, "unsupported type list"},
		{"bad_column_name", Change{Database: "metrics", Table: "cpu", NewColumns: []Column{{Name: "", Type: i64}}},
			ErrInvalidName, "invalid column name"},
		{"database_missing", Change{Database: "nope", Table: "cpu"}, ErrDatabaseNotFound, `database "nope" does not exist`},
		{"table_missing", Change{Database: "metrics", Table: "nope"}, ErrTableNotFound, `table "nope" not found in database "metrics"`},
		{"new_table_without_time", Change{Database: "metrics", Table: "t", NewTable: true, NewColumns: []Column{{Name: "v", Type: i64}}},
			ErrInvalidSchema, `no "time" column`},
		{"new_table_bad_time", Change{Database: "metrics", Table: "t", NewTable: true, NewColumns: []Column{{Name: "time", Type: i64}}},
			ErrInvalidSchema, "must be timestamp[ns]"},
		{"new_database_bad_name", Change{Database: "a/b", NewDatabase: true, Table: "t", NewTable: true, NewColumns: []Column{{Name: "time", Type: tsNs}}},
			ErrInvalidName, "invalid database name"},
		// A failure after other columns were accepted must leave no trace.
		{"partial", Change{Database: "metrics", Table: "cpu", NewColumns: []Column{{Name: "ok", Type: i64}, {Name: "host", Type: i64}}},
			ErrTypeMismatch, `column "host"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Limits{})
			withCPU(t, c)
			before := c.Snapshot()
			checkErr(t, c.Apply(&tc.ch), tc.wantErr, tc.wantMsg)
			if c.Snapshot() != before {
				t.Fatal("failed Apply changed the catalog")
			}
		})
	}
}

func TestApplyLeavesOldSnapshotsAlone(t *testing.T) {
	c := New(Limits{})
	withCPU(t, c)
	old := c.Snapshot()
	oldCPU, _ := old.Table("metrics", "cpu")
	oldSchema := oldCPU.ArrowSchema()

	write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld("new", i64)))
	write(t, c, "metrics", "mem", cpu())

	if got, _ := old.Table("metrics", "cpu"); got != oldCPU || len(got.Columns) != 3 || got.ArrowSchema() != oldSchema {
		t.Fatal("old snapshot's table changed")
	}
	if _, ok := old.Table("metrics", "mem"); ok || len(old.Tables("metrics")) != 1 || old.NumTables() != 1 {
		t.Fatal("old snapshot sees a later table")
	}
	newCPU, _ := c.Table("metrics", "cpu")
	if len(newCPU.Columns) != 4 || c.Snapshot().NumTables() != 2 {
		t.Fatalf("new snapshot: %s, %d tables", colSummary(newCPU.Columns), c.Snapshot().NumTables())
	}
	// Unchanged tables are shared, not copied.
	mem1, _ := c.Table("metrics", "mem")
	write(t, c, "logs", "app", cpu())
	if mem2, _ := c.Table("metrics", "mem"); mem1 != mem2 {
		t.Fatal("unchanged table was rebuilt")
	}
}

func TestTableArrowSchemaAndColumn(t *testing.T) {
	c := New(Limits{})
	write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld("host", arrow.BinaryTypes.LargeString),
		fld("at", &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"})))
	tbl, _ := c.Table("metrics", "cpu")
	s := tbl.ArrowSchema()
	want := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: tsNs, Nullable: false},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	if !s.Equal(want) {
		t.Fatalf("ArrowSchema = %v, want %v", s, want)
	}
	if tbl.ArrowSchema() != s {
		t.Fatal("ArrowSchema is not cached")
	}
	col, i, ok := tbl.Column("host")
	if !ok || i != 1 || col.ID != 1 || col.Name != "host" {
		t.Fatalf("Column(host) = %+v, %d, %v", col, i, ok)
	}
	if _, i, ok := tbl.Column("nope"); ok || i != -1 {
		t.Fatal("Column(nope) found")
	}
	// A Table built by hand (no index, no cached schema) still works.
	hand := &Table{Columns: tbl.Columns}
	if _, i, ok := hand.Column("at"); !ok || i != 2 {
		t.Fatal("Column on a hand-built table")
	}
	if !hand.ArrowSchema().Equal(want) {
		t.Fatal("ArrowSchema on a hand-built table")
	}
}

func TestListingsAndLookups(t *testing.T) {
	c := New(Limits{})
	for _, n := range [][2]string{{"zeta", "b"}, {"alpha", "z"}, {"alpha", "a"}, {"mid", "m"}} {
		write(t, c, n[0], n[1], cpu())
	}
	var names []string
	for _, d := range c.Databases() {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,mid,zeta" {
		t.Fatalf("Databases = %s", got)
	}
	names = nil
	for _, tb := range c.Tables("alpha") {
		names = append(names, tb.Name)
	}
	if got := strings.Join(names, ","); got != "a,z" {
		t.Fatalf("Tables(alpha) = %s", got)
	}
	if c.Tables("nope") != nil {
		t.Fatal("Tables of a missing database")
	}
	// Listings are copies: scribbling on them does not reach the catalog.
	c.Databases()[0] = nil
	if c.Databases()[0] == nil {
		t.Fatal("Databases returned shared slice")
	}

	s := c.Snapshot()
	_, err := s.LookupDatabase("nope")
	checkErr(t, err, ErrDatabaseNotFound, `database "nope" does not exist`)
	_, err = s.LookupTable("nope", "cpu")
	checkErr(t, err, ErrTableNotFound, `table "cpu" not found`, `database "nope" does not exist`)
	_, err = s.LookupTable("alpha", "cpu")
	checkErr(t, err, ErrTableNotFound, `table "cpu" not found in database "alpha"`)
	if tb, err := s.LookupTable("alpha", "z"); err != nil || tb.Name != "z" {
		t.Fatalf("LookupTable(alpha, z) = %v, %v", tb, err)
	}
}
