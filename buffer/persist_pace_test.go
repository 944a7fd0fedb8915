package buffer

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestBoundEncoding: Parquet encoding is bound while writes arrive and
// the buffer holds less than three quarters of MemLimit (past half, so
// with a rolled-over segment waiting and the next one filling, too), and
// takes every core past that, or when no write arrives.
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
	// Writes of a few KiB each until the buffer holds past half, then past
	// three quarters of the limit; boundEncoding is asked after each.
	var sawHalf, sawThreeQuarters bool
	for n := 0; used() < cfg.MemLimit/4*3+cfg.MemLimit/16; n++ {
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, genRows(t0.UnixNano()+int64(n)*10000, 200, 1))
		_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
		rec.Release()
		if err != nil {
			t.Fatalf("write %d, %d bytes buffered: %v", n, used(), err)
		}
		u, bound := used(), b.boundEncoding()
		switch {
		case u < cfg.MemLimit/4*3 && !bound:
			t.Fatalf("%d of %d bytes buffered, writes arriving: encoding not bound", u, cfg.MemLimit)
		case u >= cfg.MemLimit/4*3 && bound:
			t.Fatalf("%d of %d bytes buffered: encoding still bound past three quarters", u, cfg.MemLimit)
		}
		sawHalf = sawHalf || (u > cfg.MemLimit/2 && u < cfg.MemLimit/4*3)
		sawThreeQuarters = sawThreeQuarters || u >= cfg.MemLimit/4*3
	}
	if !sawHalf || !sawThreeQuarters {
		t.Fatalf("the writes never held between half and three quarters (%v) or past three quarters (%v) of the limit", sawHalf, sawThreeQuarters)
	}
	b.lastWrite.Store(0) // no write for a while
	if b.boundEncoding() {
		t.Fatal("encoding bound with no write arriving")
	}
}
