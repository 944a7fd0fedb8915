package catalog

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

func cpuDefs() []ColumnDef {
	return []ColumnDef{{"host", str}, {"time", tsNs}, {"usage", f64}}
}

func TestCreateTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	created, err := c.CreateTable(path, "db", "cpu", cpuDefs(), false)
	if err != nil || !created {
		t.Fatalf("CreateTable: %v %v", created, err)
	}
	tb, ok := c.Table("db", "cpu")
	if !ok {
		t.Fatal("table missing")
	}
	// time comes first; the others keep their order.
	if got := tb.ArrowSchema().String(); got != "schema:\n  fields: 3\n    - time: type=timestamp[ns]\n    - host: type=utf8, nullable\n    - usage: type=float64, nullable" {
		t.Fatalf("schema %s", got)
	}
	if _, err := c.CreateTable(path, "db", "cpu", cpuDefs(), false); !errors.Is(err, ErrTableExists) {
		t.Fatalf("second CREATE: %v, want ErrTableExists", err)
	}
	v := c.Version()
	if created, err := c.CreateTable(path, "db", "cpu", []ColumnDef{{"time", tsNs}}, true); err != nil || created || c.Version() != v {
		t.Fatalf("IF NOT EXISTS: %v %v, version %d → %d", created, err, v, c.Version())
	}
	for name, cols := range map[string][]ColumnDef{
		"no time":        {{"host", str}},
		"duplicate":      {{"time", tsNs}, {"a", str}, {"a", f64}},
		"case collision": {{"time", tsNs}, {"a", str}, {"A", f64}},
		"unsupported":    {{"time", tsNs}, {"a", arrow.ListOf(str)}},
		"time not time":  {{"time", str}},
	} {
		if _, err := c.CreateTable(path, "db", "bad", cols, false); err == nil {
			t.Errorf("%s: created", name)
		}
		if _, ok := c.Table("db", "bad"); ok {
			t.Errorf("%s: the table exists after a refusal", name)
		}
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := loaded.Table("db", "cpu"); !ok {
		t.Fatal("created table not in the saved catalog")
	}
}

func TestDropTableAndDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	write(t, c, "db", "mem", cpu())
	if c.Snapshot().HasDropped() || c.Snapshot().Hidden("db", "cpu", 1) {
		t.Fatal("dropped before any drop")
	}
	oldID := mustTable(t, c, "db", "cpu").ID
	if dropped, err := c.DropTable(path, "db", "cpu", 7, false); err != nil || !dropped {
		t.Fatalf("DropTable: %v %v", dropped, err)
	}
	if _, ok := c.Table("db", "cpu"); ok {
		t.Fatal("dropped table still there")
	}
	wantHidden(t, c.Snapshot(), "db", "cpu", 7)
	wantHidden(t, c.Snapshot(), "db", "mem", 0)
	if _, err := c.DropTable(path, "db", "cpu", 8, false); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	if dropped, err := c.DropTable(path, "db", "cpu", 8, true); err != nil || dropped {
		t.Fatalf("IF EXISTS: %v %v", dropped, err)
	}
	// The name is free at once, with a new id.
	write(t, c, "db", "cpu", cpu())
	if id := mustTable(t, c, "db", "cpu").ID; id == oldID {
		t.Fatalf("re-created table has the dropped one's id %d", id)
	}
	wantHidden(t, c.Snapshot(), "db", "cpu", 7)

	if _, err := c.DropDatabase(path, "db", 9, false, false); !errors.Is(err, ErrDatabaseNotEmpty) {
		t.Fatalf("DROP SCHEMA without CASCADE: %v", err)
	}
	if _, ok := c.Table("db", "mem"); !ok {
		t.Fatal("a refused drop changed the catalog")
	}
	if dropped, err := c.DropDatabase(path, "db", 9, true, false); err != nil || !dropped {
		t.Fatalf("CASCADE: %v %v", dropped, err)
	}
	if _, ok := c.Database("db"); ok {
		t.Fatal("dropped database still there")
	}
	for _, tb := range []string{"cpu", "mem", "never"} {
		wantHidden(t, c.Snapshot(), "db", tb, 9)
	}
	if _, err := c.DropDatabase(path, "db", 9, true, false); !errors.Is(err, ErrDatabaseNotFound) {
		t.Fatalf("second DROP SCHEMA: %v", err)
	}
	if created, err := c.CreateDatabase(path, "db", false); err != nil || !created {
		t.Fatalf("CreateDatabase: %v %v", created, err)
	}
	if _, err := c.CreateDatabase(path, "db", false); !errors.Is(err, ErrDatabaseExists) {
		t.Fatalf("second CreateDatabase: %v", err)
	}
	if _, err := c.CreateDatabase(path, "DB", false); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("CreateDatabase differing in case: %v", err)
	}

	// The drops survive a reload, and a WAL-replayed Apply keeps them.
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantHidden(t, loaded.Snapshot(), "db", "cpu", 9)
	write(t, loaded, "db", "x", cpu())
	wantHidden(t, loaded.Snapshot(), "db", "mem", 9)
	// The database's drop covers its table's: one record left.
	if n := len(loaded.Snapshot().DroppedList()); n != 1 {
		t.Fatalf("after Apply: %d drops, want 1", n)
	}
	// Dropping one name again and again keeps one record of it.
	for i := range 50 {
		write(t, loaded, "db", "churn", cpu())
		if _, err := loaded.DropTable(path, "db", "churn", uint64(100+i), false); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(loaded.Snapshot().DroppedList()); n != 2 {
		t.Fatalf("after 50 drops of one table: %d drop records, want 2", n)
	}
	wantHidden(t, loaded.Snapshot(), "db", "churn", 149)
}

// wantHidden checks that the rows of db.table are hidden in exactly the
// segments below to.
func wantHidden(t *testing.T, s *Snapshot, db, table string, to uint64) {
	t.Helper()
	for seg := uint64(1); seg < to+3; seg++ {
		if got := s.Hidden(db, table, seg); got != (seg < to) {
			t.Fatalf("%s.%s segment %d: hidden %v, want %v", db, table, seg, got, seg < to)
		}
	}
}

func mustTable(t *testing.T, c *Catalog, db, table string) *Table {
	t.Helper()
	tb, ok := c.Table(db, table)
	if !ok {
		t.Fatalf("no table %s.%s", db, table)
	}
	return tb
}

// TestDropPowerLoss: a power cut at any step of a drop leaves a catalog
// that loads and has the table or not, never half of it; a drop that
// returned nil survives.
func TestDropPowerLoss(t *testing.T) {
	for n := 0; ; n++ {
		dir := t.TempDir()
		path := filepath.Join(dir, "catalog.json")
		c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
		write(t, c, "db", "cpu", cpu())
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		fsys := waltest.New(wal.OSFS())
		c, err := LoadFS(fsys, path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		fsys.CrashAfter(n)
		_, dropErr := c.DropTable(path, "db", "cpu", 3, false)
		crashed := fsys.Crashed()
		if err := fsys.PowerLoss(); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(path, Limits{})
		if err != nil {
			t.Fatalf("crash after %d ops: the catalog does not load: %v", n, err)
		}
		_, has := loaded.Table("db", "cpu")
		hidden := loaded.Snapshot().Hidden("db", "cpu", 2)
		if has == hidden {
			t.Fatalf("crash after %d ops: table present %v, its rows hidden %v", n, has, hidden)
		}
		if dropErr == nil && has {
			t.Fatalf("crash after %d ops: DropTable returned nil but the table is back after the power loss", n)
		}
		if !crashed {
			if dropErr != nil || has {
				t.Fatalf("no crash: %v", dropErr)
			}
			t.Logf("power cut at each of the %d operations of a drop", n)
			return
		}
		if n > 100 {
			t.Fatal("the drop never completed")
		}
	}
}
