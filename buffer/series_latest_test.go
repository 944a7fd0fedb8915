package buffer

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestSnapshotLatest: the chunks SnapshotLatest keeps hold every host's
// latest row (NULL's included) within each upper bound, as every chunk
// does, and it leaves out chunks when it can. Table cpu: rows first
// without a host column (NULL hosts), then 13 hosts, then NULLs among
// them, a batch of old rows late, a host that stops reporting, a second
// day, and the open chunk; checked after each write. Table nulls: NULL
// hosts in ten rows between two runs of hosts. Table early: a host of
// one early row among hosts that go on.
func TestSnapshotLatest(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	cfg.ChunkRows = 50
	b := openBuffer(t, cfg)
	start := t0.UnixNano()

	noHost := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, noHost)
	for i := range 100 { // two chunks, sealed before the column
		rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(start + int64(i)))
		rb.Field(1).(*array.Float64Builder).Append(float64(i))
	}
	rec := rb.NewRecordBatch()
	rb.Release()
	if _, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.Release()

	everSkipped := false
	check := func(when string) {
		t.Helper()
		for _, table := range []string{"cpu", "nulls", "early"} {
			checkLatest(t, b, table, when, start, &everSkipped)
		}
	}
	everyHost := func(rows []row) []row {
		for i := range rows {
			rows[i].Host = ptr(fmt.Sprintf("host-%d", i%13))
		}
		return rows
	}
	// nulls: hosts, then NULL hosts for ten rows only, then hosts.
	write(t, b, "nulls", cpuSchema, everyHost(genRows(start+1000, 400, 1)))
	nullRows := genRows(start+1400, 10, 1)
	for i := range nullRows {
		nullRows[i].Host = nil
	}
	write(t, b, "nulls", cpuSchema, nullRows)
	write(t, b, "nulls", cpuSchema, everyHost(genRows(start+1410, 400, 1)))
	// early: hosts, one row of a host that stops at once among them.
	first := everyHost(genRows(start+1000, 400, 1))
	first[5].Host = ptr("early")
	write(t, b, "early", cpuSchema, first)
	write(t, b, "early", cpuSchema, everyHost(genRows(start+1400, 400, 1)))

	check("no host column")
	write(t, b, "cpu", cpuSchema, everyHost(genRows(start+1000, 400, 1)))
	check("13 hosts")
	write(t, b, "cpu", cpuSchema, genRows(start+1400, 400, 1))
	check("13 hosts and NULLs")
	old := genRows(start+200, 30, 1) // late rows of older times
	write(t, b, "cpu", cpuSchema, old)
	check("old rows late")
	stale := genRows(start+2000, 60, 1)
	for i := range stale {
		stale[i].Host = ptr("host-1") // host-1 alone: the others stop
	}
	write(t, b, "cpu", cpuSchema, stale)
	check("one host reporting")
	write(t, b, "cpu", cpuSchema, genRows(start+int64(24*time.Hour), 130, 1))
	check("a second day")
	write(t, b, "cpu", cpuSchema, genRows(start+3000, 25, 1))
	check("an open chunk")
	if !everSkipped {
		t.Fatal("no chunk was ever left out")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkLatest checks SnapshotLatest of table's host column (see
// TestSnapshotLatest) at bounds of times around its chunks', and that
// Summaries sum its chunks' stats.
func checkLatest(t *testing.T, b *WriteBuffer, table, when string, start int64, everSkipped *bool) {
	t.Helper()
	tbl, _ := b.Catalog().Table("db", table)
	schema := tbl.ArrowSchema()
	when = table + ", " + when
	for _, seg := range b.Segments() {
		full := seg.Snapshot("db", table)
		// The stats summed by partition sum every chunk's.
		var all, summed ChunkStat
		for _, c := range full {
			all = addStat(all, ChunkStat{Rows: c.Rec.NumRows(), MinTime: c.MinTime, MaxTime: c.MaxTime})
		}
		sums, n := seg.Summaries("db", table, nil)
		for _, st := range sums {
			summed = addStat(summed, st)
		}
		if summed != all || n != len(full) {
			t.Fatalf("%s: %d chunks summed by partition as %+v, %d chunks as %+v", when, n, summed, len(full), all)
		}
		var sealedMax int64 = math.MinInt64
		for _, c := range full {
			sealedMax = max(sealedMax, c.MaxTime)
		}
		for _, upper := range []int64{math.MaxInt64, sealedMax, sealedMax - 70, start + 100} {
			kept, skipped := seg.SnapshotLatest("db", table, "host", upper, nil)
			if len(kept)+skipped != len(full) {
				t.Fatalf("%s, upper %d: %d chunks kept and %d left out of %d", when, upper, len(kept), skipped, len(full))
			}
			*everSkipped = *everSkipped || skipped > 0
			want := latestHosts(t, full, schema, upper, b.Allocator())
			got := latestHosts(t, kept, schema, upper, b.Allocator())
			for h, tw := range want {
				if tg, ok := got[h]; !ok || tg != tw {
					t.Fatalf("%s, upper %d: host %q latest %d among the chunks kept, %d among all (%d of %d chunks left out)", when, upper, h, tg, tw, skipped, len(full))
				}
			}
			releaseAll(kept)
		}
		releaseAll(full)
	}
}

// latestHosts is the greatest time of each host ("" for NULL) among
// chunks' rows of times at most upper.
func latestHosts(t *testing.T, chunks []Chunk, schema *arrow.Schema, upper int64, mem memory.Allocator) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, c := range chunks {
		rec, err := Project(c, schema, mem)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rowsOf(t, rec) {
			if r.Time > upper {
				continue
			}
			h := ""
			if r.Host != nil {
				h = "h:" + *r.Host
			}
			if old, ok := out[h]; !ok || r.Time > old {
				out[h] = r.Time
			}
		}
		rec.Release()
	}
	return out
}

func releaseAll(chunks []Chunk) {
	for _, c := range chunks {
		c.Rec.Release()
	}
}
