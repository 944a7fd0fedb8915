// Package waltest has test helpers for the wal package and its users: an
// FS that fails chosen operations on cue and counts and records syncs, in
// the spirit of pebble's vfs/errorfs. It does not import testing.
package waltest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// ErrPowerLost is the error of every operation after a simulated power
// failure (see CrashAfter).
var ErrPowerLost = errors.New("waltest: power lost")

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
	power  powerState
}

// powerState is what a simulated power failure needs to know: when each
// directory entry change happened and when its directory was last synced,
// and how much of each file a completed sync made durable.
type powerState struct {
	ops     int // operations so far, of every kind
	crashAt int // the operation that finds the power gone (0: never)
	crashed bool

	dirSynced map[string]int        // directory → op of its last completed SyncDir
	created   map[string]int        // file → op that created it
	durable   map[string]int64      // file → bytes made durable by a sync (or there when opened)
	renames   []renameRecord        // in order
	removed   map[string]removedRec // file → its durable bytes, to restore
}

type renameRecord struct {
	old, new string
	op       int
	// replaced is what was durable of a file the rename replaced at new
	// (nil if none): undoing the rename brings it back, as a file system
	// does when a rename over a file is lost.
	replaced []byte
}

type removedRec struct {
	data []byte
	op   int
}

// New returns an FS that passes everything to inner until told otherwise.
// PowerLoss works only when inner is the OS's file system (the default).
func New(inner wal.FS) *FS {
	if inner == nil {
		inner = wal.OSFS()
	}
	return &FS{inner: inner, power: powerState{
		dirSynced: map[string]int{},
		created:   map[string]int{},
		durable:   map[string]int64{},
		removed:   map[string]removedRec{},
	}}
}

// record runs fn under f's lock, with the number of the last operation.
func (f *FS) record(fn func(p *powerState, op int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.power, f.power.ops)
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

// CrashAfter makes the power fail after n more operations of any kind
// (reads of directories aside): the (n+1)th and every later one fail with
// ErrPowerLost and do nothing. PowerLoss then leaves the files as a real
// power failure at that point could have.
func (f *FS) CrashAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.power.crashAt = f.power.ops + n + 1
}

// Crashed tells whether the power failed.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.power.crashed
}

// PowerLoss makes the files written through f look as they could after a
// power failure now, taking the worst case the file system allows:
//   - directory changes (creates, renames, removes) made since their
//     directory's last completed SyncDir are undone: a file created is gone,
//     a renamed one has its old name, a removed one is back (with what was
//     durable of it);
//   - every file is cut to the bytes its last completed Sync made durable
//     (what it held when opened counts as durable).
//
// Call it once the users of f are closed; f must not be used afterwards.
func (f *FS) PowerLoss() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &f.power
	dirOK := func(name string, op int) bool { return p.dirSynced[filepath.Dir(name)] > op }
	for i := len(p.renames) - 1; i >= 0; i-- {
		r := p.renames[i]
		if dirOK(r.new, r.op) {
			continue
		}
		if err := f.inner.Rename(r.new, r.old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if d, ok := p.durable[r.new]; ok {
			p.durable[r.old] = d
			delete(p.durable, r.new)
		}
		if c, ok := p.created[r.new]; ok {
			// The file created under the old name goes back to it; the
			// new name holds what the rename replaced, if anything.
			p.created[r.old] = c
			delete(p.created, r.new)
		}
		if r.replaced != nil {
			if err := os.WriteFile(r.new, r.replaced, 0o644); err != nil {
				return err
			}
			p.durable[r.new] = int64(len(r.replaced))
		}
	}
	for name, r := range p.removed {
		if dirOK(name, r.op) {
			continue
		}
		if err := os.WriteFile(name, r.data, 0o644); err != nil {
			return err
		}
		p.durable[name] = int64(len(r.data))
	}
	for name, op := range p.created {
		if dirOK(name, op) {
			continue
		}
		if err := f.inner.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		delete(p.durable, name)
	}
	for name, size := range p.durable {
		fi, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Size() > size {
			if err := os.Truncate(name, size); err != nil {
				return err
			}
		}
	}
	return nil
}

// step counts an operation and returns the error to inject, if any.
func (f *FS) step(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.power.ops++
	if f.power.crashed || (f.power.crashAt > 0 && f.power.ops >= f.power.crashAt) {
		f.power.crashed = true
		return ErrPowerLost
	}
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
	f.record(func(p *powerState, op int) {
		p.created[name] = op
		p.durable[name] = 0
	})
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
	if fi, err := file.Stat(); err == nil {
		f.record(func(p *powerState, _ int) {
			if _, ok := p.durable[name]; !ok {
				p.durable[name] = fi.Size()
			}
		})
	}
	return &errFile{File: file, fs: f, name: name}, nil
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.step(OpRename); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	replaced, rerr := os.ReadFile(newname)
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	f.record(func(p *powerState, op int) {
		r := renameRecord{old: oldname, new: newname, op: op}
		if rerr == nil {
			if d, ok := p.durable[newname]; ok {
				replaced = replaced[:min(int64(len(replaced)), d)]
			}
			r.replaced = replaced
		}
		p.renames = append(p.renames, r)
		if d, ok := p.durable[oldname]; ok {
			p.durable[newname] = d
			delete(p.durable, oldname)
		}
		if c, ok := p.created[oldname]; ok {
			p.created[newname] = c
			delete(p.created, oldname)
		}
	})
	return nil
}

func (f *FS) Remove(name string) error {
	if err := f.step(OpRemove); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	// What was durable of the file, to bring back if the removal is not.
	data, _ := os.ReadFile(name)
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	f.record(func(p *powerState, op int) {
		d, ok := p.durable[name]
		if !ok {
			d = int64(len(data)) // not written through f: all durable
		}
		p.removed[name] = removedRec{data: data[:min(int64(len(data)), d)], op: op}
		delete(p.durable, name)
		delete(p.created, name)
	})
	return nil
}

func (f *FS) ReadDir(dir string) ([]os.DirEntry, error) { return f.inner.ReadDir(dir) }

func (f *FS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

func (f *FS) SyncDir(dir string) error {
	if err := f.step(OpSyncDir); err != nil {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	f.mu.Lock()
	start := f.power.ops
	f.mu.Unlock()
	if err := f.inner.SyncDir(dir); err != nil {
		return err
	}
	// Changes made before the sync started are durable now. Syncs of one
	// directory may overlap (the WAL writer creating a file while the
	// persister removes one): one that started earlier but returns later
	// must not undo what a later one made durable.
	f.record(func(p *powerState, _ int) {
		d := filepath.Clean(dir)
		if start+1 > p.dirSynced[d] {
			p.dirSynced[d] = start + 1
		}
	})
	return nil
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
	if d, ok := e.fs.power.durable[e.name]; !ok || fi.Size() > d {
		e.fs.power.durable[e.name] = fi.Size()
	}
	e.fs.mu.Unlock()
	return nil
}

func (e *errFile) Truncate(size int64) error {
	if err := e.fs.step(OpTruncate); err != nil {
		return &os.PathError{Op: "truncate", Path: e.name, Err: err}
	}
	return e.File.Truncate(size)
}
