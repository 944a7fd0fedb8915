package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

// tempFiles returns the temporary files left under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLocalSuite(t *testing.T) {
	objstoretest.RunSuite(t, func(t *testing.T) objstore.Store {
		dir := t.TempDir()
		s, err := objstore.NewLocal(filepath.Join(dir, "objects"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.Close()
			// Every Put, failed or not, removes its temporary file.
			if left := tempFiles(t, dir); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
		return s
	})
}

// recFS records file system operations and fails the one that fail says to.
type recFS struct {
	objstore.FS
	mu   sync.Mutex
	ops  []string
	fail func(op, path string) error
}

var errInjected = errors.New("injected fault")

func (r *recFS) rec(op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op+" "+path)
	if r.fail != nil {
		return r.fail(op, path)
	}
	return nil
}

func (r *recFS) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func (r *recFS) Create(name string) (objstore.File, error) {
	if err := r.rec("create", name); err != nil {
		return nil, err
	}
	f, err := r.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, fs: r, path: name, kind: "file"}, nil
}

func (r *recFS) Open(name string) (objstore.File, error) {
	f, err := r.FS.Open(name)
	if err != nil {
		return nil, err
	}
	kind := "file"
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		kind = "dir"
	}
	return &recFile{File: f, fs: r, path: name, kind: kind}, nil
}

func (r *recFS) Link(o, n string) error {
	if err := r.rec("link", o+" -> "+n); err != nil {
		return err
	}
	return r.FS.Link(o, n)
}

func (r *recFS) Rename(o, n string) error {
	if err := r.rec("rename", o+" -> "+n); err != nil {
		return err
	}
	return r.FS.Rename(o, n)
}

func (r *recFS) Remove(name string) error {
	if err := r.rec("remove", name); err != nil {
		return err
	}
	return r.FS.Remove(name)
}

func (r *recFS) Mkdir(name string, perm os.FileMode) error {
	if err := r.rec("mkdir", name); err != nil {
		return err
	}
	return r.FS.Mkdir(name, perm)
}

type recFile struct {
	objstore.File
	fs    *recFS
	path  string
	kind  string
	wrote bool
}

func (f *recFile) Write(p []byte) (int, error) {
	if !f.wrote {
		f.wrote = true
		if err := f.fs.rec("write", f.path); err != nil {
			return 0, err
		}
	}
	return f.File.Write(p)
}

func (f *recFile) Sync() error {
	op := "sync"
	if f.kind == "dir" {
		op = "syncdir"
	}
	if err := f.fs.rec(op, f.path); err != nil {
		return err
	}
	return f.File.Sync()
}

// rel rewrites the recorded paths relative to root and hides the random
// part of temporary names.
func rel(root string, ops []string) []string {
	var out []string
	for _, op := range ops {
		op = strings.ReplaceAll(op, root+"/", "")
		op = strings.ReplaceAll(op, root, ".")
		fields := strings.Fields(op)
		for i, f := range fields {
			if j := strings.Index(f, ".tmp-"); j >= 0 {
				fields[i] = f[:j] + ".tmp-*"
			}
		}
		out = append(out, strings.Join(fields, " "))
	}
	return out
}

func newRecLocal(t *testing.T) (*objstore.Local, *recFS, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "objects")
	r := &recFS{FS: objstore.OSFS{}}
	s, err := objstore.NewLocalWithOptions(root, objstore.LocalOptions{FS: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r.mu.Lock()
	r.ops = nil
	r.mu.Unlock()
	return s, r, root
}

// TestLocalWriteProtocol pins the order of the crash-safe write: temp file,
// write, fsync, rename (or link + remove), fsync of the directory; and a
// new directory is fsynced in its parent before it is used.
func TestLocalWriteProtocol(t *testing.T) {
	ctx := context.Background()
	s, r, root := newRecLocal(t)

	objstoretest.MustPut(t, s, "a/b/c", []byte("hello"), objstore.PutOptions{})
	want := []string{
		"mkdir a", "syncdir .",
		"mkdir a/b", "syncdir a",
		"create a/b/.c.tmp-*", "write a/b/.c.tmp-*", "sync a/b/.c.tmp-*",
		"rename a/b/.c.tmp-* -> a/b/c", "syncdir a/b",
	}
	if got := rel(root, r.log()); !slices.Equal(got, want) {
		t.Fatalf("Put ops:\n got %q\nwant %q", got, want)
	}

	r.ops = nil
	objstoretest.MustPut(t, s, "a/b/d", []byte("x"), objstore.PutOptions{MustNotExist: true})
	want = []string{
		"create a/b/.d.tmp-*", "write a/b/.d.tmp-*", "sync a/b/.d.tmp-*",
		"link a/b/.d.tmp-* -> a/b/d", "remove a/b/.d.tmp-*", "syncdir a/b",
	}
	if got := rel(root, r.log()); !slices.Equal(got, want) {
		t.Fatalf("Put(MustNotExist) ops:\n got %q\nwant %q", got, want)
	}

	r.ops = nil
	if err := s.Delete(ctx, "a/b/d"); err != nil {
		t.Fatal(err)
	}
	want = []string{"remove a/b/d", "syncdir a/b"}
	if got := rel(root, r.log()); !slices.Equal(got, want) {
		t.Fatalf("Delete ops:\n got %q\nwant %q", got, want)
	}
}

// TestLocalFaults fails each step of a Put in turn.
func TestLocalFaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		op        string // operation to fail
		mustNot   bool
		published bool // the object is visible despite the error
		sticky    bool // later writes fail too
	}{
		{"mkdir", "mkdir", false, false, false},
		{"fsync_new_dir_parent", "syncdir", false, false, true},
		{"create_temp", "create", false, false, false},
		{"write", "write", false, false, false},
		{"fsync_file", "sync", false, false, true},
		{"rename", "rename", false, false, false},
		{"link", "link", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, r, root := newRecLocal(t)
			r.fail = func(op, path string) error {
				if op == tc.op {
					return fmt.Errorf("%s %s: %w", op, path, errInjected)
				}
				return nil
			}
			err := s.Put(ctx, "x/y", bytes.NewReader([]byte("data")), 4, objstore.PutOptions{MustNotExist: tc.mustNot})
			if !errors.Is(err, errInjected) {
				t.Fatalf("Put: %v, want the injected fault", err)
			}
			r.fail = nil
			if left := tempFiles(t, root); len(left) > 0 {
				t.Fatalf("temporary files left: %q", left)
			}
			objstoretest.CheckAbsent(t, s, "x/y")
			err = s.Put(ctx, "x/z", bytes.NewReader([]byte("more")), 4, objstore.PutOptions{})
			if tc.sticky {
				if !errors.Is(err, errInjected) {
					t.Fatalf("Put after a failed fsync: %v, want the sticky fault", err)
				}
				if err := s.Delete(ctx, "x/z"); !errors.Is(err, errInjected) {
					t.Fatalf("Delete after a failed fsync: %v, want the sticky fault", err)
				}
			} else if err != nil {
				t.Fatalf("Put after a transient fault: %v", err)
			}
		})
	}

	// The directory fsync after the rename fails: the object may be visible
	// but is not known durable; the Put fails and the store refuses writes.
	t.Run("fsync_dir_after_rename", func(t *testing.T) {
		ctx := context.Background()
		s, r, root := newRecLocal(t)
		objstoretest.MustPut(t, s, "x/first", []byte("1"), objstore.PutOptions{})
		r.fail = func(op, path string) error {
			if op == "syncdir" && path == filepath.Join(root, "x") {
				return errInjected
			}
			return nil
		}
		if err := s.Put(ctx, "x/y", bytes.NewReader([]byte("data")), 4, objstore.PutOptions{}); !errors.Is(err, errInjected) {
			t.Fatalf("Put: %v, want the injected fault", err)
		}
		r.fail = nil
		if err := s.Put(ctx, "x/z", bytes.NewReader([]byte("z")), 1, objstore.PutOptions{}); !errors.Is(err, errInjected) {
			t.Fatalf("later Put: %v, want the sticky fault", err)
		}
		// Reads still work.
		objstoretest.CheckContent(t, s, "x/first", []byte("1"))
	})
}

// TestLocalCrashMidWrite: a reader that fails half way leaves no object and
// no visible temporary file, and keeps an older version.
func TestLocalCrashMidWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := objstoretest.Data(1, 4<<20)
	objstoretest.MustPut(t, s, "p/old", []byte("old"), objstore.PutOptions{})
	for _, name := range []string{"p/new", "p/old"} {
		err := s.Put(ctx, name, objstoretest.FailingReader(data, 3<<20), int64(len(data)), objstore.PutOptions{})
		if err == nil {
			t.Fatalf("Put(%q) with a failing reader succeeded", name)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "p"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, []string{"old"}) {
		t.Fatalf("directory holds %q, want only [old]", got)
	}
	objstoretest.CheckContent(t, s, "p/old", []byte("old"))
	objstoretest.CheckAbsent(t, s, "p/new")
}

func TestLocalURI(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	abs, _ := filepath.Abs(dir)
	if got, want := s.URI("dbs/m/x.parquet"), "file://"+abs+"/dbs/m/x.parquet"; got != want {
		t.Fatalf("URI = %q, want %q", got, want)
	}

	// A relative directory is made absolute.
	t.Chdir(dir)
	s2, err := objstore.NewLocal("rel/objects")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, want := s2.URI("a"), "file://"+filepath.Join(abs, "rel/objects/a"); got != want {
		t.Fatalf("URI = %q, want %q", got, want)
	}
}

func TestLocalClean(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objstoretest.MustPut(t, s, "a/b/keep", []byte("k"), objstore.PutOptions{})
	// What a crashed Put leaves behind.
	leftover := filepath.Join(dir, "a/b/.lost.parquet.tmp-abc123")
	if err := os.WriteFile(leftover, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, "")
	if err != nil || !slices.Equal(names(all), []string{"a/b/keep"}) {
		t.Fatalf("List = %q, %v; want only a/b/keep", names(all), err)
	}
	if n, err := s.Clean(ctx, 1<<40); err != nil || n != 0 {
		t.Fatalf("Clean(young) = %d, %v; want 0", n, err)
	}
	if n, err := s.Clean(ctx, 0); err != nil || n != 1 {
		t.Fatalf("Clean = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("leftover still there: %v", err)
	}
	objstoretest.CheckContent(t, s, "a/b/keep", []byte("k"))
}

func TestLocalReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := objstoretest.Data(3, 5000)
	objstoretest.MustPut(t, s, "dbs/m/1.parquet", data, objstore.PutOptions{})
	s.Close()
	if _, err := s.Attributes(context.Background(), "dbs/m/1.parquet"); !errors.Is(err, objstore.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	s2, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	objstoretest.CheckContent(t, s2, "dbs/m/1.parquet", data)
}

// noXattrFS is a file system without extended attributes.
type noXattrFS struct{ objstore.FS }

func (noXattrFS) SetXattr(string, string, []byte) error   { return errors.ErrUnsupported }
func (noXattrFS) GetXattr(string, string) ([]byte, error) { return nil, errors.ErrUnsupported }

func TestLocalWithoutXattrs(t *testing.T) {
	objstoretest.RunSuite(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewLocalWithOptions(t.TempDir(), objstore.LocalOptions{FS: noXattrFS{objstore.OSFS{}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// An object name that is a "directory" of another cannot exist on a file
// system: the Put fails cleanly.
func TestLocalFileDirConflict(t *testing.T) {
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objstoretest.MustPut(t, s, "a/b", []byte("file"), objstore.PutOptions{})
	if err := s.Put(ctx, "a/b/c", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{}); err == nil {
		t.Fatal("Put(a/b/c) under the object a/b succeeded")
	}
	objstoretest.MustPut(t, s, "d/e/f", []byte("x"), objstore.PutOptions{})
	if err := s.Put(ctx, "d/e", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{MustNotExist: true}); err == nil || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("Put(d/e) over a directory: %v, want a non-ErrExists error", err)
	}
	objstoretest.CheckContent(t, s, "a/b", []byte("file"))
	objstoretest.CheckContent(t, s, "d/e/f", []byte("x"))
}

func names(infos []objstore.ObjectInfo) []string {
	var out []string
	for _, o := range infos {
		out = append(out, o.Name)
	}
	return out
}

// TestLocalCRCXattr: the CRC32C is stored beside the data where the file
// system has user xattrs.
func TestLocalCRCXattr(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := objstoretest.Data(4, 1234)
	objstoretest.MustPut(t, s, "x/y", data, objstore.PutOptions{})
	v, err := objstore.OSFS{}.GetXattr(filepath.Join(dir, "x/y"), "user.apron.crc32c")
	if err != nil {
		t.Skipf("no user xattrs here (%v): the CRC is computed on read", err)
	}
	if len(v) != 4 || uint32(v[0])<<24|uint32(v[1])<<16|uint32(v[2])<<8|uint32(v[3]) != objstore.CRC32C(data) {
		t.Fatalf("xattr = %x, want %08x", v, objstore.CRC32C(data))
	}
}
