package persist

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestEncodeSlots: files written at once through one slot all finish
// with their rows (no step waits on a slot while holding one), every
// CPU-bound step asks for the slot (the sort, each batch's gathering and
// encoding, the last flush), and an unbound step runs with every slot
// taken.
func TestEncodeSlots(t *testing.T) {
	var bound atomic.Bool
	bound.Store(true)
	var asked atomic.Int64
	s := newEncodeSlots(1, func() bool { asked.Add(1); return bound.Load() })
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const files, rows = 2, parquetBatchRows + 100 // two batches a file
	var wg sync.WaitGroup
	for range files {
		// Chunks of their own: arrow-go builds a chunk's dictionary array
		// lazily, not safely for concurrent readers.
		want := genRows(t0.UnixNano(), rows, 1000)
		chunks := makeChunks(t, mem, batch{rows: want})
		wg.Go(func() {
			defer releaseChunks(chunks)
			var buf bytes.Buffer
			if _, err := writePartition(&buf, cpuTable(false), chunks, mem, RowGroupRows, nil, s); err != nil {
				t.Error(err)
				return
			}
			rec := readParquetBytes(t, buf.Bytes(), mem)
			defer rec.Release()
			if got := rec.NumRows(); got != rows {
				t.Errorf("%d rows read back, want %d", got, rows)
			}
		})
	}
	wg.Wait()
	// A file: the sort, 2 gathers, 2 encodes, the flush.
	if n := asked.Load(); n != files*6 {
		t.Fatalf("the slots were asked for %d times, want %d", n, files*6)
	}

	// Work that spreads: bound, over the free slots and its own; unbound,
	// over max.
	spread := func(s *encodeSlots) int {
		n := 0
		if err := s.doSpread(8, func(w int) error { n = w; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := spread(s); n != 1 {
		t.Fatalf("spread over %d goroutines with 1 slot, want 1", n)
	}
	three := newEncodeSlots(3, func() bool { return bound.Load() })
	three.ch <- struct{}{} // one taken elsewhere
	if n := spread(three); n != 2 || len(three.ch) != 1 {
		t.Fatalf("spread over %d goroutines with 2 of 3 slots free, want 2; %d slots held after, want 1", n, len(three.ch))
	}
	<-three.ch
	bound.Store(false)
	if n := spread(three); n != 8 {
		t.Fatalf("spread over %d goroutines unbound, want 8", n)
	}
	s.ch <- struct{}{}
	defer func() { <-s.ch }()
	ran := false
	if err := s.do(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("an unbound step did not run (err %v)", err)
	}
}
