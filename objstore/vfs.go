package objstore

import (
	"io"
	"os"
)

// FS is the part of a file system that Local uses. The default is the
// operating system's (OSFS); tests wrap it to fail chosen operations on cue,
// after pebble's vfs/errorfs. Paths are native paths.
type FS interface {
	// Create makes a new file for writing; it fails if name exists
	// (O_CREATE|O_EXCL).
	Create(name string) (File, error)
	// Open opens a file or a directory for reading (a directory is opened to
	// be fsynced).
	Open(name string) (File, error)
	// Link makes newname a hard link to oldname, failing with an error
	// satisfying errors.Is(err, fs.ErrExist) if newname exists.
	Link(oldname, newname string) error
	Rename(oldname, newname string) error
	Remove(name string) error
	Mkdir(name string, perm os.FileMode) error
	Lstat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]os.DirEntry, error)
	// SetXattr and GetXattr keep the CRC32C beside the data; a file system
	// without extended attributes returns errors.ErrUnsupported.
	SetXattr(path, attr string, value []byte) error
	GetXattr(path, attr string) ([]byte, error)
}

// File is an open file or directory of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Sync() error
	Stat() (os.FileInfo, error)
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// osFile is a file OSFS made: an *os.File that can start its writeback
// (WritebackStarter; writeback.go).
type osFile struct{ *os.File }

func (OSFS) Open(name string) (File, error)                 { return os.Open(name) }
func (OSFS) Link(oldname, newname string) error             { return os.Link(oldname, newname) }
func (OSFS) Rename(oldname, newname string) error           { return os.Rename(oldname, newname) }
func (OSFS) Remove(name string) error                       { return os.Remove(name) }
func (OSFS) Mkdir(name string, perm os.FileMode) error      { return os.Mkdir(name, perm) }
func (OSFS) Lstat(name string) (os.FileInfo, error)         { return os.Lstat(name) }
func (OSFS) ReadDir(name string) ([]os.DirEntry, error)     { return os.ReadDir(name) }
func (OSFS) SetXattr(path, attr string, value []byte) error { return setXattr(path, attr, value) }
func (OSFS) GetXattr(path, attr string) ([]byte, error)     { return getXattr(path, attr) }
