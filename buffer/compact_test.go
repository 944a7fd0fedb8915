package buffer

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
	"github.com/apron-db/apron/wal"
)

// writeSegments writes n segments of rows of cpu (and mem) over two days,
// the later ones with a column more, each persisted, and returns the rows.
func writeSegments(t *testing.T, b *WriteBuffer, n int) map[string][]row {
	t.Helper()
	want := map[string][]row{}
	for i := range n {
		for table, w := range writeMixed(t, b, t0.UnixNano()+int64(i)*1_000_003, 40) {
			want[table] = append(want[table], w...)
		}
		roll(t, b)
	}
	waitAllPersisted(t, b)
	waitFor(t, "the persisted segments out of memory", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.mu.closed) == 0
	})
	return want
}

// listings counts the Index's listings of db.table files: from segment
// files and from compactions.
func listings(b *WriteBuffer, table string) (segments, compacted int) {
	for _, s := range b.Persisted() {
		for _, f := range s.Files {
			if f.Table != table {
				continue
			}
			if s.Compaction != nil {
				compacted++
			} else {
				segments++
			}
		}
	}
	return segments, compacted
}

func compactionConfig(t *testing.T, mem memory.Allocator, store objstore.Store) Config {
	cfg := persistConfig(t, mem, store)
	cfg.ReleasePersisted = true
	cfg.CompactionMinFiles = 3
	return cfg
}

// TestCompaction: a table's files of one day merge into one file per day;
// every row stays exactly once (the columns added later null in the older
// rows), a View taken before reads its old files to the end, the inputs
// leave the store once it is released, and a restart finds the merged
// files.
func TestCompaction(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			store := kind.new(t)
			cfg := compactionConfig(t, mem, store)
			b := openBuffer(t, cfg)
			want := writeSegments(t, b, 4)
			if s, c := listings(b, "cpu"); s != 8 || c != 0 {
				t.Fatalf("before: %d files from segments, %d compacted; want 8 (4 segments × 2 days), 0", s, c)
			}
			before := b.View()
			if err := b.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s, c := listings(b, "cpu"); s != 0 || c != 2 {
				t.Fatalf("after: %d files from segments, %d compacted; want 0, 2 (one per day)", s, c)
			}
			for table, w := range want {
				assertRows(t, liveRows(t, b, table), w)
			}
			if err := b.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertRows(t, viewOf(t, b, before, "cpu"), want["cpu"])
			before.Release()
			waitFor(t, "the inputs deleted", func() bool { return swept(b) })
			checkStoreConsistent(t, b, store)
			if got := len(objectsOf(t, store, "cpu")); got != 2 {
				t.Fatalf("%d cpu objects after the sweep, want 2", got)
			}
			// Compacting again finds nothing to do.
			if err := b.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, c := listings(b, "cpu"); c != 2 {
				t.Fatalf("a second compaction changed the listings: %d compacted", c)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openBuffer(t, cfg)
			defer b.Close()
			for table, w := range want {
				assertRows(t, liveRows(t, b, table), w)
			}
			if s, c := listings(b, "cpu"); s != 0 || c != 2 {
				t.Fatalf("after a restart: %d files from segments, %d compacted", s, c)
			}
			checkStoreConsistent(t, b, store)
			// More segments, then the merged files merge again with them.
			more := writeSegments(t, b, 2)
			for table, w := range more {
				want[table] = append(want[table], w...)
			}
			if err := b.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s, c := listings(b, "cpu"); s != 0 || c != 2 {
				t.Fatalf("after the second round: %d files from segments, %d compacted", s, c)
			}
			for table, w := range want {
				assertRows(t, liveRows(t, b, table), w)
			}
			waitFor(t, "the inputs deleted", func() bool { return swept(b) })
			checkStoreConsistent(t, b, store)
		})
	}
}

// TestCompactionCrashAtEachStep: a crash of the store at each operation
// of a compaction (and the sweep after it) leaves, after restarts, every
// row exactly once and, once startup's sweep is done, no orphan and no
// listed file missing. Every operation with the memory store; every
// third with the local one, whose restarts cost more (it is the same
// sequence of operations).
func TestCompactionCrashAtEachStep(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			step := 1
			if kind.name == "local" {
				step = 3
			}
			for k := 0; ; k += step {
				if !compactionCrashAt(t, kind.new, k) {
					if k < 4 {
						t.Fatalf("no crash at k=%d: fewer steps than expected", k)
					}
					t.Logf("crashed at each of the %d store operations of a compaction and its sweep", k)
					return
				}
			}
		})
	}
}

func compactionCrashAt(t *testing.T, newStore func(*testing.T) objstore.Store, k int) bool {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := newStore(t)
	defer inner.Close()
	faulty := objstoretest.NewFaulty(inner)
	cfg := compactionConfig(t, mem, faulty)
	cfg.WALFS = objstoretest.CrashFS{FS: wal.OSFS(), F: faulty}
	b := openBuffer(t, cfg)
	want := writeSegments(t, b, 3)
	faulty.CrashAfter(k)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	running := b
	go func() {
		if err := running.Compact(ctx); err != nil {
			done <- err
			return
		}
		done <- running.Sweep(ctx)
	}()
	var err error
	finished := false
	waitFor(t, "a crash or the compaction", func() bool {
		select {
		case err = <-done:
			finished = true
			return true
		default:
			return faulty.Crashed()
		}
	})
	cancel()
	if !finished {
		err = <-done // the compaction's retries end with ctx
	}
	crashed := faulty.Crashed()
	if !crashed && err != nil {
		t.Fatalf("k=%d: %v", k, err)
	}
	if err := b.Close(); err != nil && !strings.Contains(err.Error(), "crash") {
		t.Fatal(err)
	}
	for restart := range 2 {
		cfg.Store = inner
		cfg.WALFS = nil
		b = openBuffer(t, cfg)
		for table, w := range want {
			got := liveRows(t, b, table)
			if len(got) != len(w) {
				t.Fatalf("k=%d restart %d: %s has %d rows, want %d", k, restart, table, len(got), len(w))
			}
			assertRows(t, got, w)
		}
		waitFor(t, "the sweep after the restart", func() bool { return swept(b) })
		checkStoreConsistent(t, b, inner)
		if got := b.persist.store.Unlisted(); len(got) != 0 {
			t.Fatalf("k=%d restart %d: once swept, the journal of unlisted objects still names %q", k, restart, got)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return crashed
}

// TestCompactionMaxFiles: a day of more than compactMaxFiles files is
// merged compactMaxFiles at a time (the merge holds a batch of each
// input), oldest first; the next round merges the rest with the merged
// file, and no row is lost or doubled.
func TestCompactionMaxFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := compactionConfig(t, mem, objstore.NewMemory())
	b := openBuffer(t, cfg)
	defer b.Close()
	want := writeSegments(t, b, compactMaxFiles+2)
	if err := b.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, c := listings(b, "cpu"); s != 2*2 || c != 2 {
		t.Fatalf("after a round: %d files from segments, %d compacted; want 4 (2 a day), 2", s, c)
	}
	// The backlog: 2 tables × 2 days × the 2 files a round left.
	if n := testutil.ToFloat64(b.metrics.compactionBacklog); n != 8 {
		t.Fatalf("apron_compaction_backlog_files %v after a round that left 2 files of each table's day; want 8", n)
	}
	for table, w := range want {
		assertRows(t, liveRows(t, b, table), w)
	}
	if err := b.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, c := listings(b, "cpu"); s != 0 || c != 2 {
		t.Fatalf("after the second round: %d files from segments, %d compacted; want 0, 2", s, c)
	}
	if n := testutil.ToFloat64(b.metrics.compactionBacklog); n != 0 {
		t.Fatalf("apron_compaction_backlog_files %v once every day is merged; want 0", n)
	}
	for table, w := range want {
		assertRows(t, liveRows(t, b, table), w)
	}
}
