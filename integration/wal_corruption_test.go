package integration

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const walHeaderSize = 32

// walFiles lists <dir>/wal/*.wal, oldest first.
func walFiles(t testing.TB, dataDir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// putIDs writes ids from..from+n-1 to db.table with one plain DoPut per
// batch of size per.
func putIDs(t testing.TB, addr, db, table string, from, n, per int64, pause time.Duration) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := flightClient(t, addr)
	for i := from; i < from+n; i += per {
		rec := idRecord(mem, i, per)
		_, err := flightPut(testCtx(t), c, []string{db, table}, mem, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("writing ids %d..%d: %v", i, i+per-1, err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// TestWALCorruptOldestFile flips a byte in the first record of the oldest
// WAL file: the server refuses to start, naming the file, the offset and
// --wal-move-corrupt; with --wal-move-corrupt it starts, sets the file aside
// and serves the later files' data.
func TestWALCorruptOldestFile(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir, "--object-store", "none")
	putIDs(t, srv.Addr, "c", "t", 0, 100, 100, 0) // one record in the oldest file
	srv.Stop(t)
	srv = startServer(t, dir, "--object-store", "none", "--segment-duration", "1s")
	putIDs(t, srv.Addr, "c", "t", 100, 100, 10, 250*time.Millisecond) // ~2.5s: more files
	srv.Stop(t)

	files := walFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("want at least two WAL files, got %v", files)
	}
	oldest := files[0]
	b, err := os.ReadFile(oldest)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < walHeaderSize+8 || string(b[:8]) != "APRONWAL" {
		t.Fatalf("%s: %d bytes, want a header and a record", oldest, len(b))
	}
	n := binary.LittleEndian.Uint32(b[walHeaderSize:])
	if int(n) > len(b)-walHeaderSize-8 {
		t.Fatalf("%s: first record length %d runs past the file (%d bytes)", oldest, n, len(b))
	}
	off := walHeaderSize + 8 + int(n)/2
	b[off] ^= 0x5a
	if err := os.WriteFile(oldest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped byte %d of %s (first record of %d bytes)", off, filepath.Base(oldest), n)

	code, stderr := startServerExpectFailure(t, dir, "--object-store", "none", "--segment-duration", "1s")
	if code == 0 {
		t.Errorf("exit code 0 with a corrupt WAL, want non-zero")
	}
	for _, want := range []string{filepath.Base(oldest), "offset", "--wal-move-corrupt"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("startup error does not mention %q:\n%s", want, stderr)
		}
	}
	// Nothing was moved by the failed start.
	if m, _ := filepath.Glob(filepath.Join(dir, "wal", "*.corrupt*")); len(m) != 0 {
		t.Errorf("failed start left %v", m)
	}

	srv = startServer(t, dir, "--object-store", "none", "--wal-move-corrupt")
	if m, _ := filepath.Glob(filepath.Join(dir, "wal", "*.corrupt*")); len(m) == 0 {
		t.Errorf("no .corrupt file in %s after --wal-move-corrupt", filepath.Join(dir, "wal"))
	}
	check := func(when string) {
		d, err := tryReadTable(t, srv.Addr, "c", "t")
		if err != nil {
			t.Fatalf("%s: reading c.t: %v", when, err)
		}
		got := d.ids(t, "id")
		if len(got) != 100 || got[0] != 100 || got[99] != 199 {
			t.Errorf("%s: got %d rows (ids %v…), want exactly ids 100..199 from the later files", when, len(got), got[:min(5, len(got))])
		}
	}
	check("after --wal-move-corrupt")
	// The next start needs no flag: the corrupt file was set aside.
	srv.Stop(t)
	srv = startServer(t, dir, "--object-store", "none")
	check("after a plain restart")
}

// TestWALTornTail cuts a few bytes off the newest WAL file: the server
// starts, warns about the dropped bytes and serves every whole record.
func TestWALTornTail(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir, "--object-store", "none")
	putIDs(t, srv.Addr, "torn", "t", 0, 50, 10, 0) // 5 records
	srv.Stop(t)
	files := walFiles(t, dir)
	newest := files[len(files)-1]
	st, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() <= walHeaderSize {
		t.Fatalf("newest WAL file %s has no records (%d bytes); files %v", newest, st.Size(), files)
	}
	if err := os.Truncate(newest, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, dir, "--object-store", "none")
	logs := srv.Stderr()
	if !strings.Contains(logs, "level=WARN") || !(stringsContainsFold(logs, "truncat") || stringsContainsFold(logs, "dropped")) {
		t.Errorf("no warning about truncated bytes in the startup log:\n%s", logs)
	}
	wantIDRange(t, readTable(t, srv.Addr, "torn", "t"), 0, 40)
	srv = srv.Restart(t)
	wantIDRange(t, readTable(t, srv.Addr, "torn", "t"), 0, 40)
	// And it takes writes again.
	putIDs(t, srv.Addr, "torn", "t", 40, 10, 10, 0)
	srv = srv.Restart(t)
	wantIDRange(t, readTable(t, srv.Addr, "torn", "t"), 0, 50)
}
