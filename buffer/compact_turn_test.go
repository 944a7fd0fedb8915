package buffer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
)

// TestRewritesLetCompactionRun: a compaction round that finds a rewrite
// in progress is owed; it runs as soon as the rewrite ends, and the next
// rewrite begins only after it. Without these turns, DELETEs back to back
// keep a table from ever being compacted.
func TestRewritesLetCompactionRun(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := compactionConfig(t, mem, objstore.NewMemory())
	cfg.CompactionInterval = time.Hour // only the owed round runs
	b := openBuffer(t, cfg)
	defer b.Close()
	ctx := context.Background()
	want := writeSegments(t, b, 4)

	r, err := b.BeginRewrite(ctx, "db", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := listings(b, "cpu"); c != 0 {
		t.Fatalf("%d files compacted under a rewrite", c)
	}
	r.Abort()

	r, err = b.BeginRewrite(ctx, "db", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if s, c := listings(b, "cpu"); s != 0 || c != 2 {
		t.Fatalf("the next rewrite began with %d files from segments and %d compacted; want the owed round run first (0, 2)", s, c)
	}
	r.Abort()
	if b.compactTurn.debt() != nil {
		t.Fatal("the round is still owed after it ran")
	}
	assertRows(t, liveRows(t, b, "cpu"), want["cpu"])

	// A round owed while the persister cannot run it holds the next
	// rewrite only as long as its context.
	r, err = b.BeginRewrite(ctx, "db", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	r.view.Release()
	r.over = true // keep rewriting held, as a rewrite still running would
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.BeginRewrite(short, "db", "cpu"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a rewrite waiting for the owed round: %v, want its context's deadline", err)
	}
	b.releaseRewriting()
	waitFor(t, "the owed round", func() bool { return b.compactTurn.debt() == nil })
}
