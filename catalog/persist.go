package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/apron-db/apron/wal"
)

// Load reads the catalog saved at path. A missing file is an empty catalog
// (a fresh data directory); a file that cannot be read or decoded is an
// error naming path, wrapping ErrCorrupt if the content is at fault. Limits
// apply to later writes only: a catalog over a since-lowered limit still
// loads.
func Load(path string, limits Limits) (*Catalog, error) {
	return LoadFS(wal.OSFS(), path, limits)
}

// LoadFS is Load with the file system the catalog saves through (reads
// use the OS: the file systems of package waltest write through to it).
func LoadFS(fsys wal.FS, path string, limits Limits) (*Catalog, error) {
	c := New(limits)
	c.fs = fsys
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: load %s: %w", path, err)
	}
	s, err := decodeSnapshot(data)
	if err != nil {
		return nil, fmt.Errorf("catalog: load %s: %w", path, err)
	}
	c.snap.Store(s)
	c.save.path, c.save.version, c.save.valid = path, s.version, true
	return c, nil
}

// Save writes the current snapshot to path atomically (see doc.go for the
// format and the write protocol). If path already holds the current
// version, because it was saved or loaded there, Save does nothing.
// Concurrent Saves are serialized; Apply may run alongside.
func (c *Catalog) Save(path string) error {
	c.save.Lock()
	defer c.save.Unlock()
	s := c.snap.Load()
	if c.save.valid && c.save.path == path && c.save.version == s.version {
		return nil
	}
	data, err := encodeSnapshot(s)
	if err != nil {
		return fmt.Errorf("catalog: save %s: %w", path, err)
	}
	if err := wal.WriteFileAtomic(c.fsys(), path, data); err != nil {
		return fmt.Errorf("catalog: save %s: %w", path, err)
	}
	c.save.path, c.save.version, c.save.valid = path, s.version, true
	return nil
}
