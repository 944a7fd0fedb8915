package wal

import (
	"io"
	"os"
)

// File is what the WAL needs of an open file.
type File interface {
	io.Writer
	io.ReaderAt
	// Sync makes the written data durable. The OS implementation uses
	// fdatasync on Linux.
	Sync() error
	Truncate(size int64) error
	Close() error
	Stat() (os.FileInfo, error)
}

// FS is the file system the WAL works on. Tests wrap it to inject faults
// (see package waltest).
type FS interface {
	// Create creates a new file for writing; it fails if name exists.
	Create(name string) (File, error)
	// Open opens a file read-only.
	Open(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	ReadDir(dir string) ([]os.DirEntry, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the directory's entries (creates, renames) durable.
	SyncDir(dir string) error
}

// DirectOpener is implemented by an FS that can open a file for direct
// I/O (O_DIRECT), which the Writer then uses for records (see doc.go,
// Direct I/O).
type DirectOpener interface {
	OpenDirect(name string) (DirectFile, error)
}

// DirectFile is a file opened for direct I/O: every WriteAt must start at a
// multiple of DirectBlockSize, be a multiple of it long, and come from
// memory aligned to it.
type DirectFile interface {
	WriteAt(p []byte, off int64) (int, error)
	Close() error
}

// DirectBlockSize is the alignment of direct I/O: 4096 covers the logical
// block size of today's disks.
const DirectBlockSize = 4096

// OSFS returns the FS of the operating system.
func OSFS() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

// Sync uses fdatasync where there is one: the data and the file size, not
// the other metadata.
func (f osFile) Sync() error { return fdatasync(f.File) }

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
