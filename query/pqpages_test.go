//go:build duckdb_arrow

package query

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// TestPQPager: the pages a pqPager gives after a seek, from the page
// cache or read, are the column chunk's pages as its page reader gives
// them in order, byte for byte, for every column of every type, from
// every page on; a second pass reads none again; its dictionary is the
// chunk's (or none); without a cache, and with an offset index whose rows
// do not increase (the reader sought to the row instead: nothing kept),
// it gives the same pages. Pages are read through a checked allocator:
// whatever the pager opens it closes.
func TestPQPager(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 5))
	cols := pqAllTypes(0.1)
	rec := pqRecord(mem, cols, 100_000, base, rng)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "pages.parquet")
	pqWrite(t, path, rec, parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true),
		parquet.WithDataPageSize(4<<10), parquet.WithPageIndexEnabled(true))
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rg := pf.RowGroup(0)
	idx, err := pf.GetPageIndexReader().RowGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	cache := newLRU[pqPageKey, *pqPage](64 << 20)
	key := pqPageKey{file: footerKey{path: path, size: 1}}
	several := 0
	for leaf := range pf.MetaData().Schema.NumColumns() {
		oi, err := idx.GetOffsetIndex(leaf)
		if err != nil || oi == nil {
			t.Fatalf("column %d: no offset index (%v)", leaf, err)
		}
		locs := oi.GetPageLocations()
		dict, pages := chunkPages(t, rg, leaf)
		if len(pages) != len(locs) {
			t.Fatalf("column %d: %d data pages, the offset index lists %d", leaf, len(pages), len(locs))
		}
		if len(locs) >= 3 {
			several++
		}
		// check reads as pqColumn.seek does: the dictionary, then the
		// pages from page from.
		check := func(what string, p *pqPager, locs []*metadata.PageLocation, from int) {
			t.Helper()
			defer p.close()
			d, err := p.dictionary()
			if err != nil {
				t.Fatalf("column %d, %s: dictionary: %v", leaf, what, err)
			}
			samePage(t, fmt.Sprintf("column %d, %s: dictionary", leaf, what), d, dict)
			if err := p.seek(locs, from); err != nil {
				t.Fatalf("column %d, %s: seek: %v", leaf, what, err)
			}
			for i := from; ; i++ {
				pg, ok, err := p.nextPage()
				if err != nil {
					t.Fatalf("column %d, %s: page %d: %v", leaf, what, i, err)
				}
				if !ok {
					if i != len(pages) {
						t.Fatalf("column %d, %s: pages end at %d of %d", leaf, what, i, len(pages))
					}
					return
				}
				if i >= len(pages) {
					t.Fatalf("column %d, %s: a page past the last", leaf, what)
				}
				samePage(t, fmt.Sprintf("column %d, %s: page %d", leaf, what, i), pg, pages[i])
			}
		}
		for _, from := range []int{0, len(locs) / 2, len(locs) - 1, rng.IntN(len(locs))} {
			for pass := range 2 {
				_, misses, _, _ := cache.stats()
				check(fmt.Sprintf("from page %d, pass %d", from, pass), newPQPager(rg, leaf, cache, key), locs, from)
				if _, now, _, _ := cache.stats(); pass == 1 && now != misses {
					t.Fatalf("column %d from page %d: %d pages read again on the second pass", leaf, from, now-misses)
				}
			}
			check(fmt.Sprintf("from page %d, no cache", from), newPQPager(rg, leaf, nil, key), locs, from)
		}
		_, _, entries, _ := cache.stats()
		if len(locs) >= 2 {
			// An offset index whose first rows do not increase: the
			// pager cannot tell a page by its first row, seeks the
			// reader to the row and reads in order from there.
			odd := append([]*metadata.PageLocation(nil), locs...)
			second := *odd[1]
			second.FirstRowIndex = odd[0].FirstRowIndex
			odd[1] = &second
			for _, from := range []int{len(locs) - 1, len(locs) / 2} {
				if odd[from].FirstRowIndex == odd[0].FirstRowIndex {
					continue // page 1's row is page 0's now
				}
				check(fmt.Sprintf("from page %d, offset index not increasing", from), newPQPager(rg, leaf, cache, pqPageKey{file: footerKey{path: path, size: 2}}), odd, from)
			}
			if _, _, now, _ := cache.stats(); now > entries+1 { // its dictionary only
				t.Fatalf("column %d: %d pages kept through an offset index not increasing", leaf, now-entries-1)
			}
			_, _, entries, _ = cache.stats()
		}
		// In order (no seek): the reader's pages, dictionary first,
		// nothing kept.
		p := newPQPager(rg, leaf, cache, pqPageKey{file: footerKey{path: path, size: 3}})
		if dict != nil {
			pg, ok, err := p.nextPage()
			if err != nil || !ok {
				t.Fatalf("column %d in order: no dictionary page (%v)", leaf, err)
			}
			samePage(t, fmt.Sprintf("column %d in order: dictionary", leaf), pg, dict)
		}
		for i := range pages {
			pg, ok, err := p.nextPage()
			if err != nil || !ok {
				t.Fatalf("column %d in order: page %d missing (%v)", leaf, i, err)
			}
			samePage(t, fmt.Sprintf("column %d in order: page %d", leaf, i), pg, pages[i])
		}
		if _, ok, err := p.nextPage(); ok || err != nil {
			t.Fatalf("column %d in order: a page past the last (%v)", leaf, err)
		}
		p.close()
		if _, _, now, _ := cache.stats(); now != entries {
			t.Fatalf("column %d: %d pages kept by a read in order", leaf, now-entries)
		}
	}
	if several < len(cols)/2 {
		t.Fatalf("%d of %d columns have 3 pages or more; the test wants most to", several, len(cols))
	}
}

// chunkPages is column leaf's dictionary page (nil if none) and data
// pages, as its page reader gives them in order, copied.
func chunkPages(t *testing.T, rg *file.RowGroupReader, leaf int) (dict *pqPage, pages []*pqPage) {
	t.Helper()
	pr, err := rg.GetColumnPageReader(leaf)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for pr.Next() {
		pg, ok := pageOf(pr.Page())
		if !ok {
			continue
		}
		if pg.kind == pqDictPage {
			dict = pg.kept()
			continue
		}
		pages = append(pages, pg.kept())
	}
	if err := pr.Err(); err != nil {
		t.Fatal(err)
	}
	return dict, pages
}

func samePage(t *testing.T, what string, got, want *pqPage) {
	t.Helper()
	if got == nil || want == nil {
		if got != want {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
		return
	}
	if got.kind != want.kind || got.nvals != want.nvals || got.enc != want.enc || got.defEnc != want.defEnc ||
		got.defLen != want.defLen || got.repLen != want.repLen || !bytes.Equal(got.data, want.data) {
		t.Fatalf("%s: got a page of kind %d, %d values, %d bytes; want kind %d, %d values, %d bytes",
			what, got.kind, got.nvals, len(got.data), want.kind, want.nvals, len(want.data))
	}
}

// TestPQConvertedDictionary: a cached dictionary page converts its values
// once per conversion and gives every reader those bytes; a page read
// without the cache converts each time; each conversion's values are
// pqColPlan.convert's.
func TestPQConvertedDictionary(t *testing.T) {
	var raw []byte
	for i := range 1000 {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(i*7))
	}
	read := &pqPage{kind: pqDictPage, data: raw, nvals: 1000, enc: parquet.Encodings.Plain}
	copyPlan := pqColPlan{kind: pqCopy, width: 8}
	scalePlan := pqColPlan{kind: pqScale, width: 8, mul: 1000}
	for _, pg := range []*pqPage{read, read.kept()} {
		var firsts [][]byte
		for _, plan := range []*pqColPlan{&copyPlan, &scalePlan} {
			a, err := pg.converted(plan, pg.nvals)
			if err != nil {
				t.Fatal(err)
			}
			b, err := pg.converted(plan, pg.nvals)
			if err != nil {
				t.Fatal(err)
			}
			want := alignedBytes(pg.nvals * plan.width)
			if err := plan.convert(want, raw, 0, pg.nvals); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, want) || !bytes.Equal(b, want) {
				t.Fatalf("cached %v, conversion %d: values differ from convert's", pg.cached, plan.kind)
			}
			if same := &a[0] == &b[0]; same != pg.cached {
				t.Fatalf("cached %v, conversion %d: converted again %v", pg.cached, plan.kind, !same)
			}
			firsts = append(firsts, a)
		}
		if bytes.Equal(firsts[0], firsts[1]) {
			t.Fatal("two conversions gave the same values: the test cannot tell them apart")
		}
	}
}
