// Package objstoretest is the acceptance suite that every objstore.Store
// must pass. It is test support: it imports testing, and only _test.go
// files should import it.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apron-db/apron/objstore"
)

// RunSuite runs the acceptance suite. newStore must return a new, empty
// store for each call and arrange its Close with t.Cleanup.
func RunSuite(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"round_trip", testRoundTrip},
		{"unknown_size", testUnknownSize},
		{"caller_crc", testCallerCRC},
		{"size_mismatch", testSizeMismatch},
		{"overwrite", testOverwrite},
		{"must_not_exist", testMustNotExist},
		{"must_not_exist_race", testMustNotExistRace},
		{"get_range", testGetRange},
		{"list", testList},
		{"delete", testDelete},
		{"not_found", testNotFound},
		{"invalid_names", testInvalidNames},
		{"concurrent_puts", testConcurrentPuts},
		{"cancelled_put", testCancelledPut},
		{"failing_reader", testFailingReader},
		{"uri", testURI},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// Data returns n deterministic pseudo-random bytes.
func Data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// MustPut puts data under name or fails the test.
func MustPut(t testing.TB, s objstore.Store, name string, data []byte, opts objstore.PutOptions) {
	t.Helper()
	if err := s.Put(context.Background(), name, bytes.NewReader(data), int64(len(data)), opts); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", name, len(data), err)
	}
}

// MustGet reads the whole object or fails the test.
func MustGet(t testing.TB, s objstore.Store, name string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", name, err)
	}
	return b
}

// CheckContent asserts that name holds want, through Get and Attributes.
func CheckContent(t testing.TB, s objstore.Store, name string, want []byte) {
	t.Helper()
	if got := MustGet(t, s, name); !bytes.Equal(got, want) {
		t.Fatalf("Get(%q): %d bytes, want %d bytes (equal prefix %d)", name, len(got), len(want), commonPrefix(got, want))
	}
	a, err := s.Attributes(context.Background(), name)
	if err != nil {
		t.Fatalf("Attributes(%q): %v", name, err)
	}
	if a.Size != int64(len(want)) || a.CRC32C != objstore.CRC32C(want) {
		t.Fatalf("Attributes(%q) = size %d crc %08x, want size %d crc %08x", name, a.Size, a.CRC32C, len(want), objstore.CRC32C(want))
	}
	if a.Created.IsZero() {
		t.Fatalf("Attributes(%q): zero Created", name)
	}
}

// CheckAbsent asserts that name does not exist and is not listed.
func CheckAbsent(t testing.TB, s objstore.Store, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Attributes(ctx, name); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Attributes(%q): %v, want ErrNotFound", name, err)
	}
	if rc, err := s.Get(ctx, name); !errors.Is(err, objstore.ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("Get(%q): %v, want ErrNotFound", name, err)
	}
	all, err := s.List(ctx, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, o := range all {
		if o.Name == name {
			t.Fatalf("List shows %q", name)
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	for i, n := range []int{0, 1, 1000, 3<<20 + 17} {
		name := fmt.Sprintf("dbs/metrics/cpu/2026-11-29/%020d.parquet", i)
		data := Data(uint64(i), n)
		MustPut(t, s, name, data, objstore.PutOptions{})
		CheckContent(t, s, name, data)
	}
}

func testUnknownSize(t *testing.T, s objstore.Store) {
	for i, n := range []int{0, 10, 1<<20 + 3} {
		name := fmt.Sprintf("u/%d", i)
		data := Data(uint64(i), n)
		// A reader with no Len method, so nothing can peek at the size.
		if err := s.Put(context.Background(), name, io.MultiReader(bytes.NewReader(data)), -1, objstore.PutOptions{}); err != nil {
			t.Fatalf("Put size -1: %v", err)
		}
		CheckContent(t, s, name, data)
	}
}

func testCallerCRC(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, n := range []int{0, 100, 1 << 20} {
		data := Data(7, n)
		crc := objstore.CRC32C(data)
		name := fmt.Sprintf("crc/ok-%d", n)
		if err := s.Put(ctx, name, bytes.NewReader(data), int64(n), objstore.PutOptions{CRC32C: &crc}); err != nil {
			t.Fatalf("Put with right CRC: %v", err)
		}
		CheckContent(t, s, name, data)

		bad := crc ^ 1
		name = fmt.Sprintf("crc/bad-%d", n)
		err := s.Put(ctx, name, bytes.NewReader(data), int64(n), objstore.PutOptions{CRC32C: &bad, MustNotExist: true})
		if !errors.Is(err, objstore.ErrChecksum) {
			t.Fatalf("Put with wrong CRC: %v, want ErrChecksum", err)
		}
		CheckAbsent(t, s, name)
	}
}

func testSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := Data(3, 1000)
	for _, size := range []int64{999, 1001, 0} {
		name := fmt.Sprintf("size/%d", size)
		err := s.Put(ctx, name, bytes.NewReader(data), size, objstore.PutOptions{})
		if !errors.Is(err, objstore.ErrSizeMismatch) {
			t.Fatalf("Put(size %d) of 1000 bytes: %v, want ErrSizeMismatch", size, err)
		}
		CheckAbsent(t, s, name)
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	a, b := Data(1, 5000), Data(2, 300)
	MustPut(t, s, "o/x", a, objstore.PutOptions{})
	MustPut(t, s, "o/x", b, objstore.PutOptions{})
	CheckContent(t, s, "o/x", b)
}

func testMustNotExist(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	// Small (one request) and bigger than a GCS test chunk (resumable).
	for _, n := range []int{10, 1<<20 + 5} {
		name := fmt.Sprintf("mne/%d.parquet", n)
		first, second := Data(1, n), Data(2, n)
		MustPut(t, s, name, first, objstore.PutOptions{MustNotExist: true})
		err := s.Put(ctx, name, bytes.NewReader(second), int64(n), objstore.PutOptions{MustNotExist: true})
		if !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("second Put(%q, MustNotExist): %v, want ErrExists", name, err)
		}
		// Same content again: still ErrExists (the caller compares CRCs).
		err = s.Put(ctx, name, bytes.NewReader(first), int64(n), objstore.PutOptions{MustNotExist: true})
		if !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("identical Put(%q, MustNotExist): %v, want ErrExists", name, err)
		}
		CheckContent(t, s, name, first)
		// With a caller-given CRC too (GCS streams this path).
		crc := objstore.CRC32C(second)
		err = s.Put(ctx, name, bytes.NewReader(second), int64(n), objstore.PutOptions{MustNotExist: true, CRC32C: &crc})
		if !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("Put(%q, MustNotExist, CRC): %v, want ErrExists", name, err)
		}
		CheckContent(t, s, name, first)
	}
}

func testMustNotExistRace(t *testing.T, s objstore.Store) {
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			d := Data(uint64(i), 2000)
			errs[i] = s.Put(context.Background(), "race/one", bytes.NewReader(d), int64(len(d)), objstore.PutOptions{MustNotExist: true})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both succeeded", winner, i)
			}
			winner = i
		case !errors.Is(err, objstore.ErrExists):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer succeeded")
	}
	CheckContent(t, s, "race/one", Data(uint64(winner), 2000))
}

func testGetRange(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := Data(9, 1000)
	MustPut(t, s, "r/obj", data, objstore.PutOptions{})
	for _, tc := range []struct {
		name       string
		off, n     int64
		start, end int
	}{
		{"start", 0, 10, 0, 10},
		{"middle", 100, 50, 100, 150},
		{"to_end", 990, -1, 990, 1000},
		{"whole", 0, -1, 0, 1000},
		{"past_end_clipped", 990, 100, 990, 1000},
		{"at_end", 1000, -1, 1000, 1000},
		{"beyond_end", 5000, 10, 1000, 1000},
		{"zero_length", 10, 0, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := s.GetRange(ctx, "r/obj", tc.off, tc.n)
			if err != nil {
				t.Fatalf("GetRange(%d, %d): %v", tc.off, tc.n, err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if want := data[tc.start:tc.end]; !bytes.Equal(got, want) {
				t.Fatalf("GetRange(%d, %d): %d bytes, want %d", tc.off, tc.n, len(got), len(want))
			}
		})
	}
	if _, err := s.GetRange(ctx, "r/obj", -1, 5); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Fatalf("GetRange(-1): %v, want ErrInvalidRange", err)
	}
}

func names(infos []objstore.ObjectInfo) []string {
	var out []string
	for _, o := range infos {
		out = append(out, o.Name)
	}
	return out
}

func testList(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	objs := map[string]int{
		"dbs/m/cpu/2026-11-29/00000000000000000012.parquet":  12,
		"dbs/m/cpu/2026-11-29/00000000000000000003.parquet":  3,
		"dbs/m/cpu/2026-11-30/00000000000000000001.parquet":  1,
		"dbs/m/cpu2/2026-11-29/00000000000000000001.parquet": 21,
		"dbs/m/cpux.parquet": 5,
		"dbs/n/a":            0,
		"z":                  7,
	}
	for name, n := range objs {
		MustPut(t, s, name, Data(uint64(n), n), objstore.PutOptions{})
	}
	all := slices.Sorted(func(yield func(string) bool) {
		for name := range objs {
			if !yield(name) {
				return
			}
		}
	})
	withPrefix := func(p string) []string {
		var out []string
		for _, n := range all {
			if strings.HasPrefix(n, p) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, prefix := range []string{"", "dbs/", "dbs/m/cpu/", "dbs/m/cpu", "dbs/m/cpu/2026-11-29/", "dbs/m/cpu/2026-11-29/0000", "dbs/m/c", "dbs/n/a", "d", "nope/", "dbs/m/cpu/2026-11-29/00000000000000000012.parquet/"} {
		got, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		if want := withPrefix(prefix); !slices.Equal(names(got), want) {
			t.Fatalf("List(%q) = %q, want %q", prefix, names(got), want)
		}
		for _, o := range got {
			n := objs[o.Name]
			if o.Size != int64(n) || o.CRC32C != objstore.CRC32C(Data(uint64(n), n)) || o.Created.IsZero() {
				t.Fatalf("List(%q): %q has %+v, want size %d", prefix, o.Name, o.Attrs, n)
			}
		}
	}
	// "dbs/m/cpu/" is one directory; "dbs/m/cpu" is a plain string prefix.
	got, _ := s.List(ctx, "dbs/m/cpu/")
	if len(got) != 3 {
		t.Fatalf("List(dbs/m/cpu/) = %q, want the 3 objects below cpu/", names(got))
	}
	for _, bad := range []string{"/", "/dbs", "dbs//", "../x", ".x"} {
		if _, err := s.List(ctx, bad); !errors.Is(err, objstore.ErrInvalidName) {
			t.Fatalf("List(%q): %v, want ErrInvalidName", bad, err)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	MustPut(t, s, "d/a/x", []byte("x"), objstore.PutOptions{})
	MustPut(t, s, "d/a/y", []byte("y"), objstore.PutOptions{})
	if err := s.Delete(ctx, "d/a/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	CheckAbsent(t, s, "d/a/x")
	CheckContent(t, s, "d/a/y", []byte("y"))
	if err := s.Delete(ctx, "d/a/x"); err != nil {
		t.Fatalf("Delete of a deleted object: %v, want nil (idempotent)", err)
	}
	if err := s.Delete(ctx, "d/never/was"); err != nil {
		t.Fatalf("Delete of a missing object: %v, want nil", err)
	}
	// Deleting a "directory" name deletes nothing.
	if err := s.Delete(ctx, "d/a"); err != nil {
		t.Fatalf("Delete(d/a): %v", err)
	}
	CheckContent(t, s, "d/a/y", []byte("y"))
	// The name can be used again, even with MustNotExist.
	MustPut(t, s, "d/a/x", []byte("x2"), objstore.PutOptions{MustNotExist: true})
	CheckContent(t, s, "d/a/x", []byte("x2"))
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	MustPut(t, s, "nf/present", []byte("p"), objstore.PutOptions{})
	for _, name := range []string{"nf/missing", "missing/deep/name", "nf/present/below", "nf"} {
		if _, err := s.Get(ctx, name); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", name, err)
		}
		if _, err := s.GetRange(ctx, name, 0, 1); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q): %v, want ErrNotFound", name, err)
		}
		if _, err := s.GetRange(ctx, name, 100, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 100): %v, want ErrNotFound", name, err)
		}
		if _, err := s.Attributes(ctx, name); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Attributes(%q): %v, want ErrNotFound", name, err)
		}
	}
}

// InvalidNames are names every store must refuse.
var InvalidNames = []string{
	"", "/", "/a", "a/", "a//b", "..", "../a", "a/../b", "a/..", ".", "./a", "a/./b",
	"a/.hidden", ".a.tmp-1", "a\x00b", "a\nb", "a\rb", strings.Repeat("x", objstore.MaxNameLen+1),
}

func testInvalidNames(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, name := range InvalidNames {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, objstore.ErrInvalidName) {
				t.Errorf("%s(%q): %v, want ErrInvalidName", op, name, err)
			}
		}
		check("Put", s.Put(ctx, name, strings.NewReader("x"), 1, objstore.PutOptions{}))
		_, err := s.Get(ctx, name)
		check("Get", err)
		_, err = s.GetRange(ctx, name, 0, 1)
		check("GetRange", err)
		_, err = s.Attributes(ctx, name)
		check("Attributes", err)
		check("Delete", s.Delete(ctx, name))
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 0 {
		t.Fatalf("List after invalid puts = %q, %v; want empty", names(all), err)
	}
	if err := objstore.ValidateName(strings.Repeat("x", objstore.MaxNameLen)); err != nil {
		t.Fatalf("a name of MaxNameLen bytes: %v", err)
	}
}

func testConcurrentPuts(t *testing.T, s objstore.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Half share a new directory, half get their own.
			name := fmt.Sprintf("c/shared/%02d", i)
			if i%2 == 1 {
				name = fmt.Sprintf("c/own%02d/deep/obj", i)
			}
			d := Data(uint64(i), 10000+i)
			errs[i] = s.Put(context.Background(), name, bytes.NewReader(d), int64(len(d)), objstore.PutOptions{MustNotExist: i%4 == 0})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	all, err := objstoreList(s, "c/")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("List(c/) has %d objects, want %d: %q", len(all), n, names(all))
	}
	for i := range n {
		name := fmt.Sprintf("c/shared/%02d", i)
		if i%2 == 1 {
			name = fmt.Sprintf("c/own%02d/deep/obj", i)
		}
		CheckContent(t, s, name, Data(uint64(i), 10000+i))
	}
}

func objstoreList(s objstore.Store, prefix string) ([]objstore.ObjectInfo, error) {
	return s.List(context.Background(), prefix)
}

// cancellingReader cancels its context once it has given cancelAt bytes,
// then keeps giving bytes, as a slow producer would.
type cancellingReader struct {
	r        io.Reader
	given    int
	cancelAt int
	cancel   context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	if c.given >= c.cancelAt {
		c.cancel()
	}
	p = p[:min(len(p), 4096)]
	n, err := c.r.Read(p)
	c.given += n
	return n, err
}

func testCancelledPut(t *testing.T, s objstore.Store) {
	old := Data(1, 1000)
	MustPut(t, s, "cancel/existing", old, objstore.PutOptions{})
	for _, tc := range []struct {
		name string
		size int
		opts objstore.PutOptions
		keep []byte
	}{
		{"cancel/new-small", 100_000, objstore.PutOptions{}, nil},
		{"cancel/new-big", 2 << 20, objstore.PutOptions{MustNotExist: true}, nil},
		{"cancel/existing", 2 << 20, objstore.PutOptions{}, old},
	} {
		data := Data(2, tc.size)
		for _, withCRC := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			opts := tc.opts
			if withCRC {
				crc := objstore.CRC32C(data)
				opts.CRC32C = &crc
			}
			r := &cancellingReader{r: bytes.NewReader(data), cancelAt: tc.size / 2, cancel: cancel}
			err := s.Put(ctx, tc.name, r, int64(tc.size), opts)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Put(%q, crc %v): %v, want context.Canceled", tc.name, withCRC, err)
			}
			if tc.keep == nil {
				CheckAbsent(t, s, tc.name)
			} else {
				CheckContent(t, s, tc.name, tc.keep)
			}
		}
	}
	all, err := objstoreList(s, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("List after cancelled puts = %q, %v; want only cancel/existing", names(all), err)
	}
}

var errReader = errors.New("objstoretest: reader failed")

// FailingReader gives the first n bytes of data, then fails with an error.
func FailingReader(data []byte, n int) io.Reader {
	return io.MultiReader(bytes.NewReader(data[:n]), iotestErrReader{})
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errReader }

func testFailingReader(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := Data(5, 1<<20)
	old := Data(6, 10)
	MustPut(t, s, "fail/existing", old, objstore.PutOptions{})
	for _, name := range []string{"fail/new", "fail/existing"} {
		for _, size := range []int64{int64(len(data)), -1} {
			err := s.Put(ctx, name, FailingReader(data, len(data)/2), size, objstore.PutOptions{})
			if !errors.Is(err, errReader) {
				t.Fatalf("Put(%q) with failing reader: %v, want the reader's error", name, err)
			}
		}
	}
	CheckAbsent(t, s, "fail/new")
	CheckContent(t, s, "fail/existing", old)
}

func testURI(t *testing.T, s objstore.Store) {
	u := s.URI("dbs/m/x.parquet")
	if !strings.HasSuffix(u, "/dbs/m/x.parquet") || !strings.Contains(u, "://") {
		t.Fatalf("URI = %q", u)
	}
}
