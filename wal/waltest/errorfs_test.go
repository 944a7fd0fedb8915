package waltest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apron-db/apron/wal"
)

// TestPowerLoss: what PowerLoss keeps and undoes, case by case.
func TestPowerLoss(t *testing.T) {
	dir := t.TempDir()
	f := New(nil)
	p := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, create bool, data string, sync bool) {
		t.Helper()
		var file interface {
			Write([]byte) (int, error)
			Sync() error
			Close() error
		}
		var err error
		if create {
			file, err = f.Create(p(name))
		} else {
			file, err = f.OpenRW(p(name))
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := file.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		file.Close()
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Made durable: created, synced, directory synced.
	write("durable", true, "abc", true)
	write("old", true, "xyz", true)
	write("gone", true, "123", true)
	write("dead", true, "---", true)
	must(f.SyncDir(dir))
	must(f.Remove(p("dead"))) // removed, and the removal made durable
	must(f.SyncDir(dir))
	// Since the last directory sync: bytes not synced, a rename, a removal,
	// a file created (and synced).
	write("durable", false, "abcdef", false) // (from offset 0: File has no Seek)
	write("gone", false, "123456", false)
	must(f.Rename(p("old"), p("new")))
	must(f.Remove(p("gone")))
	write("later", true, "zzz", true)

	f.CrashAfter(0)
	if err := f.SyncDir(dir); !errors.Is(err, ErrPowerLost) || !f.Crashed() {
		t.Fatalf("after CrashAfter(0): %v, crashed %v", err, f.Crashed())
	}
	must(f.PowerLoss())

	for name, want := range map[string]string{"durable": "abc", "old": "xyz", "gone": "123"} {
		got, err := os.ReadFile(p(name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"dead", "new", "later"} {
		if _, err := os.Stat(p(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there (%v)", name, err)
		}
	}
}

// slowSyncFS holds its first SyncDir until release is closed.
type slowSyncFS struct {
	wal.FS
	first   chan struct{} // closed when the first SyncDir has started
	release chan struct{}
	n       int
}

func (s *slowSyncFS) SyncDir(dir string) error {
	s.n++
	if s.n == 1 {
		close(s.first)
		<-s.release
	}
	return s.FS.SyncDir(dir)
}

// TestPowerLossOverlappingDirSyncs: a directory sync that started before
// a file was created but returns after a later sync made the creation
// durable does not undo it (the persister's SyncDir after a removal
// overlapping the WAL writer's after a create: TestPowerLoss in buffer
// lost acknowledged rows to this under load).
func TestPowerLossOverlappingDirSyncs(t *testing.T) {
	dir := t.TempDir()
	inner := &slowSyncFS{FS: wal.OSFS(), first: make(chan struct{}), release: make(chan struct{})}
	f := New(inner)
	done := make(chan error, 1)
	go func() { done <- f.SyncDir(dir) }() // started first, returns last
	<-inner.first
	file, err := f.Create(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	file.Close()
	if err := f.SyncDir(dir); err != nil { // makes the create durable
		t.Fatal(err)
	}
	close(inner.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new")); err != nil || string(b) != "x" {
		t.Fatalf("a file whose creation a completed directory sync covered is %q, %v after the power loss", b, err)
	}
}

// TestPowerLossRenameOverFile: a rename over an existing file that no
// directory sync made durable is undone by a power loss as a file system
// undoes it: the renamed file is back under its old name (and, created
// since the last sync, gone), and the file it replaced is back too.
func TestPowerLossRenameOverFile(t *testing.T) {
	dir := t.TempDir()
	target, tmp := filepath.Join(dir, "catalog.json"), filepath.Join(dir, ".catalog.json.tmp")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	w, err := f.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := f.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	if err := f.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "old" {
		t.Fatalf("replaced file after power loss: %q, %v; want \"old\"", got, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temp file, created since the last sync, survived: %v", err)
	}
}
