package buffer

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestSeriesIDs: every chunk's ids name its dictionary's values, one id
// per value within a space, a space per partition and column, through
// shared dictionaries (region: 5 values), dictionaries of a chunk's own
// (host: 1,000 values, 100-row chunks), a second day, a column that
// fills its space (uniq.host: a new value every row), the open chunk,
// and replay.
func TestSeriesIDs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	cfg.ChunkRows = 1000
	b := openBuffer(t, cfg)
	writeBench := func(table string, start, n, hosts int) {
		t.Helper()
		rec := benchRecord(memory.DefaultAllocator, start, n, hosts)
		defer rec.Release()
		if _, err := b.Write(context.Background(), "db", table, rec, catalog.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// cpu: 20,500 rows of 1,000 hosts over 5 regions, then a day later
	// rows of 13 hosts.
	for off := 0; off < 20_500; off += 4100 {
		writeBench("cpu", off, 4100, 1000)
	}
	write(t, b, "cpu", cpuSchema, genRows(t0.Add(24*time.Hour).UnixNano(), 2500, int64(time.Millisecond)))
	// uniq: 140,500 hosts, past maxSeries.
	for off := 0; off < 140_500; off += 20_000 {
		writeBench("uniq", off, min(20_000, 140_500-off), 0)
	}
	check := func(when string) {
		t.Helper()
		spaces := map[*SeriesSpace]map[string]int32{}
		spaceOf := map[string]*SeriesSpace{} // "table/column/day"
		withHost := map[string]int{}
		for _, table := range []string{"cpu", "uniq"} {
			for _, seg := range b.Segments() {
				for _, c := range seg.Snapshot("db", table) {
					day := dayOf(c.MinTime)
					for i, f := range c.Rec.Schema().Fields() {
						d, ok := c.Rec.Column(i).(*array.Dictionary)
						if !ok {
							continue
						}
						ids, ok := c.Series[f.Name]
						if !ok {
							if table == "cpu" || f.Name != "host" {
								t.Errorf("%s: %s.%s: a chunk of day %d has no series ids", when, table, f.Name, day)
							}
							continue
						}
						if f.Name == "host" {
							withHost[table]++
						}
						dict := d.Dictionary().(*array.String)
						if len(ids.IDs) != dict.Len() {
							t.Fatalf("%s: %s.%s: %d ids for %d values", when, table, f.Name, len(ids.IDs), dict.Len())
						}
						key := table + "/" + f.Name + "/" + time.Unix(0, c.MinTime).UTC().Format(time.DateOnly)
						if sp, ok := spaceOf[key]; ok && sp != ids.Space {
							t.Fatalf("%s: %s: two spaces in one segment's partition", when, key)
						}
						spaceOf[key] = ids.Space
						seen := spaces[ids.Space]
						if seen == nil {
							seen = map[string]int32{}
							spaces[ids.Space] = seen
						}
						for j := range dict.Len() {
							v, id := dict.Value(j), ids.IDs[j]
							if int(id) >= len(ids.Values) || ids.Values[id] != v {
								t.Fatalf("%s: %s: value %q has id %d, which names another", when, key, v, id)
							}
							if old, ok := seen[v]; ok && old != id {
								t.Fatalf("%s: %s: value %q has ids %d and %d", when, key, v, old, id)
							}
							seen[v] = id
						}
					}
					c.Rec.Release()
				}
			}
		}
		if len(spaceOf) != 5 { // cpu's host and region, cpu's host a day later, uniq's host and region
			t.Errorf("%s: spaces of %v, want 5", when, spaceOf)
		}
		// uniq: the chunks of rows up to maxSeries have ids, then none.
		if want := maxSeries / 1000; withHost["uniq"] != want {
			t.Errorf("%s: %d chunks of uniq have host ids, want %d", when, withHost["uniq"], want)
		}
		if want := 21 + 3; withHost["cpu"] != want {
			t.Errorf("%s: %d chunks of cpu have host ids, want %d", when, withHost["cpu"], want)
		}
	}
	check("written")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBuffer(t, cfg)
	check("replayed")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
