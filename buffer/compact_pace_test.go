package buffer

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/objstore"
)

// compactionGateStore holds a compaction at two points: the read of its
// first input (until readOn is closed) and the upload of its merged file
// (until putOn is closed); reading and putting are closed as each is
// reached.
type compactionGateStore struct {
	objstore.Store
	readOnce, putOnce sync.Once
	reading, readOn   chan struct{}
	putting, putOn    chan struct{}
}

func newCompactionGateStore() *compactionGateStore {
	return &compactionGateStore{Store: objstore.NewMemory(),
		reading: make(chan struct{}), readOn: make(chan struct{}), putting: make(chan struct{}), putOn: make(chan struct{})}
}

func (s *compactionGateStore) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "dbs/") {
		s.readOnce.Do(func() { close(s.reading) })
		select {
		case <-s.readOn:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, name)
}

func (s *compactionGateStore) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	if strings.Contains(name, "/c0") && strings.HasSuffix(name, ".parquet") {
		s.putOnce.Do(func() { close(s.putting) })
		select {
		case <-s.putOn:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Put(ctx, name, data, size, opts)
}

// TestCompactionGivesWayToPersist: a compaction runs in the persister's
// goroutine; a segment that closes while it runs is persisted from
// inside it (by its pacer, between the batches it reads), not after it.
// The compaction is held at the read of its first input while the
// segment closes, then at the upload of its merged file, after its last
// batch: by then the segment must be persisted. Without the pacer it
// waits for the whole compaction, and the test times out.
func TestCompactionGivesWayToPersist(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	gate := newCompactionGateStore()
	cfg := compactionConfig(t, mem, gate)
	cfg.CompactionInterval = 20 * time.Millisecond
	b := openBuffer(t, cfg)
	defer b.Close()
	var readOnce, putOnce sync.Once
	readOn := func() { readOnce.Do(func() { close(gate.readOn) }) }
	putOn := func() { putOnce.Do(func() { close(gate.putOn) }) }
	defer putOn()
	defer readOn()
	for i := range 3 {
		writeMixed(t, b, t0.UnixNano()+int64(i)*1_000_003, 40)
		roll(t, b)
	}
	waitClosed(t, "a compaction to start", gate.reading)
	writeMixed(t, b, t0.UnixNano()+5_000_000_007, 40)
	id := roll(t, b)
	readOn()
	waitClosed(t, "the compaction to reach its upload", gate.putting)
	if !isPersisted(b, id) {
		t.Fatalf("segment %d, closed while a compaction ran, is not persisted when the compaction ends", id)
	}
	putOn()
	waitFor(t, "the compaction", func() bool { _, c := listings(b, "cpu"); return c > 0 })
}

// TestCompactionStopsAtShutdown: a shutdown (FinishPersist) stops a
// compaction at its next step rather than waiting for the merge: nothing
// is committed, and the next start compacts the files.
func TestCompactionStopsAtShutdown(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	gate := newCompactionGateStore()
	close(gate.putOn)
	cfg := compactionConfig(t, mem, gate)
	cfg.CompactionInterval = 20 * time.Millisecond
	b := openBuffer(t, cfg)
	var readOnce sync.Once
	readOn := func() { readOnce.Do(func() { close(gate.readOn) }) }
	defer readOn()
	want := map[string][]row{}
	for i := range 3 {
		for table, rows := range writeMixed(t, b, t0.UnixNano()+int64(i)*1_000_003, 40) {
			want[table] = append(want[table], rows...)
		}
		roll(t, b)
	}
	waitClosed(t, "a compaction to start", gate.reading)
	finished := make(chan error, 1)
	go func() { finished <- b.FinishPersist(context.Background()) }()
	waitFor(t, "the shutdown to begin", b.draining)
	readOn()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("FinishPersist waited for the compaction")
	}
	if _, c := listings(b, "cpu"); c != 0 {
		t.Fatalf("%d compacted files after a compaction stopped by the shutdown", c)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.CompactionInterval = 0
	b = openBuffer(t, cfg)
	defer b.Close()
	if err := b.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, c := listings(b, "cpu"); s != 0 || c == 0 {
		t.Fatalf("after the restart: %d files of segments, %d compacted; want all compacted", s, c)
	}
	for table, rows := range want {
		assertRows(t, liveRows(t, b, table), rows)
	}
}

// TestCompactionShareWhileWriting: while writes arrive, a compaction
// sleeps between its steps (its share of the CPU); with none, it does
// not.
func TestCompactionShareWhileWriting(t *testing.T) {
	for _, writing := range []bool{false, true} {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		cfg := compactionConfig(t, mem, objstore.NewMemory())
		cfg.CompactionShare = 0.5
		b := openBuffer(t, cfg)
		writeSegments(t, b, 3)
		if writing {
			b.lastWrite.Store(time.Now().Add(time.Hour).UnixNano()) // writes keep arriving
		} else {
			b.lastWrite.Store(0)
		}
		if err := b.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		paced := testutil.ToFloat64(b.metrics.compactionPaced)
		if writing != (paced > 0) {
			t.Errorf("writing %v: the compaction was held back %.3f s", writing, paced)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		mem.AssertSize(t, 0)
	}
}

// waitClosed waits for ch to be closed.
func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	waitFor(t, what, func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
}

// persistGateStore holds each upload of a segment's Parquet file (not a
// compaction's) while hold is set, until the test lets it go: arrived
// gets a value as one is held, release lets it go; once open is closed,
// none is held. reads counts the reads of Parquet files (a compaction's
// inputs).
type persistGateStore struct {
	objstore.Store
	hold                   atomic.Bool
	arrived, release, open chan struct{}
	openOnce               sync.Once
	reads                  atomic.Int32
}

func newPersistGateStore() *persistGateStore {
	s := &persistGateStore{Store: objstore.NewMemory(), arrived: make(chan struct{}), release: make(chan struct{}), open: make(chan struct{})}
	s.hold.Store(true)
	return s
}

func (s *persistGateStore) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "dbs/") && strings.HasSuffix(name, ".parquet") {
		s.reads.Add(1)
	}
	return s.Store.Get(ctx, name)
}

func (s *persistGateStore) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	if s.hold.Load() && strings.HasPrefix(name, "dbs/") && strings.HasSuffix(name, ".parquet") && !strings.Contains(name, "/c0") {
		select {
		case s.arrived <- struct{}{}:
			select {
			case <-s.release:
			case <-s.open:
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-s.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Put(ctx, name, data, size, opts)
}

// waitArrived waits for an upload to be held, after what.
func (s *persistGateStore) waitArrived(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("no upload held after %s", what)
	}
}

// openAll lets every upload go, those held and those to come.
func (s *persistGateStore) openAll() { s.openOnce.Do(func() { close(s.open) }) }

// holdPersister holds the persister in the upload of the segment it
// closes with rows of mem.
func holdPersister(t *testing.T, b *WriteBuffer, gate *persistGateStore, rows []row) {
	t.Helper()
	gate.hold.Store(true)
	write(t, b, "mem", cpuSchema, rows)
	roll(t, b)
	gate.waitArrived(t, "a segment of mem closed")
}

// openSmallGated opens a buffer of a 4 MiB limit over a
// persistGateStore holding nothing yet (hold it with holdPersister),
// compacting only when asked; at the end it lets every upload go,
// closes the buffer and checks its memory.
func openSmallGated(t *testing.T) (*WriteBuffer, *persistGateStore) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	gate := newPersistGateStore()
	gate.hold.Store(false)
	cfg := compactionConfig(t, mem, gate)
	cfg.MemLimit = 4 << 20
	b := openBuffer(t, cfg)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(gate.openAll)
	return b, gate
}

// fillToPressing writes rows of mem (a day on) until the buffer holds
// three quarters of its limit (memoryPressing), and returns them.
func fillToPressing(t *testing.T, b *WriteBuffer) []row {
	t.Helper()
	out := fillTo(t, b, b.cfg.MemLimit/4*3, 0)
	if !b.memoryPressing() {
		t.Fatalf("memory does not press at %d of %d bytes", b.bufferedNow(), b.cfg.MemLimit)
	}
	return out
}

// fillTo writes 1,000-row batches of mem (a day on, the rows' times
// offset by offset ns) until the buffer holds bytes, and returns them.
func fillTo(t *testing.T, b *WriteBuffer, bytes, offset int64) []row {
	t.Helper()
	var out []row
	for i := 0; b.bufferedNow() < bytes; i++ {
		if i > 10_000 {
			t.Fatalf("the buffer holds %d bytes after %d writes; want %d of %d", b.bufferedNow(), i, bytes, b.cfg.MemLimit)
		}
		rows := genRows(t0.UnixNano()+day+int64(i)*1000+offset, 1000, 1)
		write(t, b, "mem", cpuSchema, rows)
		out = append(out, rows...)
	}
	return out
}

// TestCompactionWhilePersistsNeverStop: under writes that never let the
// persister rest (a closed segment waits each time a persist ends), a
// compaction that is due still starts, takes turns with the persists
// and completes, the sweep deletes its inputs, and every segment is
// persisted. When compaction waited for an idle persister, none started;
// when its pacer persisted every waiting segment before its next step,
// the one that started never ended. Each fails this test.
func TestCompactionWhilePersistsNeverStop(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	gate := newPersistGateStore()
	cfg := compactionConfig(t, mem, gate)
	cfg.CompactionInterval = time.Millisecond // due at every turn of the persister
	b := openBuffer(t, cfg)
	defer b.Close()
	defer gate.openAll()
	// One table, one day: one file a segment.
	want := map[string][]row{}
	segments := 0
	writeOne := func() {
		rows := genRows(t0.UnixNano()+int64(segments)*1_000_003, 40, 1)
		write(t, b, "cpu", cpuSchema, rows)
		want["cpu"] = append(want["cpu"], rows...)
		roll(t, b)
		segments++
	}
	compacted := func() bool { _, c := listings(b, "cpu"); return c > 0 }
	writeOne()
	gate.waitArrived(t, "the first segment closed")
	for !compacted() {
		if segments > 100 {
			t.Fatalf("no compaction completed in %d persists, each ending with a segment waiting", segments)
		}
		// The next segment closes while the last one's upload is held:
		// when that persist ends, a segment waits.
		writeOne()
		gate.release <- struct{}{}
		gate.waitArrived(t, "a segment closed")
	}
	// The round ended between two persists, and the sweep ran after it:
	// the persister is held in the next upload, a segment waiting.
	if !swept(b) {
		t.Fatal("the compaction's inputs were not swept before the next persist")
	}
	if n := len(objectsOf(t, gate, "cpu")); n >= segments {
		t.Fatalf("%d files of cpu in the store after a compaction of %d segments' files and its sweep", n, segments)
	}
	gate.openAll()
	waitAllPersisted(t, b)
	assertRows(t, liveRows(t, b, "cpu"), want["cpu"])
}

// TestSweepGivesWayToPersist: a sweep with much to do (a dropped table's
// listings to rewrite and files to delete) stops after one step when
// memory presses and a segment waits, and leaves the rest for the next
// sweep, which finishes once the segment is persisted. (Writes would
// otherwise wait at the memory limit behind a drop's deletes.)
func TestSweepGivesWayToPersist(t *testing.T) {
	b, gate := openSmallGated(t)
	const files = 5
	for i := range files {
		write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+int64(i)*1_000_003, 40, 1))
		roll(t, b)
	}
	waitAllPersisted(t, b)
	if n := listedOf(t, gate, "cpu"); n != files {
		t.Fatalf("%d files of cpu listed; want %d", n, files)
	}
	// The persister is held in the next segment's upload, then the
	// buffer fills to three quarters of its limit.
	want := map[string][]row{"mem": genRows(t0.UnixNano(), 40, 1)}
	holdPersister(t, b, gate, want["mem"])
	want["mem"] = append(want["mem"], fillToPressing(t, b)...)
	if _, err := b.DropTable("db", "cpu", false); err != nil {
		t.Fatal(err)
	}
	if err := b.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := listedOf(t, gate, "cpu"); n != files-1 {
		t.Fatalf("a sweep while memory presses and a segment waits left %d listings of the dropped table's files; want %d (one rewritten, then it gives way)", n, files-1)
	}
	if n := len(objectsOf(t, gate, "cpu")); n != files {
		t.Fatalf("%d files of the dropped table left after a sweep that gave way; want all %d", n, files)
	}
	gate.hold.Store(false)
	gate.openAll()
	waitFor(t, "the dropped table's files deleted", func() bool { return len(objectsOf(t, gate, "cpu")) == 0 && swept(b) })
	if n := listedOf(t, gate, "cpu"); n != 0 {
		t.Fatalf("%d listings of the dropped table's files left", n)
	}
	checkStoreConsistent(t, b, gate)
	assertRows(t, liveRows(t, b, "mem"), want["mem"])
}

// TestPersistFirstWhileMemoryPresses: with the buffer at three quarters
// of its limit and a segment waiting, a compaction that is due does not
// take the persister's time: the waiting segments are persisted first,
// and the round runs once memory no longer presses.
func TestPersistFirstWhileMemoryPresses(t *testing.T) {
	b, gate := openSmallGated(t)
	want := map[string][]row{}
	for i := range 3 {
		rows := genRows(t0.UnixNano()+int64(i)*1_000_003, 40, 1)
		write(t, b, "cpu", cpuSchema, rows)
		want["cpu"] = append(want["cpu"], rows...)
		roll(t, b)
	}
	waitAllPersisted(t, b)
	// The persister is held in the next segment's upload; the buffer
	// fills to three quarters of its limit, and that segment closes too.
	want["mem"] = genRows(t0.UnixNano(), 40, 1)
	holdPersister(t, b, gate, want["mem"])
	want["mem"] = append(want["mem"], fillToPressing(t, b)...)
	roll(t, b)
	if !b.memoryPressing() {
		t.Fatal("memory no longer presses once the full segment closed")
	}
	b.kickCompaction() // 3 files of cpu's day: a round is due
	gate.release <- struct{}{}
	gate.waitArrived(t, "the first mem segment persisted") // the next persist: of the full segment
	if n := gate.reads.Load(); n != 0 {
		t.Fatalf("a compaction read %d files while memory pressed and a segment waited", n)
	}
	gate.hold.Store(false)
	gate.openAll()
	waitAllPersisted(t, b)
	waitFor(t, "the compaction once memory no longer presses", func() bool { _, c := listings(b, "cpu"); return c > 0 })
	for table, rows := range want {
		assertRows(t, liveRows(t, b, table), rows)
	}
}
