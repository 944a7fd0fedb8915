package wal

import (
	"fmt"
	"path/filepath"
)

// WriteFileAtomic replaces path with data on fsys so that a crash leaves
// either the old file or the new one, never a mix: write a temp file in
// the same directory (rename is only atomic within a file system), fsync
// it, rename it over path, then fsync the directory so the rename itself
// is durable. The temp file is removed on any failure. The small files
// that must survive a power loss beside the WAL (the catalog, the
// persisted side's journal of unlisted objects) are written with it, on
// the WAL's FS, so that the power-loss model of package waltest covers
// them too.
func WriteFileAtomic(fsys FS, path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	// A temp file left by a crash is garbage: the rename never happened.
	_ = fsys.Remove(tmp)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				_ = f.Close()
			}
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		// The file is in place (the deferred Remove of tmp finds nothing);
		// only the durability of the rename is in doubt.
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
