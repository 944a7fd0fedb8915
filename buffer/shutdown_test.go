package buffer

import (
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
)

// gatedStore holds every upload of a Parquet file until open is closed
// (or the upload's context ends), so that a test can stop the buffer
// while a persist is in progress.
type gatedStore struct {
	objstore.Store
	open chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	if strings.HasPrefix(name, persist.DBsPrefix) {
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Put(ctx, name, data, size, opts)
}

// persistingSegment waits until the persister works on a segment.
func persistingSegment(t *testing.T, b *WriteBuffer) uint64 {
	t.Helper()
	waitFor(t, "a persist in progress", func() bool { return b.PersistHealth().Persisting != 0 })
	return b.PersistHealth().Persisting
}

func sortedRows(rs []row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}

func sameRows(t *testing.T, got, want []row) {
	t.Helper()
	g, w := sortedRows(got), sortedRows(want)
	if len(g) != len(w) {
		t.Fatalf("%d rows, want %d", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("row %d: %s, want %s", i, g[i], w[i])
		}
	}
}

// TestFinishPersist: during a shutdown the persist in progress runs on to
// its commit point and no other starts; cut short by its context, it is
// redone by the next Open, with every row once.
func TestFinishPersist(t *testing.T) {
	t.Run("finishes", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		inner := objstore.NewMemory()
		defer inner.Close()
		store := &gatedStore{Store: inner, open: make(chan struct{})}
		b := openBuffer(t, persistConfig(t, mem, store))
		want := genRows(t0.UnixNano(), 500, 1)
		write(t, b, "cpu", cpuSchema, want)
		id := roll(t, b)
		if got := persistingSegment(t, b); got != id {
			t.Fatalf("persisting segment %d, want %d", got, id)
		}
		done := make(chan error, 1)
		go func() { done <- b.FinishPersist(context.Background()) }()
		// A segment closed during the shutdown is left to the next start.
		write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+1e9, 10, 1))
		next := roll(t, b)
		close(store.open)
		if err := <-done; err != nil {
			t.Fatalf("FinishPersist: %v", err)
		}
		if !isPersisted(b, id) {
			t.Fatalf("segment %d not persisted once FinishPersist returned", id)
		}
		if isPersisted(b, next) {
			t.Fatalf("segment %d, closed during the shutdown, was persisted too", next)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		checkNoTemp(t, b.cfg.DataDir)
	})
	t.Run("cut_short", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		inner := objstore.NewMemory()
		defer inner.Close()
		cfg := persistConfig(t, mem, &gatedStore{Store: inner, open: make(chan struct{})})
		b := openBuffer(t, cfg)
		want := genRows(t0.UnixNano(), 500, 1)
		write(t, b, "cpu", cpuSchema, want)
		id := roll(t, b)
		persistingSegment(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := b.FinishPersist(ctx)
		if !errors.Is(err, ErrPersistInterrupted) {
			t.Fatalf("FinishPersist cut short: %v, want ErrPersistInterrupted", err)
		}
		// Cancelled, the persister stops (on a busy machine perhaps
		// after FinishPersist gave up waiting for it): then Close
		// unlocks the data dir.
		<-b.persist.done
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(walFileName(b.walDir, id)); err != nil {
			t.Fatalf("the WAL file of the interrupted segment: %v", err)
		}
		// The next start persists it again.
		cfg.Store = inner
		b = openBuffer(t, cfg)
		defer b.Close()
		waitFor(t, "the segment persisted again", func() bool { return isPersisted(b, id) })
		sameRows(t, viewRows(t, b, "cpu"), want)
		checkStoreConsistent(t, b, inner)
	})
}

// TestCloseLeavesHeldSegments: Close frees no segment a View still holds
// (a query cut off by a shutdown may read it); its last Release does.
// WaitReaders says how many are held.
func TestCloseLeavesHeldSegments(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 300, 1))
	v := b.View()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.WaitReaders(ctx); err == nil {
		t.Fatal("WaitReaders returned nil with a View held")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What a query cut off by the shutdown still reads is there: the
	// segment was not released (its chunks are Go memory that DuckDB
	// reads through pointers: dropped, the GC could reuse it).
	chunks := v.Buffered[len(v.Buffered)-1].Snapshot("db", "cpu")
	var rows int64
	for _, c := range chunks {
		rows += c.Rec.NumRows()
		c.Rec.Release()
	}
	if rows != 300 {
		t.Fatalf("read %d rows of the held segment after Close, want 300", rows)
	}
	seg := v.Buffered[len(v.Buffered)-1]
	v.Release()
	if c := seg.Snapshot("db", "cpu"); len(c) != 0 {
		t.Fatalf("the segment still holds %d chunks after its last View's Release", len(c))
	}
}

// TestReplayProgress: Open reports the replay's progress, whole once done.
func TestReplayProgress(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	b := openBuffer(t, cfg)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 700, 1))
	roll(t, b)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+1e9, 300, 1))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var p ReplayProgress
	if s := p.Snapshot(); s.Started || s.Done {
		t.Fatalf("progress before Open: %+v", s)
	}
	cfg.ReplayProgress = &p
	b = openBuffer(t, cfg)
	defer b.Close()
	s := p.Snapshot()
	if !s.Started || !s.Done || s.Files != 2 || s.FilesTotal != 2 || s.Rows != 1000 ||
		s.BytesTotal <= 0 || s.Bytes != s.BytesTotal || s.Percent != 100 || s.Remaining != 0 {
		t.Fatalf("progress after Open: %+v", s)
	}
}

// stallingTemp makes temporary files whose writes wait for release,
// whatever the persist's context says: an encoding that does not stop
// when cancelled, which FinishPersist leaves running.
type stallingTemp struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *stallingTemp) createTemp(dir, pattern string) (persist.TempHandle, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &stallingTempFile{File: f, s: s}, nil
}

type stallingTempFile struct {
	*os.File
	s *stallingTemp
}

func (f *stallingTempFile) Write(p []byte) (int, error) {
	f.s.once.Do(func() { close(f.s.entered) })
	<-f.s.release
	return f.File.Write(p)
}

// TestAbandonedPersistHoldsItsSegment: a persist that FinishPersist gives
// up on (it does not stop when cancelled) keeps a reference on its
// segment, so Close does not free the memory under it; the memory goes
// when the persist ends.
func TestAbandonedPersistHoldsItsSegment(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	stall := &stallingTemp{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := persistConfig(t, mem, objstore.NewMemory())
	cfg.PersistCreateTemp = stall.createTemp
	b := openBuffer(t, cfg)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 300, 1))
	roll(t, b)
	<-stall.entered
	b.mu.Lock()
	seg := b.mu.closed[0]
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.FinishPersist(ctx); !errors.Is(err, ErrPersistInterrupted) {
		t.Fatalf("FinishPersist: %v, want the persist interrupted", err)
	}
	if !b.persist.abandoned.Load() {
		t.Fatal("the stalled persist was not left running: the test shows nothing")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := seg.refs.Load(); n != 1 {
		t.Fatalf("after Close the persisting segment has %d references, want the persist's 1", n)
	}
	if !seg.HasTable("db", "cpu") {
		t.Fatal("Close freed the rows of the segment a persist still reads")
	}
	close(stall.release)
	<-b.persist.done
	if n := seg.refs.Load(); n != 0 {
		t.Fatalf("after the persist ended the segment has %d references, want 0", n)
	}
}

// TestSnapshotWhere: a snapshot of the chunks a filter admits holds
// exactly those of the whole snapshot that it admits, each told to the
// filter once (the open chunk too), and retains nothing else (the checked
// allocator finds every chunk freed once the buffer closes).
func TestSnapshotWhere(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	cfg.ChunkRows = 100
	b := openBuffer(t, cfg)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 450, int64(time.Second)))
	seg := b.Segments()[len(b.Segments())-1]
	all := seg.Snapshot("db", "cpu")
	if len(all) != 5 {
		t.Fatalf("%d chunks, want 4 sealed and the open one", len(all))
	}
	for _, cut := range []int64{t0.UnixNano() - 1, t0.Add(150 * time.Second).UnixNano(), t0.Add(420 * time.Second).UnixNano(), t0.Add(time.Hour).UnixNano()} {
		told := 0
		got := seg.SnapshotWhere("db", "cpu", func(c ChunkStat) bool { told++; return c.MaxTime >= cut })
		var want []Chunk
		for _, c := range all {
			if c.MaxTime >= cut {
				want = append(want, c)
			}
		}
		if told != len(all) || len(got) != len(want) {
			t.Fatalf("cut %d: told %d chunks and kept %d, want %d and %d", cut, told, len(got), len(all), len(want))
		}
		for i := range got {
			if got[i].MinTime != want[i].MinTime || got[i].MaxTime != want[i].MaxTime || got[i].Rec.NumRows() != want[i].Rec.NumRows() {
				t.Fatalf("cut %d: chunk %d is [%d, %d] of %d rows, want [%d, %d] of %d", cut, i, got[i].MinTime, got[i].MaxTime, got[i].Rec.NumRows(),
					want[i].MinTime, want[i].MaxTime, want[i].Rec.NumRows())
			}
			got[i].Rec.Release()
		}
	}
	for _, c := range all {
		c.Rec.Release()
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
