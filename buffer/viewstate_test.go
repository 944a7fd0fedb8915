package buffer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
)

// gatedSyncFS is the OS file system whose WAL fsyncs block, once armed,
// until released.
type gatedSyncFS struct {
	wal.FS
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when an armed Sync starts
	release chan struct{} // closed to let it finish
}

func (g *gatedSyncFS) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedSyncFS) Create(name string) (wal.File, error) {
	f, err := g.FS.Create(name)
	return gatedFile{f, g}, err
}

func (g *gatedSyncFS) OpenRW(name string) (wal.File, error) {
	f, err := g.FS.OpenRW(name)
	return gatedFile{f, g}, err
}

type gatedFile struct {
	wal.File
	g *gatedSyncFS
}

func (f gatedFile) Sync() error {
	f.g.mu.Lock()
	armed, entered, release := f.g.armed, f.g.entered, f.g.release
	f.g.armed = false
	f.g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return f.File.Sync()
}

// TestViewDoesNotWaitForWrites: a write that creates a table holds the
// write mutex across its WAL fsync; a View taken meanwhile does not wait
// for it, and shows the rows durable before; the next View shows the new
// table's rows too.
func TestViewDoesNotWaitForWrites(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	gfs := &gatedSyncFS{FS: wal.OSFS()}
	cfg.WALFS = gfs
	b := openBuffer(t, cfg)
	defer b.Close()
	before := genRows(t0.UnixNano(), 250, 1)
	write(t, b, "cpu", cpuSchema, before)

	gfs.arm()
	rec := makeRecord(memory.NewGoAllocator(), cpuSchema, genRows(t0.UnixNano(), 10, 1))
	defer rec.Release()
	wrote := make(chan error, 1)
	go func() {
		_, err := b.Write(context.Background(), "db", "mem", rec, catalog.WriteOptions{})
		wrote <- err
	}()
	<-gfs.entered
	if b.mu.TryLock() {
		b.mu.Unlock()
		close(gfs.release)
		t.Fatal("the table-creating write does not hold the write mutex across its fsync: the test shows nothing")
	}

	viewed := make(chan []row, 1)
	go func() { viewed <- viewRows(t, b, "cpu") }()
	select {
	case got := <-viewed:
		sameRows(t, got, before)
	case <-time.After(30 * time.Second):
		close(gfs.release)
		t.Fatal("View waited for a write's fsync")
	}
	if _, ok := b.Catalog().Table("db", "mem"); ok {
		t.Error("the table of the write not yet durable is in the catalog")
	}
	close(gfs.release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if got := viewRows(t, b, "mem"); len(got) != 10 {
		t.Fatalf("after the write: %d rows of mem, want 10", len(got))
	}
}

// TestViewStateReleasesSegments: a persisted segment leaves memory once the
// last View holding it goes, Views taken after its drop do not list it,
// and the retired View states do not pile up.
func TestViewStateReleasesSegments(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	defer store.Close()
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	b := openBuffer(t, cfg)
	defer b.Close()
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 300, 1))
	held := b.View()
	id := roll(t, b)
	waitFor(t, "the segment persisted and dropped", func() bool {
		_, buffered := b.Segment(id)
		return isPersisted(b, id) && !buffered
	})
	v := b.View()
	for _, s := range v.Buffered {
		if s.id == id {
			t.Fatalf("a View taken after segment %d left the buffer lists it", id)
		}
	}
	v.Release()
	seg := held.Buffered[0]
	if seg.id != id {
		t.Fatalf("the held View's first segment is %d, want %d", seg.id, id)
	}
	if n := seg.refs.Load(); n != 1 {
		t.Fatalf("segment %d has %d references while one View holds it, want 1", id, n)
	}
	if len(seg.Snapshot("db", "cpu")) == 0 {
		t.Fatal("a held View's segment lost its rows")
	}
	for _, c := range seg.Snapshot("db", "cpu") {
		c.Rec.Release()
		c.Rec.Release() // Snapshot retained it twice: once here, once above
	}
	held.Release()
	held.Release() // idempotent
	if n := seg.refs.Load(); n != 0 {
		t.Fatalf("segment %d has %d references once no View holds it, want 0", id, n)
	}
	b.mu.Lock()
	live := len(b.liveStatesLocked())
	b.mu.Unlock()
	if live != 0 {
		t.Fatalf("%d View states are live with no View held", live)
	}
}

// TestDropSegmentAfterClose: a persister Close gave up on may still drop
// a segment once Close let go of the buffer's references; a View holding
// the segment keeps its rows until it is released.
func TestDropSegmentAfterClose(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 300, 1))
	id := roll(t, b)
	held := b.View()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seg := held.Buffered[0]
	if seg.id != id {
		t.Fatalf("the held View's first segment is %d, want %d", seg.id, id)
	}
	b.dropSegment(seg) // as the abandoned persister's last step would
	if n := seg.refs.Load(); n != 1 {
		t.Fatalf("segment %d has %d references after Close and a late drop while one View holds it, want 1", id, n)
	}
	chunks := seg.Snapshot("db", "cpu")
	if len(chunks) == 0 {
		t.Fatal("a late drop after Close freed the rows of a segment a View holds")
	}
	for _, c := range chunks {
		c.Rec.Release()
	}
	held.Release()
	if n := seg.refs.Load(); n != 0 {
		t.Fatalf("segment %d has %d references once no View holds it, want 0", id, n)
	}
}
