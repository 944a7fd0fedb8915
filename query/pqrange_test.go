//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/apron-db/apron/objstore"
)

// TestNarrowedRowGroups: selective queries over persisted files whose row
// groups the native decoder reads from a row other than their first
// (pqrange.go: the lead column's run, then the time column's pages) give
// DuckDB's answer over the same files with read_parquet (60 queries). The files have
// row groups of many pages, a nullable lead column with NULLs, a string
// column too varied for one dictionary (plain pages), NULLs in every
// other column, and a column added after the first file; the queries ask
// for one or two series, present or absent, over random time ranges.
// Over segments' files, and over the merged file a compaction makes of
// four segments' (row groups of up to 1Mi rows).
//
// Those of one host run a third time with their bounds as constants the
// direct scan evaluates, streamed without DuckDB (direct_files.go).
//
// Each query runs twice: the second run reads its pages from the page
// cache (pqpages.go), reads none again, and gives the same rows; an
// aggregate over every row then keeps no page. Again with a page cache
// of two pages (pages pushed out while queries read them) and with none.
func TestNarrowedRowGroups(t *testing.T) {
	t.Run("segment-files", func(t *testing.T) { narrowedRowGroups(t, false, 0) })
	t.Run("merged-file", func(t *testing.T) { narrowedRowGroups(t, true, 0) })
	t.Run("segment-files-page-cache-of-two-pages", func(t *testing.T) { narrowedRowGroups(t, false, 2*(64<<10)) })
	t.Run("merged-file-no-page-cache", func(t *testing.T) { narrowedRowGroups(t, true, -1) })
}

func narrowedRowGroups(t *testing.T, merge bool, pageCache int64) {
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := newStoreEnv(t, store, Config{PageCacheSize: pageCache})
	rng := rand.New(rand.NewPCG(7, 11))
	hosts := make([]string, 40)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host-%02d", i)
	}
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const step = int64(50 * time.Millisecond)
	fields := []arrow.Field{{Name: "time", Type: tsNs}, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, {Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}}
	write := func(off, n int, extra bool) {
		fs := fields
		if extra {
			fs = append(fs[:len(fs):len(fs)], arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int32, Nullable: true})
		}
		b := array.NewRecordBuilder(s.mem, arrow.NewSchema(fs, nil))
		defer b.Release()
		for i := off; i < off+n; i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(start + int64(i)*step))
			if rng.IntN(50) == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(hosts[rng.IntN(len(hosts))])
			}
			if rng.IntN(10) == 0 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.Float64Builder).Append(rng.Float64())
			}
			if rng.IntN(7) == 0 {
				b.Field(3).AppendNull()
			} else {
				b.Field(3).(*array.Int64Builder).Append(int64(i))
			}
			if rng.IntN(9) == 0 {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
			}
			if rng.IntN(11) == 0 {
				b.Field(5).AppendNull()
			} else {
				b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("note %d %x", i, rng.Uint64()))
			}
			if extra {
				b.Field(6).(*array.Int32Builder).Append(int32(i % 1000))
			}
		}
		s.write("db", "t", b.NewRecordBatch())
	}
	// Segment files: two row groups (128Ki rows each at most), then one.
	// Merged: four segments' rows in one row group.
	sizes := []int{140_000, 30_000}
	if merge {
		sizes = []int{40_000, 40_000, 40_000, 40_000}
	}
	total := 0
	for i, n := range sizes {
		write(total, n, i > 0)
		total += n
		s.roll()
	}
	write(total, 10, true) // rolls the last segment over; stays buffered
	persistStart := time.Now()
	s.waitReleased(t, len(sizes))
	t.Logf("persisted in %s", time.Since(persistStart).Round(time.Millisecond))
	if merge {
		if err := s.wb.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	paths := s.persistedPaths(t)
	if merge && (len(paths) != 1 || !strings.Contains(paths[0], "/c0000")) {
		t.Fatalf("files after the compaction: %v, want one merged file", paths)
	}
	ref := newRefDB(t)
	files := "read_parquet([" + strings.Join(paths, ", ") + "], union_by_name = true)"
	last := start + int64(total-1)*step
	narrowed, skipped, empty := pqGroupsNarrowed.Load(), pqRowsSkipped.Load(), pqGroupsSkipped.Load()
	directs := 0
	footerHits, _, _, _ := s.e.footers.stats()
	statsHits, _, _, _ := s.e.groupStats.stats()
	indexHits, _, _, _ := s.e.pageIndexes.stats()
	for i := range 60 {
		want := []string{hosts[rng.IntN(len(hosts))]}
		switch rng.IntN(6) {
		case 0:
			want = append(want, hosts[rng.IntN(len(hosts))])
		case 1:
			want[0] = "host-absent" // past every host: pruned by statistics
		case 2:
			// Between two hosts: inside every group's statistics, and
			// in no row (the lead column's run is empty).
			want[0] += "a"
		}
		var in []string
		for _, h := range want {
			in = append(in, quoteLiteral(h))
		}
		where := "host IN (" + strings.Join(in, ", ") + ")"
		if len(in) == 1 {
			where = "host = " + in[0]
		}
		// The same bounds as constants the direct scan evaluates itself
		// (direct_where.go), for direct: the query it streams without
		// DuckDB when it compares one string column.
		ts := func(ns int64) string {
			return "'" + time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") + "'"
		}
		direct := ""
		if len(in) == 1 {
			direct = "host = " + in[0]
		}
		lo := start + rng.Int64N(last-start)
		where += fmt.Sprintf(" AND time >= make_timestamp_ns(%d)", lo)
		direct += " AND time >= " + ts(lo)
		if rng.IntN(2) == 0 {
			hi := lo + rng.Int64N(int64(2*time.Hour))
			where += fmt.Sprintf(" AND time < make_timestamp_ns(%d)", hi)
			direct += " AND time < " + ts(hi)
		}
		cols := "time, host, v, n, ok, note"
		if rng.IntN(3) == 0 {
			cols = "n, note, v"
		}
		// The buffered rows are not in the files: leave them out.
		where += fmt.Sprintf(" AND time <= make_timestamp_ns(%d)", last)
		direct += " AND time <= " + ts(last)
		got := sorted(s.query("SELECT "+cols+" FROM db.t WHERE "+where, ""))
		exp := sorted(ref.query("SELECT " + cols + " FROM " + files + " WHERE " + where))
		equalRows(t, fmt.Sprintf("query %d: %s", i, where), got, exp)
		missed := s.e.Stats().PageMisses
		again := sorted(s.query("SELECT "+cols+" FROM db.t WHERE "+where, ""))
		equalRows(t, fmt.Sprintf("query %d again: %s", i, where), again, exp)
		if st := s.e.Stats(); pageCache == 0 && st.PageMisses != missed {
			t.Fatalf("query %d again: %d pages read again (%d in the page cache, %d bytes)", i, st.PageMisses-missed, st.PageEntries, st.PageBytes)
		}
		if len(in) == 1 {
			scans := s.e.Stats().DirectFileScans
			got := sorted(s.query("SELECT "+cols+" FROM db.t WHERE "+direct, ""))
			exp := sorted(ref.query("SELECT " + cols + " FROM " + files + " WHERE " + direct))
			equalRows(t, fmt.Sprintf("query %d, direct: %s", i, direct), got, exp)
			if s.e.Stats().DirectFileScans != scans+1 {
				t.Fatalf("query %d, direct: %s: not a direct scan of the files", i, direct)
			}
			directs++
		}
		if t.Failed() {
			return
		}
	}
	st := s.e.Stats()
	switch {
	case pageCache < 0 && st.PageHits+st.PageMisses+uint64(st.PageEntries) != 0:
		t.Fatalf("no page cache: %d hits, %d misses, %d entries", st.PageHits, st.PageMisses, st.PageEntries)
	case pageCache >= 0 && (st.PageHits == 0 || st.PageMisses == 0):
		t.Fatalf("page cache: %d hits, %d misses over 60 queries run twice", st.PageHits, st.PageMisses)
	case pageCache > 0 && st.PageBytes > pageCache:
		t.Fatalf("page cache: %d bytes kept, bound %d", st.PageBytes, pageCache)
	}
	t.Logf("page cache: %d hits, %d misses, %d pages (%d bytes) kept", st.PageHits, st.PageMisses, st.PageEntries, st.PageBytes)
	// A scan of every row reads its pages in order and keeps none.
	if got := s.query(fmt.Sprintf("SELECT count(n), count(note) FROM db.t WHERE time <= make_timestamp_ns(%d)", last), ""); len(got) != 1 {
		t.Fatalf("aggregate: %v", got)
	}
	if now := s.e.Stats(); now.PageEntries != st.PageEntries || now.PageMisses != st.PageMisses {
		t.Fatalf("an aggregate over every row: page cache entries %d → %d, misses %d → %d; want none kept", st.PageEntries, now.PageEntries, st.PageMisses, now.PageMisses)
	}
	if pqGroupsSkipped.Load() == empty {
		t.Fatal("no row group was left unread for a host between two others")
	}
	if pqGroupsNarrowed.Load() == narrowed || pqRowsSkipped.Load() == skipped {
		t.Fatalf("no row group was narrowed (%d narrowed, %d rows skipped): the test reads them whole", pqGroupsNarrowed.Load()-narrowed, pqRowsSkipped.Load()-skipped)
	}
	// Every open of a file after its first takes the footer parsed then
	// (pqfooter.go), and the answers above stay DuckDB's.
	if hits, _, entries, _ := s.e.footers.stats(); hits == footerHits || entries != len(paths) {
		t.Fatalf("footer cache: %d hits over 60 queries, %d entries for %d files; want hits, one entry a file", hits-footerHits, entries, len(paths))
	}
	// So does the row groups' statistics pruning reads (pqstats.go).
	if hits, _, entries, _ := s.e.groupStats.stats(); hits == statsHits || entries != len(paths) {
		t.Fatalf("row group statistics cache: %d hits over 60 queries, %d entries for %d files; want hits, one entry a file", hits-statsHits, entries, len(paths))
	}
	// And the row groups' page indexes the narrowing reads (pqindex.go):
	// decoded once a group, at most one entry for each group narrowed.
	groups := 0
	for _, p := range paths {
		groups += pqRowGroups(t, p)
	}
	if hits, _, entries, size := s.e.pageIndexes.stats(); hits == indexHits || entries == 0 || entries > groups || size <= 0 {
		t.Fatalf("page index cache: %d hits over 60 queries, %d entries (%d bytes) for %d row groups; want hits, at most one entry a group", hits-indexHits, entries, size, groups)
	}
	t.Logf("%d row groups narrowed, %d rows left unread; %d queries streamed by the direct scan", pqGroupsNarrowed.Load()-narrowed, pqRowsSkipped.Load()-skipped, directs)
	if directs < 20 {
		t.Fatalf("%d queries streamed by the direct scan; the test wants more", directs)
	}
}

// pqRowGroups is the number of row groups of the file at path, a quoted
// SQL literal as persistedPaths gives it.
func pqRowGroups(t *testing.T, path string) int {
	t.Helper()
	pf, err := file.OpenParquetFile(strings.ReplaceAll(strings.Trim(path, "'"), "''", "'"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	return pf.NumRowGroups()
}
