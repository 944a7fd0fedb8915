package catalog

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// replaced is the schema of the tests' new content: usage changes type,
// host goes, n comes.
func replaced() *arrow.Schema {
	return sch(fld("time", tsNs), fld("usage", str), fld("n", i64))
}

// planReplace plans and applies a write of the replace r.
func planReplace(t *testing.T, c *Catalog, r Replacing, s *arrow.Schema) {
	t.Helper()
	ch, err := c.PlanWrite(r.Database, r.Table, s, WriteOptions{Replace: r.ID})
	if err != nil {
		t.Fatalf("PlanWrite of the replace: %v", err)
	}
	if ch != nil && !ch.Replace {
		t.Fatalf("PlanWrite of the replace planned %+v, not a change of the replace", ch)
	}
	if err := c.Apply(ch); err != nil {
		t.Fatalf("Apply of the replace: %v", err)
	}
}

// wantHiddenRange checks that the rows of db.table are hidden in exactly
// the segments in [from, to) (to math.MaxUint64: from on).
func wantHiddenRange(t *testing.T, s *Snapshot, db, table string, from, to uint64) {
	t.Helper()
	for seg := uint64(1); seg < from+5; seg++ {
		want := seg >= from && seg < to
		if got := s.Hidden(db, table, seg); got != want {
			t.Fatalf("%s.%s segment %d: hidden %v, want %v (hidden range [%d, %d))", db, table, seg, got, want, from, to)
		}
	}
}

// TestReplaceCommit: a replace hides its rows from its first segment on
// while the old table stays as it was; every other write and DDL on the
// name is refused; its table gets the columns of its batches; the commit,
// in one save, drops the old table and puts the new one in its place.
// Every state survives a reload.
func TestReplaceCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	write(t, c, "db", "mem", cpu())
	old := mustTable(t, c, "db", "cpu")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}

	r, err := c.BeginReplace(path, "db", "cpu", 5, CreateTable)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == 0 || r.ID == old.ID || r.From != 5 {
		t.Fatalf("BeginReplace = %+v", r)
	}
	if got := mustTable(t, c, "db", "cpu"); got != old {
		t.Fatal("beginning a replace changed the table")
	}
	wantHiddenRange(t, c.Snapshot(), "db", "cpu", 5, math.MaxUint64)
	wantHiddenRange(t, c.Snapshot(), "db", "mem", 0, 0)
	if got := c.Snapshot().ReplacingFrom(); got != 5 {
		t.Fatalf("ReplacingFrom = %d, want 5", got)
	}

	// Everything else on db.cpu waits for the replace.
	_, err = c.PlanWrite("db", "cpu", cpu(), WriteOptions{})
	checkErr(t, err, ErrReplaceInProgress, "cpu", "being replaced")
	_, err = c.PlanWrite("db", "cpu", cpu(), WriteOptions{Replace: r.ID + 1})
	checkErr(t, err, ErrReplaceInProgress)
	_, err = c.DropTable(path, "db", "cpu", 9, false)
	checkErr(t, err, ErrReplaceInProgress)
	_, err = c.DropDatabase(path, "db", 9, true, false)
	checkErr(t, err, ErrReplaceInProgress, "database")
	_, err = c.BeginReplace(path, "db", "cpu", 6, CreateTable)
	checkErr(t, err, ErrReplaceInProgress)
	if _, err := c.PlanWrite("db", "mem", cpu(), WriteOptions{}); err != nil {
		t.Fatalf("a write to another table: %v", err)
	}

	// The replace's own table: the first batch makes it, a later one adds
	// a column.
	planReplace(t, c, r, replaced())
	planReplace(t, c, r, sch(fld("time", tsNs), fld("n", i64), fld("ok", arrow.FixedWidthTypes.Boolean)))
	_, err = c.PlanWrite("db", "cpu", sch(fld("time", tsNs), fld("n", str)), WriteOptions{Replace: r.ID})
	checkErr(t, err, ErrTypeMismatch)
	if got := mustTable(t, c, "db", "cpu"); got != old {
		t.Fatal("a write of the replace changed the old table")
	}

	// The file says a replace is in progress (format 4), without its
	// columns: a reload can only abort it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"format_version": 4`) || !strings.Contains(string(data), `"replacing"`) {
		t.Fatalf("catalog file during a replace:\n%s", data)
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if reps := loaded.Snapshot().Replaces(); len(reps) != 1 || reps[0] != r {
		t.Fatalf("replaces after a reload: %+v, want %+v", reps, r)
	}
	wantHiddenRange(t, loaded.Snapshot(), "db", "cpu", 5, math.MaxUint64)

	if err := c.CommitReplace(path, "db", "cpu", r.ID+1); !errors.Is(err, ErrReplaceInProgress) {
		t.Fatalf("commit of another replace id: %v", err)
	}
	if err := c.CommitReplace(path, "db", "cpu", r.ID); err != nil {
		t.Fatal(err)
	}
	check := func(c *Catalog, when string) {
		t.Helper()
		nt := mustTable(t, c, "db", "cpu")
		if nt.ID != r.ID || colSummary(nt.Columns) != "time:timestamp[ns],usage:utf8,n:int64,ok:bool" {
			t.Fatalf("%s: table %d %s, want id %d and the replace's columns", when, nt.ID, colSummary(nt.Columns), r.ID)
		}
		if len(c.Snapshot().Replaces()) != 0 || c.Snapshot().ReplacingFrom() != math.MaxUint64 {
			t.Fatalf("%s: replaces %+v", when, c.Snapshot().Replaces())
		}
		wantHiddenRange(t, c.Snapshot(), "db", "cpu", 0, 5)
		wantHiddenRange(t, c.Snapshot(), "db", "mem", 0, 0)
		if d := c.Snapshot().DroppedList(); len(d) != 1 || d[0] != (Dropped{Database: "db", Table: "cpu", ID: old.ID, To: 5}) {
			t.Fatalf("%s: drops %+v", when, d)
		}
	}
	check(c, "after the commit")
	if err := c.CommitReplace(path, "db", "cpu", r.ID); !errors.Is(err, ErrReplaceInProgress) {
		t.Fatalf("second commit: %v", err)
	}
	// Writes go to the new table, with its types.
	_, err = c.PlanWrite("db", "cpu", cpu(), WriteOptions{})
	checkErr(t, err, ErrTypeMismatch, "usage")
	if _, err := c.PlanWrite("db", "cpu", replaced(), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	loaded, err = Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	check(loaded, "after a reload")
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"format_version": 3`) {
		t.Fatalf("catalog file after the commit is not format 3:\n%s", data)
	}
}

// TestReplaceAbort: an abort leaves the old table as it was and hides the
// replace's rows in the segments it wrote, and only those.
func TestReplaceAbort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	old := mustTable(t, c, "db", "cpu")
	r, err := c.BeginReplace(path, "db", "cpu", 5, CreateTable)
	if err != nil {
		t.Fatal(err)
	}
	planReplace(t, c, r, replaced())
	if aborted, err := c.AbortReplace(path, "db", "cpu", r.ID, 8); err != nil || !aborted {
		t.Fatalf("AbortReplace: %v %v", aborted, err)
	}
	if aborted, err := c.AbortReplace(path, "db", "cpu", r.ID, 9); err != nil || aborted {
		t.Fatalf("second AbortReplace: %v %v", aborted, err)
	}
	for _, c := range []*Catalog{c, mustLoad(t, path)} {
		if got := mustTable(t, c, "db", "cpu"); got.ID != old.ID || colSummary(got.Columns) != colSummary(old.Columns) {
			t.Fatalf("table after the abort: %d %s", got.ID, colSummary(got.Columns))
		}
		wantHiddenRange(t, c.Snapshot(), "db", "cpu", 5, 8)
		if len(c.Snapshot().Replaces()) != 0 {
			t.Fatal("the replace is still in progress")
		}
	}
	if _, err := c.PlanWrite("db", "cpu", cpu(), WriteOptions{}); err != nil {
		t.Fatalf("a write after the abort: %v", err)
	}
	_, err = c.PlanWrite("db", "cpu", replaced(), WriteOptions{Replace: r.ID})
	checkErr(t, err, ErrReplaceInProgress, "no replace")

	// A replace that wrote no segment hides nothing.
	r, err = c.BeginReplace(path, "db", "cpu", 8, CreateTable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortReplace(path, "db", "cpu", r.ID, 8); err != nil {
		t.Fatal(err)
	}
	wantHiddenRange(t, c.Snapshot(), "db", "cpu", 5, 8)
}

func mustLoad(t *testing.T, path string) *Catalog {
	t.Helper()
	c, err := Load(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReplaceNewTable: without a table, a replace fails (if_not_exist
// fail) or makes the table, and its database, at the commit; the names
// are checked as a write's would be, when it begins and again when it
// commits.
func TestReplaceNewTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 3, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	_, err := c.BeginReplace(path, "db", "nope", 1, FailIfNotExists)
	checkErr(t, err, ErrTableNotFound, "nope")
	_, err = c.BeginReplace(path, "db", "CPU", 1, CreateTable)
	checkErr(t, err, ErrInvalidName, "only in case")
	_, err = c.BeginReplace(path, "DB", "t", 1, CreateTable)
	checkErr(t, err, ErrInvalidName, "only in case")
	_, err = c.BeginReplace(path, "db", "bad name\x00", 1, CreateTable)
	checkErr(t, err, ErrInvalidName)
	if len(c.Snapshot().Replaces()) != 0 {
		t.Fatal("a refused replace began")
	}

	r, err := c.BeginReplace(path, "newdb", "t", 3, CreateTable)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Database("newdb"); ok {
		t.Fatal("the database exists before the commit")
	}
	// A table of the name made meanwhile would take the replace's place.
	_, err = c.CreateTable(path, "newdb", "t", cpuDefs(), false)
	checkErr(t, err, ErrReplaceInProgress)
	if err := c.CommitReplace(path, "newdb", "t", r.ID); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("commit of a replace without a batch: %v", err)
	}
	planReplace(t, c, r, replaced())
	// A table differing only in case, made since the replace began.
	write(t, c, "newdb", "T", cpu())
	if err := c.CommitReplace(path, "newdb", "t", r.ID); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("commit beside a table differing only in case: %v", err)
	}
	if _, err := c.DropTable(path, "newdb", "T", 4, false); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitReplace(path, "newdb", "t", r.ID); err != nil {
		t.Fatal(err)
	}
	nt := mustTable(t, c, "newdb", "t")
	if nt.ID != r.ID || colSummary(nt.Columns) != "time:timestamp[ns],usage:utf8,n:int64" {
		t.Fatalf("new table %d %s", nt.ID, colSummary(nt.Columns))
	}
	// Nothing of the name was there before: only the dropped T's rows
	// are hidden.
	wantHiddenRange(t, c.Snapshot(), "newdb", "t", 0, 0)
	mustLoad(t, path)
}

// TestLoadCorruptReplacing: a replace in a file is checked like the rest.
func TestLoadCorruptReplacing(t *testing.T) {
	c := sample(t)
	path := filepath.Join(t.TempDir(), "catalog.json")
	if _, err := c.BeginReplace(path, "metrics", "cpu", 7, CreateTable); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	valid := string(data)
	for _, tc := range []struct {
		name, old, new, msg string
	}{
		{"old_format", `"format_version": 4`, `"format_version": 3`, "replaces in progress in a format_version 3 file"},
		{"id_in_use", "\"id\": 4,\n      \"from_segment\"", "\"id\": 1,\n      \"from_segment\"", "id 1 is zero, in use"},
		{"id_not_below_next", "\"id\": 4,\n      \"from_segment\"", "\"id\": 9,\n      \"from_segment\"", "not below next_table_id"},
		{"bad_table_name", `"table": "cpu"`, `"table": ""`, "invalid table name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(valid, tc.old, tc.new, 1)
			if edited == valid {
				t.Fatalf("edit did not apply; fix the test:\n%s", valid)
			}
			p := filepath.Join(t.TempDir(), "catalog.json")
			if err := os.WriteFile(p, []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p, Limits{})
			checkErr(t, err, ErrCorrupt, tc.msg)
		})
	}
}

// TestReplaceGoldenFile pins format_version 4 (catalog_v4.golden.json):
// a drop and a replace in progress.
func TestReplaceGoldenFile(t *testing.T) {
	c := sample(t)
	path := filepath.Join(t.TempDir(), "catalog.json")
	if _, err := c.DropTable(path, "metrics", "mem", 3, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginReplace(path, "metrics", "cpu", 7, CreateTable); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "catalog_v4.golden.json", c.Snapshot())
}

// TestReplacePowerLoss: a power cut at any step of a replace, committed or
// aborted, leaves a catalog that loads and is in one of its states:
// before (no replace), during (the old table, the replace's rows
// hidden), or after (the new table, the old rows hidden; or, aborted,
// the old table with the replace's rows hidden); a step that returned nil
// survives.
func TestReplacePowerLoss(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := "abort"
		if commit {
			name = "commit"
		}
		t.Run(name, func(t *testing.T) {
			for n := 0; ; n++ {
				if !replacePowerLossAt(t, n, commit) {
					t.Logf("power cut at each of the %d operations of a replace", n)
					return
				}
				if n > 200 {
					t.Fatal("the replace never completed")
				}
			}
		})
	}
}

func replacePowerLossAt(t *testing.T, n int, commit bool) (crashed bool) {
	const from, to = 5, 7
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.json")
	c := New(Limits{MaxDatabases: 10, MaxTables: 10, MaxColumnsPerTable: 10})
	write(t, c, "db", "cpu", cpu())
	oldID := mustTable(t, c, "db", "cpu").ID
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	fsys := waltest.New(wal.OSFS())
	c, err := LoadFS(fsys, path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fsys.CrashAfter(n)
	r, beginErr := c.BeginReplace(path, "db", "cpu", from, CreateTable)
	endErr := beginErr
	if beginErr == nil {
		planReplace(t, c, r, replaced())
		if commit {
			endErr = c.CommitReplace(path, "db", "cpu", r.ID)
		} else {
			_, endErr = c.AbortReplace(path, "db", "cpu", r.ID, to)
		}
	}
	crashed = fsys.Crashed()
	if err := fsys.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path, Limits{})
	if err != nil {
		t.Fatalf("crash after %d ops: the catalog does not load: %v", n, err)
	}
	s := loaded.Snapshot()
	tb, _ := loaded.Table("db", "cpu")
	var state string
	switch reps := s.Replaces(); {
	case len(reps) == 0 && tb.ID == oldID && !s.HasDropped():
		state = "before"
	case len(reps) == 1 && tb.ID == oldID:
		state = "during"
		wantHiddenRange(t, s, "db", "cpu", from, math.MaxUint64)
	case len(reps) == 0 && commit && tb.ID != oldID:
		state = "after"
		wantHiddenRange(t, s, "db", "cpu", 0, from)
		if colSummary(tb.Columns) != "time:timestamp[ns],usage:utf8,n:int64" {
			t.Fatalf("crash after %d ops: committed table has columns %s", n, colSummary(tb.Columns))
		}
	case len(reps) == 0 && !commit && tb.ID == oldID:
		state = "after"
		wantHiddenRange(t, s, "db", "cpu", from, to)
	default:
		t.Fatalf("crash after %d ops: replaces %+v, table %d (old %d): no state of a replace", n, reps, tb.ID, oldID)
	}
	if beginErr == nil && state == "before" {
		t.Fatalf("crash after %d ops: BeginReplace returned nil but the replace is gone after the power loss", n)
	}
	if endErr == nil && state != "after" {
		t.Fatalf("crash after %d ops: the commit or abort returned nil but the catalog is %s it after the power loss", n, state)
	}
	if !crashed && (endErr != nil || state != "after") {
		t.Fatalf("no crash: %v, state %s", endErr, state)
	}
	return crashed
}
