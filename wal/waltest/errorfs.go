// Package waltest has test helpers for the wal package and its users: an
// FS that fails chosen operations on cue and counts and records syncs, in
// the spirit of pebble's vfs/errorfs. It does not import testing.
package waltest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/apron-db/apron/wal"
)

// Op is a kind of file-system operation.
type Op int

const (
	OpCreate Op = iota
	OpOpen
	OpOpenRW
	OpWrite
	OpSync
	OpTruncate
	OpRename
	OpRemove
	OpSyncDir
	numOps
)

var opNames = [...]string{"create", "open", "openrw", "write", "sync", "truncate", "rename", "remove", "syncdir"}

func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ErrInjected is the default error of an injected failure.
var ErrInjected = errors.New("waltest: injected failure")

// SyncRecord tells that a file was synced and how large it was when the
// sync started: every byte below Size is durable once the sync returned.
type SyncRecord struct {
	Name string
	Size int64
}

// FS wraps another wal.FS. Its zero value is not usable: use New.
type FS struct {
	inner wal.FS

	// SyncDelay makes every file Sync sleep this long before the inner
	// sync, widening the window in which an early release would show.
	SyncDelay time.Duration
	// PartialWrites makes an injected Write failure write the first half of
	// the bytes before it returns the error (a short write).
	PartialWrites bool
	// Direct lets the wal.Writer open its files for direct I/O (when the
	// inner FS can); without it the Writer writes through the page cache.
	Direct bool

	mu     sync.Mutex
	counts [numOps]int
	failAt [numOps]int // fail when counts reaches this (0: never)
	errs   [numOps]error
	syncs  []SyncRecord
}

// New returns an FS that passes everything to inner until told otherwise.
func New(inner wal.FS) *FS {
	if inner == nil {
		inner = wal.OSFS()
	}
	return &FS{inner: inner}
}

// FailNth makes the nth operation of kind op from now on (n = 1: the next
// one) fail with err (ErrInjected if nil). Only that one fails.
func (f *FS) FailNth(op Op, n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt[op] = f.counts[op] + n
	f.errs[op] = err
}

// Count returns how many operations of kind op were attempted.
func (f *FS) Count(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// Syncs returns the file syncs that completed successfully, in order.
func (f *FS) Syncs() []SyncRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]SyncRecord(nil), f.syncs...)
}

// SyncedSize returns the largest size of name covered by a completed sync.
func (f *FS) SyncedSize(name string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s int64 = -1
	for _, r := range f.syncs {
		if r.Name == name && r.Size > s {
			s = r.Size
		}
	}
	return s
}

// step counts an operation and returns the error to inject, if any.
func (f *FS) step(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[op]++
	if f.failAt[op] != 0 && f.counts[op] == f.failAt[op] {
		f.failAt[op] = 0
		return f.errs[op]
	}
	return nil
}

func (f *FS) Create(name string) (wal.File, error) {
	if err := f.step(OpCreate); err != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	file, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, fs: f, name: name}, nil
}

func (f *FS) Open(name string) (wal.File, error) {
	if err := f.step(OpOpen); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, fs: f, name: name}, nil
}

func (f *FS) OpenRW(name string) (wal.File, error) {
	if err := f.step(OpOpenRW); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.inner.OpenRW(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, fs: f, name: name}, nil
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.step(OpRename); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.inner.Rename(oldname, newname)
}

func (f *FS) Remove(name string) error {
	if err := f.step(OpRemove); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	return f.inner.Remove(name)
}

func (f *FS) ReadDir(dir string) ([]os.DirEntry, error) { return f.inner.ReadDir(dir) }

func (f *FS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

func (f *FS) SyncDir(dir string) error {
	if err := f.step(OpSyncDir); err != nil {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	return f.inner.SyncDir(dir)
}

// OpenDirect opens name for direct I/O through the inner FS when Direct is
// set (and the inner FS can), counting its writes as OpWrite; otherwise it
// fails, and the wal.Writer writes through the page cache.
func (f *FS) OpenDirect(name string) (wal.DirectFile, error) {
	do, ok := f.inner.(wal.DirectOpener)
	if !f.Direct || !ok {
		return nil, errors.New("waltest: direct I/O not enabled")
	}
	df, err := do.OpenDirect(name)
	if err != nil {
		return nil, err
	}
	return &errDirectFile{DirectFile: df, fs: f, name: name}, nil
}

type errDirectFile struct {
	wal.DirectFile
	fs   *FS
	name string
}

func (e *errDirectFile) WriteAt(p []byte, off int64) (int, error) {
	if err := e.fs.step(OpWrite); err != nil {
		return 0, &os.PathError{Op: "write", Path: e.name, Err: err}
	}
	return e.DirectFile.WriteAt(p, off)
}

type errFile struct {
	wal.File
	fs   *FS
	name string
}

func (e *errFile) Write(p []byte) (int, error) {
	if err := e.fs.step(OpWrite); err != nil {
		n := 0
		if e.fs.PartialWrites && len(p) > 1 {
			n, _ = e.File.Write(p[:len(p)/2])
		}
		return n, &os.PathError{Op: "write", Path: e.name, Err: err}
	}
	return e.File.Write(p)
}

func (e *errFile) Sync() error {
	if err := e.fs.step(OpSync); err != nil {
		return &os.PathError{Op: "sync", Path: e.name, Err: err}
	}
	fi, err := e.File.Stat()
	if err != nil {
		return err
	}
	if e.fs.SyncDelay > 0 {
		time.Sleep(e.fs.SyncDelay)
	}
	if err := e.File.Sync(); err != nil {
		return err
	}
	e.fs.mu.Lock()
	e.fs.syncs = append(e.fs.syncs, SyncRecord{Name: e.name, Size: fi.Size()})
	e.fs.mu.Unlock()
	return nil
}

func (e *errFile) Truncate(size int64) error {
	if err := e.fs.step(OpTruncate); err != nil {
		return &os.PathError{Op: "truncate", Path: e.name, Err: err}
	}
	return e.File.Truncate(size)
}
