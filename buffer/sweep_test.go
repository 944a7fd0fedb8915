package buffer

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// liveRows reads db.table through a View as queries do: dropped rows and
// files left out.
func liveRows(t *testing.T, b *WriteBuffer, table string) []row {
	t.Helper()
	v := b.View()
	defer v.Release()
	return viewOf(t, b, v, table)
}

func viewOf(t *testing.T, b *WriteBuffer, v *View, table string) []row {
	t.Helper()
	tbl, ok := v.Catalog().Table("db", table)
	if !ok {
		return nil
	}
	var out []row
	for _, seg := range v.Buffered {
		for _, c := range v.Chunks(seg, "db", table) {
			rec, err := Project(c, tbl.ArrowSchema(), b.Allocator())
			c.Rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rowsOf(t, rec)...)
			rec.Release()
		}
	}
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database == "db" && f.Table == table {
				out = append(out, readParquet(t, b.Store(), f.Path, b.Allocator())...)
			}
		}
	}
	return out
}

// swept says whether the sweep has nothing left to do.
func swept(b *WriteBuffer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.sweep.dirty) == 0 && len(b.mu.sweep.doomed) == 0 && b.mu.sweep.deleting == 0
}

// objectsOf lists the Parquet objects of db.table.
func objectsOf(t *testing.T, store objstore.Store, table string) []string {
	t.Helper()
	objs, err := store.List(context.Background(), persist.DBsPrefix+"db/"+table+"/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

// listedOf is the files of db.table the store's segment files list.
func listedOf(t *testing.T, store objstore.Store, table string) int {
	t.Helper()
	objs, err := store.List(context.Background(), persist.SegmentsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		seg, err := persist.DecodeSegmentFile(o.Name, objstoretest.MustGet(t, store, o.Name))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range seg.Files {
			if f.Table == table {
				n++
			}
		}
	}
	return n
}

// TestSweepDropped: a dropped table's files leave the segment files at
// once and the store once no View that could read them is held; a View
// taken before the drop reads its rows to the end; a restart finds the
// table gone and the store consistent.
func TestSweepDropped(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			store := kind.new(t)
			cfg := persistConfig(t, mem, store)
			cfg.ReleasePersisted = true
			b := openBuffer(t, cfg)
			want := writeMixed(t, b, t0.UnixNano(), 300)
			roll(t, b)
			waitAllPersisted(t, b)
			if len(objectsOf(t, store, "cpu")) == 0 {
				t.Fatal("no cpu files persisted")
			}
			before := b.View()
			if _, err := b.DropTable("db", "cpu", false); err != nil {
				t.Fatal(err)
			}
			if got := liveRows(t, b, "cpu"); len(got) != 0 {
				t.Fatalf("%d rows of the dropped table in a new View", len(got))
			}
			waitFor(t, "the segment files rewritten", func() bool { return listedOf(t, store, "cpu") == 0 })
			if err := b.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(objectsOf(t, store, "cpu")) == 0 {
				t.Fatal("the dropped table's files were deleted while a View taken before the drop is held")
			}
			assertRows(t, viewOf(t, b, before, "cpu"), want["cpu"])
			before.Release()
			waitFor(t, "the sweep", func() bool { return swept(b) })
			if objs := objectsOf(t, store, "cpu"); len(objs) != 0 {
				t.Fatalf("files of the dropped table left: %v", objs)
			}
			assertRows(t, liveRows(t, b, "mem"), want["mem"])
			checkStoreConsistent(t, b, store)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openBuffer(t, cfg)
			defer b.Close()
			if _, ok := b.Catalog().Table("db", "cpu"); ok {
				t.Fatal("the dropped table is back after a restart")
			}
			assertRows(t, liveRows(t, b, "mem"), want["mem"])
			checkStoreConsistent(t, b, store)
		})
	}
}

// TestSweepCrashAtEachStep: a crash of the store at each step of the
// sweep of a dropped table's files leaves, after restarts, the table
// dropped, every other row once, and (once the sweep that startup begins
// is done) no file listed that is gone and no file unlisted.
func TestSweepCrashAtEachStep(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			for k := 0; ; k++ {
				if !sweepCrashAt(t, kind.new, k) {
					if k < 2 {
						t.Fatalf("no crash at k=%d: fewer steps than expected", k)
					}
					t.Logf("crashed at each of the %d store operations of the sweep", k)
					return
				}
			}
		})
	}
}

func sweepCrashAt(t *testing.T, newStore func(*testing.T) objstore.Store, k int) bool {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := newStore(t)
	defer inner.Close()
	faulty := objstoretest.NewFaulty(inner)
	cfg := persistConfig(t, mem, faulty)
	cfg.ReleasePersisted = true
	cfg.WALFS = objstoretest.CrashFS{FS: wal.OSFS(), F: faulty}
	b := openBuffer(t, cfg)
	want := writeMixed(t, b, t0.UnixNano(), 300)
	roll(t, b)
	waitAllPersisted(t, b)
	faulty.CrashAfter(k)
	if _, err := b.DropTable("db", "cpu", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a crash or the sweep", func() bool { return faulty.Crashed() || swept(b) })
	crashed := faulty.Crashed()
	if err := b.Close(); err != nil && !strings.Contains(err.Error(), "crash") {
		t.Fatal(err)
	}
	for restart := range 2 {
		cfg.Store = inner
		cfg.WALFS = nil
		b = openBuffer(t, cfg)
		if _, ok := b.Catalog().Table("db", "cpu"); ok {
			t.Fatalf("k=%d restart %d: the dropped table is back", k, restart)
		}
		if got := liveRows(t, b, "cpu"); len(got) != 0 {
			t.Fatalf("k=%d restart %d: %d rows of the dropped table", k, restart, len(got))
		}
		assertRows(t, liveRows(t, b, "mem"), want["mem"])
		waitFor(t, "the sweep after the restart", func() bool { return swept(b) })
		checkStoreConsistent(t, b, inner)
		if got := b.persist.store.Unlisted(); len(got) != 0 {
			t.Fatalf("k=%d restart %d: once swept, the journal of unlisted objects still names %q", k, restart, got)
		}
		if objs := objectsOf(t, inner, "cpu"); len(objs) != 0 {
			t.Fatalf("k=%d restart %d: files of the dropped table left: %v", k, restart, objs)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return crashed
}

// TestSweepExpired: once a database's retention expires every row of a
// persisted file, the file leaves the segment files and the store, and
// the rows stay out of every View and after a restart.
func TestSweepExpired(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	clock := &fakeClock{now: t0.Add(20 * 24 * time.Hour)}
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	cfg.Now = clock.Now
	b := openBuffer(t, cfg)
	old := genRows(t0.UnixNano(), 100, 1)
	recent := genRows(t0.UnixNano()+15*day, 100, 1)
	write(t, b, "cpu", cpuSchema, old)
	write(t, b, "cpu", cpuSchema, recent)
	roll(t, b)
	waitAllPersisted(t, b)
	assertRows(t, liveRows(t, b, "cpu"), append(append([]row(nil), old...), recent...))
	files := len(objectsOf(t, store, "cpu"))

	if _, err := b.SetRetention("db", 10*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	assertRows(t, filterRows(liveRows(t, b, "cpu"), b.View()), recent)
	waitFor(t, "the expired file deleted", func() bool { return len(objectsOf(t, store, "cpu")) == files-1 && swept(b) })
	checkStoreConsistent(t, b, store)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBuffer(t, cfg)
	defer b.Close()
	assertRows(t, liveRows(t, b, "cpu"), recent)
	checkStoreConsistent(t, b, store)
}

// filterRows keeps the rows v's cutoff keeps (readers filter rows; the
// buffer only leaves out whole files), and releases v.
func filterRows(rows []row, v *View) []row {
	defer v.Release()
	c := v.Cutoff("db")
	var out []row
	for _, r := range rows {
		if r.Time >= c {
			out = append(out, r)
		}
	}
	return out
}

// TestDropDuringPersist: a table dropped while its segment is being
// persisted is not written on: the segment commits without its file
// (and names a catalog where the table is dropped), the other tables'
// files are there, and the store never gets an object of the dropped one.
// Before, the persist encoded and uploaded the dropped table's rows
// (24 s for 22M rows) and deleted them after, with the segment's memory
// held all along.
func TestDropDuringPersist(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	stall := &stallingTemp{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	cfg.PersistCreateTemp = stall.createTemp
	b := openBuffer(t, cfg)
	defer b.Close()
	want := writeMixed(t, b, t0.UnixNano(), 300)
	id := roll(t, b)
	<-stall.entered
	if _, err := b.DropTable("db", "cpu", false); err != nil {
		t.Fatal(err)
	}
	dropVersion := b.Catalog().Version()
	close(stall.release)
	waitFor(t, "the segment persisted", func() bool { return isPersisted(b, id) })
	seg, err := persist.DecodeSegmentFile(persist.SegmentObject(id), objstoretest.MustGet(t, store, persist.SegmentObject(id)))
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, f := range seg.Files {
		tables = append(tables, f.Table)
	}
	if !slices.Equal(slices.Compact(tables), []string{"mem"}) {
		t.Fatalf("segment %d lists files of tables %v, want only mem's", id, tables)
	}
	if seg.CatalogVersion < dropVersion {
		t.Fatalf("segment %d names catalog version %d, older than the drop's %d", id, seg.CatalogVersion, dropVersion)
	}
	if objs := objectsOf(t, store, "cpu"); len(objs) != 0 {
		t.Fatalf("objects of the table dropped during the persist: %v", objs)
	}
	if err, _ := b.PersistError(); err != nil {
		t.Fatalf("the skipped part counted as a persist failure: %v", err)
	}
	assertRows(t, liveRows(t, b, "mem"), want["mem"])
	checkStoreConsistent(t, b, store)
}
