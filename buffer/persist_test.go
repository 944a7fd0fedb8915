package buffer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

const day = int64(24 * time.Hour)

// writeMixed writes rows to tables cpu and mem over two UTC days, the
// second batch adding a column, and returns what it wrote by table.
func writeMixed(t *testing.T, b *WriteBuffer, base int64, n int) map[string][]row {
	t.Helper()
	want := map[string][]row{}
	for i, table := range []string{"cpu", "mem"} {
		rows := genRows(base+int64(i), n, 997)
		write(t, b, table, cpuSchema, rows)
		want[table] = append(want[table], rows...)
		next := genRows(base+day+int64(i), n/2, 1009)
		for j := range next {
			if j%4 != 0 {
				next[j].Extra = ptr(int64(j))
			}
		}
		write(t, b, table, cpuExtraSchema, next)
		want[table] = append(want[table], next...)
	}
	return want
}

func TestPersistSegment(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			store := kind.new(t)
			defer store.Close()
			cfg := persistConfig(t, mem, store)
			cfg.ReleasePersisted = true
			b := openBuffer(t, cfg)
			want := writeMixed(t, b, t0.UnixNano(), 500)
			id := roll(t, b)
			waitFor(t, "segment persisted", func() bool { return isPersisted(b, id) })
			more := genRows(t0.UnixNano()+5*day, 10, 1)
			write(t, b, "cpu", cpuSchema, more)
			want["cpu"] = append(want["cpu"], more...)

			ps := b.Persisted()
			if len(ps) != 1 || ps[0].ID != id || len(ps[0].Files) != 4 || ps[0].Rows != 1500 {
				t.Fatalf("persisted %+v", ps)
			}
			// With ReleasePersisted, the segment leaves the buffer just after
			// its WAL file is deleted.
			waitFor(t, "persisted segment released", func() bool {
				v := b.View()
				defer v.Release()
				return v.Buffered[0].ID() != id
			})
			var names []string
			for _, f := range ps[0].Files {
				names = append(names, f.Path)
				if f.URI != store.URI(f.Path) {
					t.Errorf("URI %q", f.URI)
				}
			}
			d1 := time.Unix(0, t0.UnixNano()).UTC().Format(time.DateOnly)
			d2 := time.Unix(0, t0.UnixNano()+day).UTC().Format(time.DateOnly)
			wantNames := []string{
				fmt.Sprintf("dbs/db/cpu/%s/%020d.parquet", d1, id), fmt.Sprintf("dbs/db/cpu/%s/%020d.parquet", d2, id),
				fmt.Sprintf("dbs/db/mem/%s/%020d.parquet", d1, id), fmt.Sprintf("dbs/db/mem/%s/%020d.parquet", d2, id),
			}
			if !slices.Equal(names, wantNames) {
				t.Fatalf("files %q, want %q", names, wantNames)
			}
			objstoretest.MustGet(t, store, persist.CatalogObject(b.Catalog().Version()))
			seg, err := persist.DecodeSegmentFile(persist.SegmentObject(id), objstoretest.MustGet(t, store, persist.SegmentObject(id)))
			if err != nil {
				t.Fatal(err)
			}
			if seg.FirstSequence != 1 || seg.LastSequence != 4 || seg.CatalogVersion != b.Catalog().Version() {
				t.Fatalf("segment file %+v", seg)
			}
			for table, w := range want {
				assertRows(t, viewRows(t, b, table), w)
			}
			checkStoreConsistent(t, b, store)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			// Reopen: the persisted segment is not replayed; the next id is
			// above it.
			b = openBuffer(t, cfg)
			defer b.Close()
			for table, w := range want {
				assertRows(t, viewRows(t, b, table), w)
			}
			if open := b.View(); open.Buffered[len(open.Buffered)-1].ID() <= id+1 {
				t.Fatalf("open segment %d", open.Buffered[len(open.Buffered)-1].ID())
			} else {
				open.Release()
			}
			waitAllPersisted(t, b)
			for table, w := range want {
				assertRows(t, viewRows(t, b, table), w)
			}
			checkStoreConsistent(t, b, store)
		})
	}
}

// TestPersistCrashAtEachStep crashes a persist after k store operations
// (or just before the WAL deletion), k = 0, 1, 2, … until a persist runs
// through, and checks after a restart, and after a second one, that every
// row is there exactly once and that no orphan is left.
func TestPersistCrashAtEachStep(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			for k := 0; ; k++ {
				if crashed := crashAt(t, kind.new, k); !crashed {
					if k < 6 {
						t.Fatalf("no crash at k=%d: fewer steps than expected", k)
					}
					return
				}
			}
		})
	}
}

func crashAt(t *testing.T, newStore func(*testing.T) objstore.Store, k int) bool {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := newStore(t)
	defer inner.Close()
	faulty := objstoretest.NewFaulty(inner)
	cfg := persistConfig(t, mem, faulty)
	cfg.WALFS = objstoretest.CrashFS{FS: wal.OSFS(), F: faulty}
	cfg.ReleasePersisted = k%2 == 0
	b := openBuffer(t, cfg)
	faulty.CrashAfter(k)
	want := writeMixed(t, b, t0.UnixNano(), 300)
	id := roll(t, b)
	more := genRows(t0.UnixNano()+3*day, 50, 3)
	write(t, b, "cpu", cpuSchema, more)
	want["cpu"] = append(want["cpu"], more...)
	waitFor(t, "a crash or the persist", func() bool { return faulty.Crashed() || isPersisted(b, id) })
	crashed := faulty.Crashed()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if crashed {
		t.Logf("k=%d: crashed after %v", k, faulty.Log())
	}

	for restart := range 2 {
		cfg.Store = inner
		cfg.WALFS = nil
		b = openBuffer(t, cfg)
		for table, w := range want {
			got := viewRows(t, b, table)
			if len(got) != len(w) {
				t.Fatalf("k=%d restart %d: table %s has %d rows, want %d", k, restart, table, len(got), len(w))
			}
			assertRows(t, got, w)
		}
		waitAllPersisted(t, b)
		for table, w := range want {
			assertRows(t, viewRows(t, b, table), w)
		}
		checkStoreConsistent(t, b, inner)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		checkNoTemp(t, cfg.DataDir)
	}
	return crashed
}

func TestPersistRetriesTransientFailures(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			inner := kind.new(t)
			defer inner.Close()
			faulty := objstoretest.NewFaulty(inner)
			cfg := persistConfig(t, mem, faulty)
			b := openBuffer(t, cfg)
			defer b.Close()
			faulty.FailNext(5)
			faulty.LoseAcks(3) // Puts that land but report failure
			want := writeMixed(t, b, t0.UnixNano(), 200)
			id := roll(t, b)
			waitFor(t, "segment persisted", func() bool {
				err, _ := b.PersistError()
				return isPersisted(b, id) && err == nil
			})
			if faulty.Failures() < 8 {
				t.Fatalf("%d failures injected, want 8", faulty.Failures())
			}
			for table, w := range want {
				assertRows(t, viewRows(t, b, table), w)
			}
			checkStoreConsistent(t, b, inner)
		})
	}
}

// TestPersistStoreDown: with the store down, closed segments pile up until
// writes are refused with an error naming the persist failure; once the
// store is back, they persist, leave memory, and writes resume.
func TestPersistStoreDown(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := objstore.NewMemory()
	defer inner.Close()
	faulty := objstoretest.NewFaulty(inner)
	cfg := persistConfig(t, mem, faulty)
	cfg.MemLimit = 1 << 20
	cfg.ReleasePersisted = true
	b := openBuffer(t, cfg)
	faulty.SetDown(true)

	want := map[string][]row{}
	var full error
	for i := 0; full == nil && i < 10000; i++ {
		rows := genRows(t0.UnixNano()+int64(i)*1000, 500, 1)
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, rows)
		_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
		rec.Release()
		switch {
		case err == nil:
			want["cpu"] = append(want["cpu"], rows...)
		case errors.Is(err, ErrBufferFull):
			full = err
		default:
			t.Fatal(err)
		}
	}
	if full == nil {
		t.Fatal("writes never refused")
	}
	msg := full.Error()
	if !strings.Contains(msg, "persisting closed segments to the object store is failing") || !strings.Contains(msg, objstoretest.ErrInjected.Error()) {
		t.Fatalf("error does not say that persistence fails and why: %v", full)
	}
	t.Log(msg)

	faulty.SetDown(false)
	waitFor(t, "writes resume", func() bool {
		rows := genRows(t0.UnixNano()+int64(len(want["cpu"]))*1000+7, 10, 1)
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, rows)
		defer rec.Release()
		_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
		if err == nil {
			want["cpu"] = append(want["cpu"], rows...)
		} else if !errors.Is(err, ErrBufferFull) {
			t.Fatal(err)
		}
		return err == nil
	})
	// A rollover on size may start another persist at any time: restart
	// (which removes its orphans) before checking the store.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Store = inner
	b = openBuffer(t, cfg)
	waitAllPersisted(t, b)
	assertRows(t, viewRows(t, b, "cpu"), want["cpu"])
	checkStoreConsistent(t, b, inner)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoTemp(t, cfg.DataDir)
}

// TestViewExactlyOnce reads through Views while segments are persisted and
// released underneath: every view sees every row once.
func TestViewExactlyOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	defer store.Close()
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	b := openBuffer(t, cfg)
	defer b.Close()

	var started, written atomic.Int64 // rows whose write started, returned
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Go(func() {
		for !stop.Load() {
			before := written.Load()
			v := b.View()
			n := int64(0)
			for _, s := range v.Buffered {
				for _, c := range s.Snapshot("db", "cpu") {
					n += c.Rec.NumRows()
					c.Rec.Release()
				}
			}
			for _, ps := range v.Persisted {
				n += ps.Rows
			}
			v.Release()
			after := started.Load()
			if n < before || n > after {
				select {
				case errs <- fmt.Errorf("view saw %d rows; %d to %d were written", n, before, after):
				default:
				}
				return
			}
		}
	})
	for i := range 30 {
		started.Add(100)
		write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+int64(i)*1e6, 100, 1))
		written.Add(100)
		if i%3 == 2 {
			roll(t, b)
		}
	}
	waitAllPersisted(t, b)
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if got := len(viewRows(t, b, "cpu")); got != 3000 {
		t.Fatalf("%d rows, want 3000", got)
	}
}

// TestStartupLoadsStoreCatalog: a data dir that lost its catalog file (or
// has an older one) takes the store's.
func TestStartupLoadsStoreCatalog(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	defer store.Close()
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	b := openBuffer(t, cfg)
	want := writeMixed(t, b, t0.UnixNano(), 100)
	id := roll(t, b)
	waitFor(t, "segment persisted", func() bool { return isPersisted(b, id) })
	version := b.Catalog().Version()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b.catPath); err != nil {
		t.Fatal(err)
	}
	b = openBuffer(t, cfg)
	defer b.Close()
	if b.Catalog().Version() != version {
		t.Fatalf("catalog version %d, want %d", b.Catalog().Version(), version)
	}
	for table, w := range want {
		assertRows(t, viewRows(t, b, table), w)
	}
}

// TestSharedStoreRefused: a data dir whose unpersisted WAL file has the id
// of a segment another data dir persisted to the same store must not
// delete it (its rows are nowhere else): startup fails, naming the cause.
func TestSharedStoreRefused(t *testing.T) {
	store := objstore.NewMemory()
	dirA, dirB := t.TempDir(), t.TempDir()
	open := func(dir string) *WriteBuffer {
		cfg := testConfig(t, memory.NewGoAllocator())
		cfg.DataDir = dir
		cfg.Store = store
		return openBuffer(t, cfg)
	}
	a := open(dirA)
	write(t, a, "cpu", cpuSchema, genRows(t0.UnixNano(), 10, 1)) // segment 1 of A, in A's WAL
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// B, on its own data dir but the same store, persists its segment 1.
	b := open(dirB)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+100, 10, 1))
	b.mu.Lock()
	err := b.rollLocked(time.Now(), "test")
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "segment persisted", func() bool { return len(b.Persisted()) > 0 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, memory.NewGoAllocator())
	cfg.DataDir, cfg.Store = dirA, store
	_, err = Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "two servers share one object store location") {
		t.Fatalf("reopening A: %v, want a refusal naming two servers sharing the store", err)
	}
	if _, serr := os.Stat(walFileName(filepath.Join(dirA, "wal"), 1)); serr != nil {
		t.Fatalf("A's WAL file of segment 1 is gone: %v", serr)
	}
}

// TestPersistStoreHangs: a store that stops answering (requests hang, no
// error) is seen at once: each attempt ends at PersistAttemptTimeout, is
// counted by operation and class and logged, and PersistHealth says
// persistence is failing, since when and why; once the store answers
// again, the segment persists and the report clears.
func TestPersistStoreHangs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := objstore.NewMemory()
	defer inner.Close()
	faulty := objstoretest.NewFaulty(inner)
	cfg := persistConfig(t, mem, faulty)
	cfg.PersistAttemptTimeout = 20 * time.Millisecond
	b := openBuffer(t, cfg)
	defer b.Close()
	faulty.Hang(true)
	rows := genRows(t0.UnixNano(), 100, 1)
	rec := makeRecord(memory.NewGoAllocator(), cpuSchema, rows)
	_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	id := roll(t, b)
	waitFor(t, "the hang reported", func() bool {
		h := b.PersistHealth()
		return h.LastErr != nil && h.Failures >= 2
	})
	h := b.PersistHealth()
	if !strings.Contains(h.LastErr.Error(), "did not answer within") || h.Since.IsZero() || h.Waiting != 1 {
		t.Fatalf("health while hanging: %+v", h)
	}
	if n := testutil.ToFloat64(b.metrics.storeFailures.WithLabelValues("put", "timeout")); n < 2 {
		t.Fatalf("apron_objstore_failures_total{op=put,class=timeout} = %v, want each attempt", n)
	}
	faulty.Hang(false)
	waitFor(t, "the segment persisted", func() bool { return isPersisted(b, id) })
	// The report clears once the segment's persist has ended (its WAL file
	// deleted), just after it is marked persisted.
	waitFor(t, "the report cleared", func() bool {
		h := b.PersistHealth()
		return h.LastErr == nil && h.Failures == 0 && h.Waiting == 0
	})
}

// TestPersistResumesFinishedFiles: the Parquet files an interrupted
// persist uploaded are kept at startup (their segment is still in the
// WAL), and the retry counts them done instead of uploading them again.
func TestPersistResumesFinishedFiles(t *testing.T) {
	for k := 1; k < 40; k++ {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		inner := objstore.NewMemory()
		faulty := objstoretest.NewFaulty(inner)
		cfg := persistConfig(t, mem, faulty)
		cfg.ReleasePersisted = true
		b := openBuffer(t, cfg)
		faulty.CrashAfter(k)
		want := writeMixed(t, b, t0.UnixNano(), 300)
		id := roll(t, b)
		waitFor(t, "a crash or the persist", func() bool { return faulty.Crashed() || isPersisted(b, id) })
		b.Close()
		var uploaded []string
		segmentFile := false
		for _, op := range faulty.Log() {
			if name, ok := strings.CutPrefix(op, "put "+persist.DBsPrefix); ok {
				uploaded = append(uploaded, persist.DBsPrefix+name)
			}
			segmentFile = segmentFile || strings.HasPrefix(op, "put "+persist.SegmentsPrefix)
		}
		if segmentFile || !faulty.Crashed() {
			t.Fatalf("no crash between the first Parquet upload and the segment file")
		}
		if len(uploaded) == 0 {
			mem.AssertSize(t, 0)
			continue
		}
		again := objstoretest.NewFaulty(inner)
		cfg.Store = again
		b = openBuffer(t, cfg)
		waitAllPersisted(t, b)
		for table, w := range want {
			assertRows(t, viewRows(t, b, table), w)
		}
		checkStoreConsistent(t, b, inner)
		// The retry's create-if-absent finds each kept file and compares
		// it (attributes) instead of deleting it at startup and uploading
		// it again.
		log := strings.Join(again.Log(), "\n") + "\n"
		for _, name := range uploaded {
			if strings.Contains(log, "delete "+name+"\n") {
				t.Errorf("%s, uploaded before the crash, was deleted at startup", name)
			}
			if !strings.Contains(log, "attributes "+name+"\n") {
				t.Errorf("%s, uploaded before the crash, was not found done by the retry:\n%s", name, log)
			}
		}
		b.Close()
		mem.AssertSize(t, 0)
		t.Logf("crash after %d operations: %d files uploaded before it, kept and counted done", k, len(uploaded))
		return
	}
	t.Fatal("no crash found after a Parquet upload")
}

// TestPersistCrashThenDrop crashes a persist after k store operations,
// then drops one of its tables before the restart: the retry from the WAL
// does not write the dropped table's files, so those the crashed attempt
// uploaded are found through the journal of unlisted objects
// (persist/unlisted.go) and deleted, without a listing of the store. k =
// 0, 1, … until a persist runs through.
func TestPersistCrashThenDrop(t *testing.T) {
	for k := 0; ; k++ {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		inner := objstore.NewMemory()
		faulty := objstoretest.NewFaulty(inner)
		cfg := persistConfig(t, mem, faulty)
		cfg.WALFS = objstoretest.CrashFS{FS: wal.OSFS(), F: faulty}
		cfg.PersistConcurrency = 1
		b := openBuffer(t, cfg)
		want := writeMixed(t, b, t0.UnixNano(), 300)
		faulty.CrashAfter(k)
		id := roll(t, b)
		waitFor(t, "a crash or the persist", func() bool { return faulty.Crashed() || isPersisted(b, id) })
		crashed := faulty.Crashed()
		if _, err := b.DropTable("db", "cpu", false); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil && !strings.Contains(err.Error(), "crash") {
			t.Fatal(err)
		}
		landed := len(objectsOf(t, inner, "cpu"))
		cfg.Store = inner
		cfg.WALFS = nil
		b = openBuffer(t, cfg)
		assertRows(t, viewRows(t, b, "mem"), want["mem"])
		if got := viewRows(t, b, "cpu"); len(got) != 0 {
			t.Fatalf("k=%d: %d rows of the dropped table", k, len(got))
		}
		waitAllPersisted(t, b)
		waitFor(t, "the sweep after the restart", func() bool { return swept(b) })
		// The persist settles its journal entries (deleting what it did
		// not write) after its WAL file goes.
		waitFor(t, "the journal of unlisted objects emptied", func() bool { return len(b.persist.store.Unlisted()) == 0 })
		checkStoreConsistent(t, b, inner)
		if objs := objectsOf(t, inner, "cpu"); len(objs) != 0 {
			t.Fatalf("k=%d: files of the dropped table left (%d had landed before the crash): %v", k, landed, objs)
		}

		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		inner.Close()
		mem.AssertSize(t, 0)
		if !crashed {
			if k < 4 {
				t.Fatalf("no crash at k=%d: fewer steps than expected", k)
			}
			return
		}
		t.Logf("k=%d: crashed after %v; %d files of the dropped table had landed", k, faulty.Log(), landed)
	}
}

// TestStoreErrorOutlivesDeadline: when an attempt ends at its deadline
// after the storage client retried a 503, the attempt's error names the
// 503, even though the client's last retried request was the one the
// deadline cut (a red CI run: /readyz showed only "context deadline
// exceeded" during an outage of 503s).
func TestStoreErrorOutlivesDeadline(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := objstore.NewMemory()
	defer inner.Close()
	cfg := persistConfig(t, mem, inner)
	cfg.PersistAttemptTimeout = 20 * time.Millisecond
	b := openBuffer(t, cfg)
	defer b.Close()
	err := b.attempt(context.Background(), 0, func(ctx context.Context) error {
		b.NoteStoreAttemptFailure("put", errors.New("googleapi: got HTTP response code 503"))
		<-ctx.Done()
		cut := fmt.Errorf("Post \"http://store/upload\": %w", ctx.Err())
		b.NoteStoreAttemptFailure("put", cut)
		return cut
	})
	if err == nil || !strings.Contains(err.Error(), "did not answer within") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("attempt error %v, want the deadline and the store's 503", err)
	}
	if h := b.PersistHealth(); h.LastErr == nil || !strings.Contains(h.LastErr.Error(), "503") {
		t.Fatalf("health %+v, want the store's 503 as the last error", h)
	}
}
