package buffer

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// lastRows is the oracle: per host (null a host of its own), the count
// rows of largest time.
func lastRows(rows []row, count int) []row {
	by := map[string][]row{}
	for _, r := range rows {
		k := "\x00null"
		if r.Host != nil {
			k = *r.Host
		}
		by[k] = append(by[k], r)
	}
	var out []row
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Time > rs[j].Time })
		out = append(out, rs[:min(count, len(rs))]...)
	}
	return out
}

func cacheRows(t *testing.T, b *WriteBuffer, c *LastValueCache, minTime int64) []row {
	t.Helper()
	tbl, _ := b.Catalog().Table("db", "cpu")
	fields := tbl.ArrowSchema().Fields()
	for i, f := range fields {
		if f.Type.ID() == arrow.STRING {
			fields[i].Type = stringDictType
		}
	}
	chunks, err := c.Chunks(fields, minTime, b.Allocator())
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, ch := range chunks {
		rec, err := Project(ch, tbl.ArrowSchema(), b.Allocator())
		ch.Rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rowsOf(t, rec)...)
		rec.Release()
	}
	return out
}

// TestLastValueCache: rows written before the cache exists come in by
// the fill (here the View's chunks merged, as the engine merges a query
// over the View), rows written after by the write path; batches with
// out-of-order times and a column added later; the cache equals the
// oracle, its memory is accounted and freed on drop, and nothing leaks.
func TestLastValueCache(t *testing.T) {
	// count 1 takes the dense reduction of a batch, 2 the general one.
	for _, count := range []int{1, 2} {
		t.Run(fmt.Sprintf("count=%d", count), func(t *testing.T) { testLastValueCache(t, count) })
	}
}

func testLastValueCache(t *testing.T, count int) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var all []row
	seen := map[int64]bool{}
	gen := func(n int, extra bool) []row {
		out := make([]row, 0, n)
		for len(out) < n {
			ts := t0.UnixNano() + rng.Int64N(1e12)
			if seen[ts] {
				continue
			}
			seen[ts] = true
			r := row{Time: ts, Usage: ptr(rng.Float64())}
			if h := rng.IntN(40); h > 0 {
				r.Host = ptr(fmt.Sprintf("h%d", h))
			}
			if extra && rng.IntN(2) == 0 {
				r.Extra = ptr(rng.Int64())
			}
			out = append(out, r)
		}
		return out
	}
	for range 3 {
		rs := gen(300, false)
		write(t, b, "cpu", cpuSchema, rs)
		all = append(all, rs...)
	}
	def, created, err := b.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu", Count: count}, false)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if len(def.Keys) != 1 || def.Keys[0] != "host" || def.Name != "cpu_last" {
		t.Fatalf("defaults: %+v", def)
	}
	c, ok := b.LastValueCache("db", "cpu")
	if !ok || c.Ready() {
		t.Fatalf("cache %v, ready before a fill", ok)
	}
	for i := range 4 {
		rs := gen(200, i >= 2)
		schema := cpuSchema
		if i >= 2 {
			schema = cpuExtraSchema
		}
		write(t, b, "cpu", schema, rs)
		all = append(all, rs...)
	}
	// The fill: every chunk of a View taken after the cache was made (the
	// rows written since are in both: merged once).
	fillCache(t, b, c)
	if !c.Ready() {
		t.Fatal("not ready after the fill")
	}
	assertRows(t, cacheRows(t, b, c, MinTime), lastRows(all, count))
	for range 3 {
		rs := gen(100, true)
		write(t, b, "cpu", cpuExtraSchema, rs)
		all = append(all, rs...)
	}
	assertRows(t, cacheRows(t, b, c, MinTime), lastRows(all, count))
	// Served again while unchanged (the same chunks); a cutoff filters.
	assertRows(t, cacheRows(t, b, c, MinTime), lastRows(all, count))
	{
		tbl, _ := b.Catalog().Table("db", "cpu")
		fields := tbl.ArrowSchema().Fields()
		for i, f := range fields {
			if f.Type.ID() == arrow.STRING {
				fields[i].Type = stringDictType
			}
		}
		first, err := c.Chunks(fields, MinTime, b.Allocator())
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Chunks(fields, MinTime, b.Allocator())
		if err != nil {
			t.Fatal(err)
		}
		if len(first) == 0 || len(first) != len(again) || first[0].Rec != again[0].Rec {
			t.Errorf("unchanged rows were built again: %d chunks, then %d", len(first), len(again))
		}
		for _, ch := range append(first, again...) {
			ch.Rec.Release()
		}
	}
	cut := t0.UnixNano() + 5e11
	var want []row
	for _, r := range lastRows(all, count) {
		if r.Time >= cut {
			want = append(want, r)
		}
	}
	assertRows(t, cacheRows(t, b, c, cut), want)

	_, rows, bytes := c.Info()
	if rows != len(lastRows(all, count)) || bytes <= 0 || b.lvc.bytes.Load() != bytes {
		t.Fatalf("info: %d rows, %d bytes (buffer counts %d)", rows, bytes, b.lvc.bytes.Load())
	}
	b.mu.Lock()
	withCache := b.bufferedLocked()
	b.mu.Unlock()
	if _, _, err := b.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu"}, false); err == nil {
		t.Fatal("a second cache on the table was created")
	}
	if dropped, err := b.DropLastValueCache("db", "cpu", false); err != nil || !dropped {
		t.Fatal(dropped, err)
	}
	b.mu.Lock()
	without := b.bufferedLocked()
	b.mu.Unlock()
	if b.lvc.bytes.Load() != 0 || withCache-without != bytes {
		t.Fatalf("after drop: cache bytes %d, buffered %d → %d", b.lvc.bytes.Load(), withCache, without)
	}
	if _, ok := b.LastValueCache("db", "cpu"); ok {
		t.Fatal("cache still there after drop")
	}
}

// TestLastValueCacheDDL: refusals change nothing; a drop of the table
// drops its cache, and a table made again under the name has none; the
// definition survives a restart, where the cache starts filling.
func TestLastValueCacheDDL(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	b := openBuffer(t, cfg)
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 10, 1))
	for _, bad := range []catalog.LastValueCache{
		{Database: "db", Table: "nope"},
		{Database: "nodb", Table: "cpu"},
		{Database: "db", Table: "cpu", Keys: []string{"usage"}},
		{Database: "db", Table: "cpu", Keys: []string{"missing"}},
		{Database: "db", Table: "cpu", Keys: []string{"host", "host"}},
		{Database: "db", Table: "cpu", Count: -1},
		{Database: "db", Table: "cpu", Count: catalog.MaxLastValueCount + 1},
		{Database: "db", Table: "cpu", Name: "bad name"},
	} {
		v := b.Catalog().Version()
		if _, _, err := b.CreateLastValueCache(bad, false); err == nil {
			t.Fatalf("%+v: created", bad)
		}
		if b.Catalog().Version() != v || len(b.LastValueCaches()) != 0 {
			t.Fatalf("%+v: refused but the catalog changed", bad)
		}
	}
	if _, err := b.DropLastValueCache("db", "cpu", false); err == nil {
		t.Fatal("dropped a cache that does not exist")
	}
	if ok, err := b.DropLastValueCache("db", "cpu", true); ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, _, err := b.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu", Name: "c1", Keys: []string{}, Count: 3}, false); err != nil {
		t.Fatal(err)
	}
	if _, created, err := b.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu"}, true); created || err != nil {
		t.Fatal(created, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBuffer(t, cfg)
	c, ok := b.LastValueCache("db", "cpu")
	if !ok || c.Ready() || c.Definition().Name != "c1" || c.Definition().Count != 3 || len(c.Definition().Keys) != 0 {
		t.Fatalf("after restart: %v %+v", ok, c)
	}
	if _, err := b.DropTable("db", "cpu", false); err != nil {
		t.Fatal(err)
	}
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 10, 1))
	if _, ok := b.LastValueCache("db", "cpu"); ok {
		t.Fatal("a table made again has the dropped table's cache")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// gatedAllocator blocks its first Allocate until release is closed.
type gatedAllocator struct {
	memory.Allocator
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedAllocator) Allocate(n int) []byte {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Allocator.Allocate(n)
}

// TestLastValueChunksDoNotBlockWrites: a write merges into its table's
// cache before its acknowledgement, so building the cache's chunks for a
// query (100,000 series: hundreds of ms) must not hold the cache's mutex.
// The build is stopped in its allocator; a write to the table finishes
// meanwhile. The memo built counts in the cache's memory, and leaves it
// with the next change.
func TestLastValueChunksDoNotBlockWrites(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := openBuffer(t, testConfig(t, mem))
	defer b.Close()
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 50, 5))
	if _, _, err := b.CreateLastValueCache(catalog.LastValueCache{Database: "db", Table: "cpu"}, false); err != nil {
		t.Fatal(err)
	}
	c, _ := b.LastValueCache("db", "cpu")
	fillCache(t, b, c)
	_, _, before := c.Info()

	tbl, _ := b.Catalog().Table("db", "cpu")
	fields := tbl.ArrowSchema().Fields()
	for i, f := range fields {
		if f.Type.ID() == arrow.STRING {
			fields[i].Type = stringDictType
		}
	}
	gate := &gatedAllocator{Allocator: mem, entered: make(chan struct{}), release: make(chan struct{})}
	built := make(chan []Chunk, 1)
	go func() {
		chunks, err := c.Chunks(fields, MinTime, gate)
		if err != nil {
			t.Error(err)
		}
		built <- chunks
	}()
	<-gate.entered
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+day, 5, 5))
	}()
	select {
	case <-wrote:
	case <-time.After(20 * time.Second):
		close(gate.release)
		t.Fatal("a write waited for the cache's chunks to be built")
	}
	close(gate.release)
	chunks := <-built
	releaseChunks(chunks)
	// Built from the rows before the write: served, but not kept.
	c.mu.Lock()
	kept := c.mu.memo != nil
	c.mu.Unlock()
	_, _, afterWrite := c.Info()
	if kept || afterWrite != before {
		t.Fatalf("chunks built from rows changed since were kept (%v), or counted: %d bytes, %d before", kept, afterWrite, before)
	}
	releaseChunks(cacheChunks(t, b, c, fields))
	_, _, withMemo := c.Info()
	if withMemo <= afterWrite || b.lvc.bytes.Load() != withMemo {
		t.Fatalf("with its chunks kept the cache counts %d bytes (buffer: %d), %d without", withMemo, b.lvc.bytes.Load(), afterWrite)
	}
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano()+2*day, 5, 5))
	releaseChunks(cacheChunks(t, b, c, fields)) // the memo of before is let go
	if _, err := b.DropLastValueCache("db", "cpu", false); err != nil {
		t.Fatal(err)
	}
	if n := b.lvc.bytes.Load(); n != 0 {
		t.Fatalf("after the drop the buffer counts %d bytes of caches", n)
	}
}

func cacheChunks(t *testing.T, b *WriteBuffer, c *LastValueCache, fields []arrow.Field) []Chunk {
	t.Helper()
	chunks, err := c.Chunks(fields, MinTime, b.Allocator())
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// fillCache fills c as the engine does: with every chunk of a View of
// db.cpu taken after c was made.
func fillCache(t *testing.T, b *WriteBuffer, c *LastValueCache) {
	t.Helper()
	v := b.View()
	defer v.Release()
	for _, s := range v.Buffered {
		for _, ch := range v.Chunks(s, "db", "cpu") {
			err := c.MergeRecord(ch.Rec)
			ch.Rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	c.FillDone()
}
