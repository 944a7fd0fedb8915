package objstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// crcXattr is the extended attribute that holds an object's CRC32C (4 bytes,
// big endian). It is set on the temporary file before the fsync and the
// rename, so it is published atomically with the data. Where the file system
// has no user xattrs the CRC is computed by reading the file.
const crcXattr = "user.apron.crc32c"

var errXattrMissing = errors.New("objstore: xattr missing")

// tmpMarker is part of every temporary file name: ".<base>.tmp-<random>".
const tmpMarker = ".tmp-"

// Local is a Store in a directory of the local file system: object
// "a/b/c.parquet" is the file <dir>/a/b/c.parquet. See doc.go for how writes
// are made crash-safe.
type Local struct {
	root string // absolute
	fs   FS

	dirMu sync.Mutex          // serialises directory creation
	dirs  map[string]struct{} // directories known to exist durably; under dirMu

	mu struct {
		sync.Mutex
		closed bool
		// failed is sticky: set when an fsync fails, returned by every later
		// write (a failed fsync cannot be retried safely).
		failed error
	}
}

var _ Store = (*Local)(nil)

// LocalOptions tune NewLocalWithOptions.
type LocalOptions struct {
	// FS replaces the operating system's file system (fault injection).
	FS FS
}

// NewLocal opens (creating if needed) a store rooted at dir.
func NewLocal(dir string) (*Local, error) {
	return NewLocalWithOptions(dir, LocalOptions{})
}

// NewLocalWithOptions is NewLocal with options.
func NewLocalWithOptions(dir string, opts LocalOptions) (*Local, error) {
	if dir == "" {
		return nil, errors.New("objstore: local store needs a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = OSFS{}
	}
	l := &Local{root: abs, fs: fsys, dirs: make(map[string]struct{})}
	if err := l.ensureDir(abs); err != nil {
		return nil, err
	}
	return l, nil
}

// Dir returns the absolute root directory.
func (l *Local) Dir() string { return l.root }

func (l *Local) path(name string) string {
	return filepath.Join(l.root, filepath.FromSlash(name))
}

// writable returns the reason writes are refused, if any.
func (l *Local) writable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.failed
}

func (l *Local) readable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	return nil
}

// fail records a failed fsync; every later write returns it.
func (l *Local) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.failed == nil {
		l.mu.failed = fmt.Errorf("objstore: local store failed, restart needed: %w", err)
	}
	return l.mu.failed
}

// syncDir fsyncs a directory so that entries made or removed in it survive
// a power loss (etcd #6368).
func (l *Local) syncDir(dir string) error {
	d, err := l.fs.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// ensureDir makes dir and its missing parents, fsyncing the parent of each
// directory that it creates (or first sees in this process, as an earlier
// process may have died before syncing it). Known directories are
// remembered, so the common case is one map lookup.
func (l *Local) ensureDir(dir string) error {
	l.dirMu.Lock()
	defer l.dirMu.Unlock()
	if _, ok := l.dirs[dir]; ok {
		return nil
	}
	// Collect the missing chain, deepest first: up to a known directory, or
	// up to the root (or the first existing directory above it, which are
	// not ours to sync).
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, ok := l.dirs[d]; ok {
			break
		}
		if !strings.HasPrefix(d, l.root+string(filepath.Separator)) { // root or above
			if fi, err := l.fs.Lstat(d); err == nil && fi.IsDir() {
				if d == l.root {
					chain = append(chain, d)
				}
				break
			}
		}
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	slices.Reverse(chain)
	for _, d := range chain {
		err := l.fs.Mkdir(d, 0o755)
		if err != nil && !errors.Is(err, iofs.ErrExist) {
			return fmt.Errorf("objstore: mkdir: %w", err)
		}
		if err != nil { // exists: must be a directory
			fi, serr := l.fs.Lstat(d)
			if serr != nil {
				return fmt.Errorf("objstore: mkdir: %w", serr)
			}
			if !fi.IsDir() {
				return fmt.Errorf("objstore: mkdir %s: not a directory (an object has the name of a parent)", d)
			}
		}
		if parent := filepath.Dir(d); parent != d {
			if err := l.syncDir(parent); err != nil {
				return fmt.Errorf("objstore: %w", l.fail(err))
			}
		}
		l.dirs[d] = struct{}{}
	}
	return nil
}

// Put writes the object crash-safely: a temporary file in the target
// directory, written, fsynced, then renamed over the name (or, with
// MustNotExist, hard-linked to it, which fails atomically if the name is
// taken), and the directory fsynced. A failure at any step before the
// rename/link leaves no object and removes the temporary file.
func (l *Local) Put(ctx context.Context, name string, data io.Reader, size int64, opts PutOptions) (err error) {
	if err := checkPut(name, data); err != nil {
		return err
	}
	if err := l.writable(); err != nil {
		return err
	}
	full := l.path(name)
	dir, base := filepath.Split(full)
	dir = filepath.Clean(dir)
	if err := l.ensureDir(dir); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+base+tmpMarker+strconv.FormatUint(rand.Uint64(), 36))
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, err)
	}
	published := false
	defer func() {
		if f != nil {
			f.Close()
		}
		if !published {
			l.fs.Remove(tmp) // best effort; Clean removes what is left
		}
	}()

	h := crc32.New(castagnoli)
	src := io.Reader(ctxReader{ctx, data})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := io.CopyBuffer(io.MultiWriter(newWritebackWriter(f), h), src, make([]byte, 256<<10))
	if err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, err)
	}
	crc := h.Sum32()
	if err := checkSizeCRC(name, size, n, opts.CRC32C, crc); err != nil {
		return err
	}
	_ = l.fs.SetXattr(tmp, crcXattr, binary.BigEndian.AppendUint32(nil, crc)) // optional cache
	if err := f.Sync(); err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, l.fail(fmt.Errorf("fsync %s: %w", tmp, err)))
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("objstore: put %q: %w", name, cerr)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, err)
	}

	if opts.MustNotExist {
		if err := l.fs.Link(tmp, full); err != nil {
			if errors.Is(err, iofs.ErrExist) {
				if fi, serr := l.fs.Lstat(full); serr == nil && fi.IsDir() {
					return fmt.Errorf("objstore: put %q: a directory has that name", name)
				}
				return fmt.Errorf("objstore: put %q: %w", name, ErrExists)
			}
			return fmt.Errorf("objstore: put %q: %w", name, err)
		}
		published = true
		if err := l.fs.Remove(tmp); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			// The object is in place; only the temporary name is left over.
			published = false
		}
	} else {
		if err := l.fs.Rename(tmp, full); err != nil {
			return fmt.Errorf("objstore: put %q: %w", name, err)
		}
		published = true
	}
	if err := l.syncDir(dir); err != nil {
		return fmt.Errorf("objstore: put %q: %w", name, l.fail(err))
	}
	return nil
}

// notFound reports whether err means that a path does not exist (or that a
// parent of it is a file, so that it cannot).
func notFound(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// open opens the object's file, checking that it is a regular file.
func (l *Local) open(op, name string) (File, os.FileInfo, error) {
	if err := l.readable(); err != nil {
		return nil, nil, err
	}
	f, err := l.fs.Open(l.path(name))
	if notFound(err) {
		return nil, nil, fmt.Errorf("objstore: %s %q: %w", op, name, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("objstore: %s %q: %w", op, name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("objstore: %s %q: %w", op, name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("objstore: %s %q: %w", op, name, ErrNotFound)
	}
	return f, fi, nil
}

// Get returns a reader over the object. The open file keeps the version that
// was current at the call, even if the name is replaced or deleted later.
func (l *Local) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, _, err := l.open("get", name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// GetRange returns a reader over part of the object (see Store).
func (l *Local) GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if err := checkRange(name, off); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, fi, err := l.open("get", name)
	if err != nil {
		return nil, err
	}
	start, end := clip(fi.Size(), off, n)
	return sectionReadCloser{io.NewSectionReader(f, start, end-start), f}, nil
}

type sectionReadCloser struct {
	*io.SectionReader
	io.Closer
}

// crcOf returns the CRC32C of the file at path: from its xattr, or by
// reading it.
func (l *Local) crcOf(path string, size int64) (uint32, error) {
	if v, err := l.fs.GetXattr(path, crcXattr); err == nil && len(v) == 4 {
		return binary.BigEndian.Uint32(v), nil
	}
	f, err := l.fs.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

func (l *Local) attrs(path string, fi os.FileInfo) (Attrs, error) {
	crc, err := l.crcOf(path, fi.Size())
	if err != nil {
		return Attrs{}, err
	}
	return Attrs{Size: fi.Size(), CRC32C: crc, Created: fi.ModTime()}, nil
}

// Attributes returns size, CRC32C (from the xattr written by Put, or computed
// by reading the file) and creation time (the file's mtime).
func (l *Local) Attributes(ctx context.Context, name string) (Attrs, error) {
	if err := ValidateName(name); err != nil {
		return Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return Attrs{}, err
	}
	if err := l.readable(); err != nil {
		return Attrs{}, err
	}
	p := l.path(name)
	fi, err := l.fs.Lstat(p)
	if notFound(err) || (err == nil && !fi.Mode().IsRegular()) {
		return Attrs{}, fmt.Errorf("objstore: attributes %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Attrs{}, fmt.Errorf("objstore: attributes %q: %w", name, err)
	}
	a, err := l.attrs(p, fi)
	if notFound(err) {
		return Attrs{}, fmt.Errorf("objstore: attributes %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Attrs{}, fmt.Errorf("objstore: attributes %q: %w", name, err)
	}
	return a, nil
}

// isTemp reports whether a directory entry is one of our temporary files
// (any hidden entry is skipped by List, as names cannot start with '.').
func isTemp(base string) bool {
	return strings.HasPrefix(base, ".") && strings.Contains(base, tmpMarker)
}

// List walks the directories under prefix. Hidden entries (temporary files)
// and anything that is not a regular file are skipped.
func (l *Local) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := l.readable(); err != nil {
		return nil, err
	}
	// Start at the deepest directory that every match lies under.
	startRel := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		startRel = prefix[:i]
	}
	var out []ObjectInfo
	var walk func(rel string) error
	walk = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := l.fs.ReadDir(l.path(rel))
		if notFound(err) {
			return nil // vanished, or never there
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			name := e.Name()
			if rel != "" {
				name = rel + "/" + name
			}
			switch {
			case e.IsDir():
				// Descend only if names below could match the prefix.
				if strings.HasPrefix(name+"/", prefix) || strings.HasPrefix(prefix, name+"/") {
					if err := walk(name); err != nil {
						return err
					}
				}
			case e.Type().IsRegular():
				if !strings.HasPrefix(name, prefix) {
					continue
				}
				fi, err := e.Info()
				if notFound(err) {
					continue // deleted meanwhile
				}
				if err != nil {
					return err
				}
				a, err := l.attrs(l.path(name), fi)
				if notFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				out = append(out, ObjectInfo{Name: name, Attrs: a})
			}
		}
		return nil
	}
	if err := walk(startRel); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the object and fsyncs its directory. A missing name is not
// an error. Directories left empty are kept (removing them would race with a
// concurrent Put into them).
func (l *Local) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.writable(); err != nil {
		return err
	}
	p := l.path(name)
	fi, err := l.fs.Lstat(p)
	if notFound(err) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: delete %q: %w", name, err)
	}
	if err := l.fs.Remove(p); err != nil {
		if notFound(err) {
			return nil
		}
		return fmt.Errorf("objstore: delete %q: %w", name, err)
	}
	if err := l.syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("objstore: delete %q: %w", name, l.fail(err))
	}
	return nil
}

// URI returns the file:// URL of the object's file.
func (l *Local) URI(name string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(l.path(name))}).String()
}

// Clean removes temporary files left by interrupted Puts whose modification
// time is at least minAge old, and returns how many it removed. Run it at
// startup (minAge 0 is safe only when no Put is running); with Puts running,
// pass a minAge longer than any Put takes.
func (l *Local) Clean(ctx context.Context, minAge time.Duration) (int, error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	removed := 0
	cutoff := time.Now().Add(-minAge)
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := l.fs.ReadDir(dir)
		if notFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		dirty := false
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case e.IsDir():
				if err := walk(p); err != nil {
					return err
				}
			case isTemp(e.Name()):
				fi, err := e.Info()
				if err != nil || fi.ModTime().After(cutoff) {
					continue
				}
				if err := l.fs.Remove(p); err != nil && !notFound(err) {
					return err
				}
				removed++
				dirty = true
			}
		}
		if dirty {
			if err := l.syncDir(dir); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	if err := walk(l.root); err != nil {
		return removed, fmt.Errorf("objstore: clean: %w", err)
	}
	return removed, nil
}

// Close makes later calls fail with ErrClosed. Readers already returned stay
// usable. Idempotent.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	return nil
}
