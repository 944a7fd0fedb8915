package persist

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// TestUnlistedJournal: names noted survive a reopen, settled ones leave;
// a failed write leaves a name out (the step it guards must not run); a
// name that is not a Parquet file of the layout, or a file that is not a
// journal, is refused.
func TestUnlistedJournal(t *testing.T) {
	dir := t.TempDir()
	objects := objstore.NewMemory()
	defer objects.Close()
	fs := waltest.New(wal.OSFS())
	open := func() *Store {
		t.Helper()
		s, err := Open(Config{Objects: objects, DataDir: dir, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c := ParquetObject("db", "cpu", 1, 1), ParquetObject("db", "cpu", 1, 2), CompactedObject("db", "cpu", "1970-01-02", 3)
	s := open()
	if err := s.NoteUnlisted(b, a); err != nil {
		t.Fatal(err)
	}
	syncs := fs.Count(waltest.OpSync)
	if err := s.NoteUnlisted(a); err != nil || fs.Count(waltest.OpSync) != syncs {
		t.Fatalf("noting a name already in the journal: %v, %d syncs", err, fs.Count(waltest.OpSync)-syncs)
	}
	s = open()
	if got := s.Unlisted(); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("after a reopen: %q", got)
	}
	s.SettleUnlisted(a)
	fs.FailNth(waltest.OpSync, 1, nil)
	if err := s.NoteUnlisted(c); !errors.Is(err, waltest.ErrInjected) {
		t.Fatalf("a failed journal write: %v", err)
	}
	if got := s.Unlisted(); !slices.Equal(got, []string{b}) {
		t.Fatalf("after a failed write: %q, want only %q", got, b)
	}
	if got := open().Unlisted(); !slices.Equal(got, []string{b}) {
		t.Fatalf("on disk after a failed write: %q", got)
	}
	if err := s.NoteUnlisted("catalogs/00000000000000000001.json"); err == nil {
		t.Fatal("a catalog file was taken as an unlisted Parquet file")
	}
	if err := os.WriteFile(filepath.Join(dir, unlistedFile), []byte(`{"format":1,"objects":["segments/1.json"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Objects: objects, DataDir: dir}); err == nil || !strings.Contains(err.Error(), "--full-orphan-scan") {
		t.Fatalf("a journal naming a segment file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, unlistedFile), []byte(`{"objects":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Objects: objects, DataDir: dir}); err == nil || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("a torn journal: %v", err)
	}
}

// TestUnlistedJournalPowerLoss cuts the power after k file-system
// operations of a note, k = 0, 1, …: a note that returned is in the
// journal after the power loss, and the journal always opens.
func TestUnlistedJournalPowerLoss(t *testing.T) {
	objects := objstore.NewMemory()
	defer objects.Close()
	first, second := ParquetObject("db", "cpu", 1, 1), ParquetObject("db", "cpu", 1, 2)
	for k := 0; ; k++ {
		dir := t.TempDir()
		s, err := Open(Config{Objects: objects, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.NoteUnlisted(first); err != nil {
			t.Fatal(err)
		}
		fs := waltest.New(wal.OSFS())
		s, err = Open(Config{Objects: objects, DataDir: dir, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		fs.CrashAfter(k)
		noted := s.NoteUnlisted(second) == nil
		crashed := fs.Crashed()
		if err := fs.PowerLoss(); err != nil {
			t.Fatal(err)
		}
		after, err := Open(Config{Objects: objects, DataDir: dir})
		if err != nil {
			t.Fatalf("k=%d: the journal does not open after the power loss: %v", k, err)
		}
		got := after.Unlisted()
		if !slices.Contains(got, first) || noted && !slices.Contains(got, second) {
			t.Fatalf("k=%d: journal %q after the power loss (second noted: %v)", k, got, noted)
		}
		if !crashed {
			if k < 4 {
				t.Fatalf("a note took only %d operations", k)
			}
			return
		}
	}
}
