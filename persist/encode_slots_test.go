package persist

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestEncodeSlots: files written at once through one slot all finish
// with their rows (no step waits on a slot while holding one), every
// CPU-bound step asks for the slot (the sort, each batch's gathering and
// encoding, the last flush), work spreads over the free slots only, and
// unbound the limit is the cores: more than while bound, never more.
func TestEncodeSlots(t *testing.T) {
	var bound atomic.Bool
	bound.Store(true)
	var asked atomic.Int64
	s := newEncodeSlots(1, 1, func() bool { asked.Add(1); return bound.Load() })
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
	// A file: the sort, 2 gathers, 2 encodes, the flush; a step that
	// found the slot taken asked again.
	if n := asked.Load(); n < files*6 {
		t.Fatalf("the slots were asked for %d times, want at least %d", n, files*6)
	}
	if s.held != 0 {
		t.Fatalf("%d slots held once every file is written", s.held)
	}

	// Work that spreads: over the free slots and its own, up to the
	// limit of the moment.
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
	three := newEncodeSlots(3, 4, func() bool { return bound.Load() })
	three.take(true) // one taken elsewhere
	if n := spread(three); n != 2 || three.held != 1 {
		t.Fatalf("spread over %d goroutines with 2 of 3 slots free, want 2; %d slots held after, want 1", n, three.held)
	}
	bound.Store(false)
	if n := spread(three); n != 3 || three.held != 1 {
		t.Fatalf("spread over %d goroutines unbound with 3 of 4 cores free, want 3; %d slots held after, want 1", n, three.held)
	}
	three.give(1)

	// A step waiting for a slot goes on when one is given back, and when
	// the encoding stops being bound (no slot is given back then).
	two := newEncodeSlots(1, 2, func() bool { return bound.Load() })
	for _, unbind := range []bool{false, true} {
		bound.Store(true)
		two.take(true)
		ran := make(chan struct{})
		go func() {
			if err := two.do(func() error { return nil }); err != nil {
				t.Error(err)
			}
			close(ran)
		}()
		select {
		case <-ran:
			t.Fatal("a bound step ran with its one slot taken")
		case <-time.After(3 * limitRecheck):
		}
		if unbind {
			bound.Store(false)
		} else {
			two.give(1)
		}
		<-ran
		if unbind {
			two.give(1)
		}
		if two.held != 0 {
			t.Fatalf("%d slots held after", two.held)
		}
	}
}
