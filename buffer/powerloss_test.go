package buffer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// TestPowerLoss cuts the power after k file-system operations of the WAL,
// k = 0, 1, 2, … until a run ends before its kth operation: concurrent
// writers, segments rolling over and persisting (their WAL
// files removed). After each cut, the WAL directory is made as a real power
// failure could leave it (unsynced bytes dropped, directory changes since
// the last directory sync undone: waltest.FS.PowerLoss), and the buffer is
// reopened: startup must succeed, every acknowledged row must be there
// exactly once, and no row twice; once it has persisted what it replayed,
// no Parquet file is left unlisted. Both WAL write paths: buffered and
// O_DIRECT.
func TestPowerLoss(t *testing.T) {
	for _, direct := range []bool{false, true} {
		name := "buffered"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			for k := 0; ; k++ {
				crashed, n := powerLossAt(t, k, direct)
				if !crashed {
					if k < 20 {
						t.Fatalf("a run took only %d operations", k)
					}
					t.Logf("%d runs; an uncut run takes %d WAL operations", k, n)
					return
				}
			}
		})
	}
}

func powerLossAt(t *testing.T, k int, direct bool) (crashed bool, ops int) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fs := waltest.New(nil)
	fs.Direct = direct
	cfg := persistConfig(t, mem, store)
	cfg.WALFS = fs
	// Persisted segments' WAL files are shrunk a few hundred bytes at a
	// time before they are removed, so that the power is cut between
	// those steps too (wal.RemovePaced).
	cfg.WALRemovePace = wal.RemovePace{Step: 500}
	// A clock that moves 300 ms each time it is read: the open segment
	// rolls over every few writes.
	var clock atomic.Int64
	cfg.Now = func() time.Time { return t0.Add(time.Duration(clock.Add(1)) * 300 * time.Millisecond) }
	cfg.SegmentDuration = time.Second
	fs.CrashAfter(k)

	const writers, batches, rows = 3, 8, 10
	var (
		mu    sync.Mutex
		acked = map[int64]bool{} // times of acknowledged rows
	)
	if b, err := Open(cfg); err == nil {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range batches {
					start := t0.UnixNano() + int64((w*batches+i)*rows)
					rec := makeRecord(mem, cpuSchema, genRows(start, rows, 1))
					_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{IfNotExists: catalog.CreateTable, IfExists: catalog.AppendIfExists})
					rec.Release()
					if err != nil {
						return // the power is gone: every later write fails too
					}
					mu.Lock()
					for j := range rows {
						acked[start+int64(j)] = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Let the persists run, unless the power goes first.
		waitFor(t, "a power loss or every segment persisted", func() bool {
			if fs.Crashed() {
				return true
			}
			b.mu.Lock()
			closed := append([]*Segment(nil), b.mu.closed...)
			b.mu.Unlock()
			for _, s := range closed {
				if !isPersisted(b, s.id) {
					return false
				}
			}
			return true
		})
		_ = b.Close() // fails after a crash
	}
	crashed = fs.Crashed()
	ops = fs.Count(waltest.OpCreate) + fs.Count(waltest.OpWrite) + fs.Count(waltest.OpSync) +
		fs.Count(waltest.OpTruncate) + fs.Count(waltest.OpRemove) + fs.Count(waltest.OpSyncDir) + fs.Count(waltest.OpRename) + fs.Count(waltest.OpOpenRW) + fs.Count(waltest.OpOpen)
	if err := fs.PowerLoss(); err != nil {
		t.Fatal(err)
	}

	cfg.WALFS = nil
	b, err := Open(cfg)
	if err != nil {
		t.Fatalf("k=%d: startup after the power loss: %v", k, err)
	}
	defer b.Close()
	seen := map[int64]int{}
	for _, r := range viewRows(t, b, "cpu") {
		seen[r.Time]++
	}
	for tm, n := range seen {
		if n > 1 {
			t.Fatalf("k=%d: row %d is there %d times", k, tm-t0.UnixNano(), n)
		}
		if off := tm - t0.UnixNano(); off < 0 || off >= writers*batches*rows {
			t.Fatalf("k=%d: row %d was never written", k, off)
		}
	}
	for tm := range acked {
		if seen[tm] != 1 {
			t.Fatalf("k=%d: acknowledged row %d lost (%d acknowledged, %d there)", k, tm-t0.UnixNano(), len(acked), len(seen))
		}
	}
	// What the power cut off mid-persist leaves in the store is found
	// through the journal of unlisted objects (on the same file system):
	// once the segments replayed are persisted, nothing is unlisted.
	waitAllPersisted(t, b)
	waitFor(t, "the journal of unlisted objects emptied", func() bool { return len(b.persist.store.Unlisted()) == 0 })
	checkStoreConsistent(t, b, store)
	return crashed, ops
}
