package objstoretest

import (
	"path/filepath"
	"strings"

	"github.com/apron-db/apron/wal"
)

// CrashFS is a file system (the OS's, usually) that dies with a Faulty
// store: its file removals, and the writes of the journal of unlisted
// objects (persist/unlisted.go), are steps of the store's sequence
// (Faulty.Gate). So a crash can fall just before a WAL file's deletion,
// and once the store has "crashed" the process is dead: it writes no
// journal and removes no file either.
type CrashFS struct {
	wal.FS
	F *Faulty
}

func (c CrashFS) Create(name string) (wal.File, error) {
	if base := filepath.Base(name); strings.HasPrefix(base, ".unlisted-objects") {
		if err := c.F.Gate("journal", base); err != nil {
			return nil, err
		}
	}
	return c.FS.Create(name)
}

func (c CrashFS) Remove(name string) error {
	if err := c.F.Gate("remove", filepath.Base(name)); err != nil {
		return err
	}
	return c.FS.Remove(name)
}
