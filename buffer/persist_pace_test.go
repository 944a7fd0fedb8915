package buffer

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestBoundEncoding: Parquet encoding is bound while writes arrive and
// the buffer holds less than half of MemLimit, and takes every core past
// that, or when no write arrives.
func TestBoundEncoding(t *testing.T) {
	cfg := testConfig(t, memory.NewGoAllocator())
	cfg.MemLimit = 4 << 20
	b := openBuffer(t, cfg)
	defer b.Close()
	used := func() int64 {
		var n int64
		for _, s := range b.viewState.Load().segs {
			n += s.size.Load()
		}
		return n
	}
	// Writes of a few KiB each until the buffer holds past half the limit;
	// boundEncoding is asked after each.
	var sawUnder, sawOver bool
	for n := 0; used() < cfg.MemLimit/2+cfg.MemLimit/8; n++ {
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, genRows(t0.UnixNano()+int64(n)*10000, 200, 1))
		_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
		rec.Release()
		if err != nil {
			t.Fatalf("write %d, %d bytes buffered: %v", n, used(), err)
		}
		u, bound := used(), b.boundEncoding()
		if want := u < cfg.MemLimit/2; bound != want {
			t.Fatalf("%d of %d bytes buffered, writes arriving: encoding bound %v, want %v", u, cfg.MemLimit, bound, want)
		}
		sawUnder = sawUnder || u < cfg.MemLimit/2
		sawOver = sawOver || u >= cfg.MemLimit/2
	}
	if !sawUnder || !sawOver {
		t.Fatalf("the writes never held under (%v) or past (%v) half the limit", sawUnder, sawOver)
	}
	b.lastWrite.Store(0) // no write for a while
	if b.boundEncoding() {
		t.Fatal("encoding bound with no write arriving")
	}
}
