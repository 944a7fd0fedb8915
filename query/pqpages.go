//go:build duckdb_arrow

package query

import (
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// A selective query over persisted files (one series, a recent time
// range: pqrange.go) reads a page or two of each column, and most of its
// time over them was zstd: every run decompressed the same 64 KiB pages
// again, ten or so a query, where QuestDB reads its uncompressed column
// files through the OS page cache. The pages such a query reads, found
// through the offset index, are kept decompressed in the engine's page
// cache (an lru bounded by --page-cache-size), keyed by file (path, size
// and checksum: a name never holds two contents, footerKey), row group,
// column and page; a dashboard that runs its query again reads them from
// memory.
//
// Only pages read after a seek are kept: a scan of whole row groups (an
// aggregate, an export) reads its pages in order, once, and would push
// out the pages selective queries come back to. Cached pages are copies
// nobody writes to, shared by the queries that read them.

// pqPageKey names a page of a persisted file's column chunk.
type pqPageKey struct {
	file footerKey
	rg   int32
	leaf int32
	page int32 // in the chunk's offset index; dictPage for its dictionary
}

const dictPage = -1

// pqPageKind is what a pqPage holds.
type pqPageKind uint8

const (
	pqNoPage   pqPageKind = iota // the chunk has no dictionary page
	pqDictPage                   // a dictionary page
	pqDataV1                     // a data page, definition levels in its data
	pqDataV2                     // a data page v2, levels before the values
)

// pqPage is a decompressed page, as pqColumn reads it.
type pqPage struct {
	kind   pqPageKind
	data   []byte
	nvals  int
	enc    parquet.Encoding
	defEnc parquet.Encoding // v1: of the definition levels
	defLen int              // v2: bytes of definition levels before the values
	repLen int              // v2: bytes of repetition levels
	cached bool             // kept in the page cache, shared by queries

	// A dictionary page of fixed-width values also keeps them as
	// DuckDB has them, converted once by the plan that first read it:
	// converting a dictionary of 128Ki doubles (1 MiB) for every query
	// took a fifth of the server's CPU for one-series queries once their
	// pages were cached.
	convMu sync.Mutex
	conv   []pqConverted
}

// pqConverted is a dictionary's values converted by one conversion.
type pqConverted struct {
	by   pqConversion
	vals []byte
}

// pqConversion is what pqColPlan.convert's output depends on.
type pqConversion struct {
	kind     pqKind
	width    int
	mul, div int64
}

// converted returns the dictionary's n values converted by plan: once
// per conversion for a page in the cache; each time for one read without
// it (its data is the page reader's, read once).
func (p *pqPage) converted(plan *pqColPlan, n int) ([]byte, error) {
	by := pqConversion{plan.kind, plan.width, plan.mul, plan.div}
	if p.cached {
		p.convMu.Lock()
		defer p.convMu.Unlock()
		for _, c := range p.conv {
			if c.by == by {
				return c.vals, nil
			}
		}
	}
	vals := alignedBytes(n * plan.width)
	if err := plan.convert(vals, p.data, 0, n); err != nil {
		return nil, err
	}
	if p.cached {
		p.conv = append(p.conv, pqConverted{by, vals})
	}
	return vals, nil
}

// pageOf reads what pqColumn needs of pg; false for a page of another kind
// (an index page), which has no rows.
func pageOf(pg file.Page) (*pqPage, bool) {
	switch p := pg.(type) {
	case *file.DictionaryPage:
		return &pqPage{kind: pqDictPage, data: p.Data(), nvals: int(p.NumValues()), enc: parquet.Encoding(p.Encoding())}, true
	case *file.DataPageV1:
		return &pqPage{kind: pqDataV1, data: p.Data(), nvals: int(p.NumValues()), enc: parquet.Encoding(p.Encoding()),
			defEnc: parquet.Encoding(p.DefinitionLevelEncoding())}, true
	case *file.DataPageV2:
		return &pqPage{kind: pqDataV2, data: p.Data(), nvals: int(p.NumValues()), enc: parquet.Encoding(p.Encoding()),
			defLen: int(p.DefinitionLevelByteLen()), repLen: int(p.RepetitionLevelByteLen())}, true
	}
	return nil, false
}

// kept is a copy of p the page cache can keep: p's data is the page
// reader's buffer, overwritten by its next page.
func (p *pqPage) kept() *pqPage {
	return &pqPage{kind: p.kind, data: append([]byte(nil), p.data...), nvals: p.nvals, enc: p.enc,
		defEnc: p.defEnc, defLen: p.defLen, repLen: p.repLen, cached: true}
}

// pageCost is what a cached page counts against the cache's bound: its
// bytes and about what the entry and its key take; a dictionary page
// twice its bytes, for its values once converted (they are as wide as
// in the file, or narrower).
func pageCost(p *pqPage) int64 {
	if p.kind == pqDictPage {
		return 2*int64(len(p.data)) + 160
	}
	return int64(len(p.data)) + 160
}

// pqPager gives a pqColumn the pages of its column chunk. Read in order
// (a whole row group), they come from the chunk's page reader. After
// seek, they are the pages of the offset index from the one sought on,
// each from the cache if it holds it, else read (the reader sought to it
// unless it is the next one the reader has) and kept there. The page
// reader is opened at the first page the cache does not hold.
type pqPager struct {
	rg    *file.RowGroupReader
	leaf  int
	pr    file.PageReader
	cache *lru[pqPageKey, *pqPage] // nil: none
	key   pqPageKey

	locs  []*metadata.PageLocation // set by seek
	next  int                      // index in locs of the page next returns
	after int                      // index in locs of the page pr.Next reads; -1 unknown
	// pending is the page seek found without locs, for nextPage.
	pending *pqPage
}

func newPQPager(rg *file.RowGroupReader, leaf int, cache *lru[pqPageKey, *pqPage], key pqPageKey) *pqPager {
	key.leaf = int32(leaf)
	return &pqPager{rg: rg, leaf: leaf, cache: cache, key: key, after: -1}
}

func (p *pqPager) reader() (file.PageReader, error) {
	if p.pr == nil {
		pr, err := p.rg.GetColumnPageReader(p.leaf)
		if err != nil {
			return nil, err
		}
		p.pr = pr
	}
	return p.pr, nil
}

func (p *pqPager) close() {
	if p.pr != nil {
		p.pr.Close()
		p.pr = nil
	}
}

// dictionary returns the chunk's dictionary page, or nil when it has none.
func (p *pqPager) dictionary() (*pqPage, error) {
	k := p.key
	k.page = dictPage
	if p.cache != nil {
		if pg, ok := p.cache.get(k); ok {
			if pg.kind == pqNoPage {
				return nil, nil
			}
			return pg, nil
		}
	}
	pr, err := p.reader()
	if err != nil {
		return nil, err
	}
	dp, err := pr.GetDictionaryPage()
	if err != nil {
		return nil, err
	}
	if dp == nil {
		if p.cache != nil {
			none := &pqPage{kind: pqNoPage}
			p.cache.put(k, none, pageCost(none))
		}
		return nil, nil
	}
	pg, _ := pageOf(dp)
	if p.cache == nil {
		return pg, nil
	}
	kept := pg.kept()
	p.cache.put(k, kept, pageCost(kept))
	return kept, nil
}

// seek makes page i of locs (the chunk's offset index) the next page.
// Its pages must start at increasing rows (Apron writes no empty page)
// for the page reader sought to a page's first row to find that page;
// when they do not, the reader is sought to page i's first row now, and
// the pages are read in order from the one it finds, none kept.
func (p *pqPager) seek(locs []*metadata.PageLocation, i int) error {
	increasing := true
	for j := 1; j < len(locs); j++ {
		if locs[j].FirstRowIndex <= locs[j-1].FirstRowIndex {
			increasing = false
			break
		}
	}
	if increasing {
		p.locs, p.next = locs, i
		return nil
	}
	pr, err := p.reader()
	if err != nil {
		return err
	}
	if err := pr.SeekToPageWithRow(locs[i].FirstRowIndex); err != nil {
		return err
	}
	p.pending, err = dataPage(pr, locs[i].FirstRowIndex)
	return err
}

// dataPage is the page pr holds, which the offset index says is the data
// page starting at row.
func dataPage(pr file.PageReader, row int64) (*pqPage, error) {
	raw := pr.Page()
	if raw == nil {
		return nil, fmt.Errorf("%w: no page at row %d", errCorrupt, row)
	}
	pg, ok := pageOf(raw)
	if !ok || pg.kind == pqDictPage {
		return nil, fmt.Errorf("%w: the offset index points at no data page for row %d", errCorrupt, row)
	}
	return pg, nil
}

// nextPage returns the next page; false at the end of the chunk.
func (p *pqPager) nextPage() (*pqPage, bool, error) {
	if pg := p.pending; pg != nil {
		p.pending = nil
		return pg, true, nil
	}
	if p.locs == nil {
		return p.nextInOrder()
	}
	if p.next >= len(p.locs) {
		return nil, false, nil
	}
	k := p.key
	k.page = int32(p.next)
	if p.cache != nil {
		if pg, ok := p.cache.get(k); ok {
			p.next++
			return pg, true, nil
		}
	}
	pr, err := p.reader()
	if err != nil {
		return nil, false, err
	}
	if p.after == p.next {
		if !pr.Next() {
			if err := pr.Err(); err != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("%w: the offset index lists page %d, the column chunk has fewer", errCorrupt, p.next)
		}
	} else if err := pr.SeekToPageWithRow(p.locs[p.next].FirstRowIndex); err != nil {
		return nil, false, err
	}
	pg, err := dataPage(pr, p.locs[p.next].FirstRowIndex)
	if err != nil {
		return nil, false, err
	}
	p.after = p.next + 1
	p.next++
	if p.cache == nil {
		return pg, true, nil
	}
	kept := pg.kept()
	p.cache.put(k, kept, pageCost(kept))
	return kept, true, nil
}

// nextInOrder returns the page reader's next page of a kind pqColumn
// reads (a dictionary page first, if any).
func (p *pqPager) nextInOrder() (*pqPage, bool, error) {
	pr, err := p.reader()
	if err != nil {
		return nil, false, err
	}
	for pr.Next() {
		if pg, ok := pageOf(pr.Page()); ok {
			return pg, true, nil
		}
	}
	return nil, false, pr.Err()
}
