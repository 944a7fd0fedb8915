//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// errCorrupt is what a page that does not decode gives.
var errCorrupt = errors.New("corrupt page")

// pqColumn decodes one column chunk of a row group straight into DuckDB
// vectors, page by page as the rows are emitted: fixed-width values are
// copied (or converted) into the output vector, dictionary indices
// gathered from the dictionary, or, for strings, written as a selection
// over one DuckDB vector of the dictionary (see pqStrings).
type pqColumn struct {
	p     pqColPlan
	pages *pqPager
	cache *pqDictCache // where strs comes from

	// The chunk's dictionary: fixed-width values already as DuckDB has
	// them, or strings.
	dict []byte
	strs *pqStrings

	// The page being read: its rows left, their definition levels, and
	// their values: dictionary indices (indexed), RLE booleans (rleBool),
	// or plain values (from bit for booleans).
	left    int
	defs    rleDecoder
	indexed bool
	rleBool bool
	idx     rleDecoder
	plain   []byte
	bit     int

	// Scratch for one call's rows: levels, indices, values before they
	// are spread around the NULLs.
	levels []uint32
	ind    []uint32
	tmp    []uint64
}

func newPQColumn(p pqColPlan, pages *pqPager, cache *pqDictCache) *pqColumn {
	c := &pqColumn{p: p, pages: pages, cache: cache}
	if s, ok := pqScratchPool.Get().(*pqScratch); ok {
		c.levels, c.ind, c.tmp = s.levels, s.ind, s.tmp
		*s = pqScratch{}
		pqScratchFree.Put(s)
	}
	return c
}

func (c *pqColumn) close() {
	if c.pages != nil {
		c.pages.close()
		c.pages = nil
	}
	if c.strs != nil {
		c.cache.release(c.strs)
		c.strs = nil
	}
	if c.levels != nil || c.ind != nil || c.tmp != nil {
		s, _ := pqScratchFree.Get().(*pqScratch)
		if s == nil {
			s = new(pqScratch)
		}
		s.levels, s.ind, s.tmp = c.levels, c.ind, c.tmp
		c.levels, c.ind, c.tmp = nil, nil, nil
		pqScratchPool.Put(s)
	}
}

// pqScratch is a closed column's scratch (levels, indices, values: a
// vector's worth each, ~40 KiB), for the next column to open: a query of
// a few hundred rows opened ~9 columns and allocated ~80 KiB of it anew
// (BenchmarkSQLPointPersisted's one host, allocation profile), which the
// garbage collector then paid for. pqScratchFree holds the empty holders,
// so that moving scratch in and out allocates nothing either.
type pqScratch struct {
	levels, ind []uint32
	tmp         []uint64
}

var pqScratchPool, pqScratchFree sync.Pool

// emit writes the column's next k rows into vec.
func (c *pqColumn) emit(vec duck.Vector, k int) error {
	if c.p.kind == pqBytes {
		return c.emitBytes(vec, k)
	}
	return c.emitFixed(vec, k)
}

// nextPage moves to the next data page, reading the dictionary page on
// the way.
func (c *pqColumn) nextPage() error {
	for {
		pg, ok, err := c.pages.nextPage()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if taken, err := c.takePage(pg); err != nil || taken {
			return err
		}
	}
	return fmt.Errorf("%w: the column chunk has fewer rows than its row group", errCorrupt)
}

// takePage makes p the page being read, if it is a data page with rows;
// a dictionary page is read into the chunk's dictionary.
func (c *pqColumn) takePage(p *pqPage) (taken bool, err error) {
	data, nvals := p.data, p.nvals
	switch p.kind {
	case pqDictPage:
		return false, c.readDict(p)
	case pqDataV1:
		if c.p.nullable {
			if p.defEnc != parquet.Encodings.RLE || len(data) < 4 {
				return false, fmt.Errorf("%w: definition levels encoded %s", errCorrupt, p.defEnc)
			}
			n := int(binary.LittleEndian.Uint32(data))
			if n > len(data)-4 {
				return false, errCorrupt
			}
			c.defs.reset(data[4:4+n], 1)
			data = data[4+n:]
		}
	case pqDataV2:
		rep, def := p.repLen, p.defLen
		if rep != 0 || def < 0 || def > len(data) {
			return false, errCorrupt
		}
		if c.p.nullable {
			c.defs.reset(data[:def], 1)
		}
		data = data[def:]
	default:
		return false, nil
	}
	c.left, c.indexed, c.rleBool, c.plain, c.bit = nvals, false, false, nil, 0
	switch enc := p.enc; enc {
	case parquet.Encodings.Plain:
		c.plain = data
	case parquet.Encodings.PlainDict, parquet.Encodings.RLEDict:
		if (c.dict == nil && c.strs == nil) || len(data) < 1 || data[0] > 32 {
			return false, fmt.Errorf("%w: dictionary indices without a dictionary", errCorrupt)
		}
		c.idx.reset(data[1:], int(data[0]))
		c.indexed = true
	case parquet.Encodings.RLE:
		if c.p.kind != pqBool || len(data) < 4 {
			return false, fmt.Errorf("%w: values encoded %s", errCorrupt, enc)
		}
		n := int(binary.LittleEndian.Uint32(data))
		if n > len(data)-4 {
			return false, errCorrupt
		}
		c.idx.reset(data[4:4+n], 1)
		c.rleBool = true
	default:
		// pqPlan read the chunk's metadata: the file contradicts it.
		return false, fmt.Errorf("%w: values encoded %s", errCorrupt, enc)
	}
	return c.left > 0, nil
}

// seek makes row (of the row group) the column's next, before any row
// was read: the dictionary page is read, then the data page that holds
// row (found through the offset index, pages), and the rows before it in
// that page are passed over. The pages before it are neither read nor
// decompressed: what a selective query saves (pqrange.go).
func (c *pqColumn) seek(row int, pages []*metadata.PageLocation) error {
	i := sort.Search(len(pages), func(i int) bool { return pages[i].FirstRowIndex > int64(row) }) - 1
	if i < 0 {
		return fmt.Errorf("%w: the offset index has no page for row %d", errCorrupt, row)
	}
	dp, err := c.pages.dictionary()
	if err != nil {
		return err
	}
	if dp != nil {
		if err := c.readDict(dp); err != nil {
			return err
		}
	}
	if err := c.pages.seek(pages, i); err != nil {
		return err
	}
	if pg, ok, err := c.pages.nextPage(); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: no page at row %d", errCorrupt, row)
	} else if taken, err := c.takePage(pg); err != nil {
		return err
	} else if !taken {
		return fmt.Errorf("%w: the offset index points at no data page for row %d", errCorrupt, row)
	}
	skip := row - int(pages[i].FirstRowIndex)
	if skip > c.left {
		return fmt.Errorf("%w: the page at row %d holds %d rows, fewer than the offset index says", errCorrupt, pages[i].FirstRowIndex, c.left)
	}
	return c.skipRows(skip)
}

// skipRows passes over the next n rows of the page being read (n at most
// what it has left) without writing them anywhere.
func (c *pqColumn) skipRows(n int) error {
	// The levels are decoded a vector at a time: a skip over most of a
	// page (a seek) would otherwise allocate a level for each of its rows,
	// for every column of every row group a query opens.
	nv := 0
	for done := 0; done < n; {
		k := min(n-done, vectorSize)
		_, v, err := c.defsOf(k)
		if err != nil {
			return err
		}
		nv += v
		done += k
	}
	switch {
	case c.indexed, c.rleBool:
		if got, err := c.idx.skip(nv); err != nil || got < nv {
			return errors.Join(errCorrupt, err)
		}
	case c.p.kind == pqBool:
		c.bit += nv
	case c.p.kind == pqBytes:
		for range nv {
			if len(c.plain) < 4 {
				return fmt.Errorf("%w: page values short", errCorrupt)
			}
			l := int(binary.LittleEndian.Uint32(c.plain))
			if l > len(c.plain)-4 {
				return fmt.Errorf("%w: page values short", errCorrupt)
			}
			c.plain = c.plain[4+l:]
		}
	default:
		in := c.p.inWidth()
		if len(c.plain) < nv*in {
			return fmt.Errorf("%w: page values short", errCorrupt)
		}
		c.plain = c.plain[nv*in:]
	}
	c.left -= n
	return nil
}

// readDict reads the chunk's dictionary page.
func (c *pqColumn) readDict(p *pqPage) error {
	if c.dict != nil || c.strs != nil {
		return fmt.Errorf("%w: a second dictionary page", errCorrupt)
	}
	if enc := p.enc; enc != parquet.Encodings.Plain && enc != parquet.Encodings.PlainDict {
		return fmt.Errorf("%w: dictionary encoded %s", errCorrupt, enc)
	}
	n := p.nvals
	if c.p.kind == pqBytes {
		s, err := c.cache.get(p.data, n, c.p.blob)
		if err != nil {
			return err
		}
		c.strs = s
		return nil
	}
	d, err := p.converted(&c.p, n)
	if err != nil {
		return err
	}
	c.dict = d
	return nil
}

// nextRun is the next run of at most want rows within one page (the next
// page read first if this one is done), with its definition levels and
// valid count (as defsOf).
func (c *pqColumn) nextRun(want int) (n int, levels []uint32, nv int, err error) {
	if c.left == 0 {
		if err := c.nextPage(); err != nil {
			return 0, nil, 0, err
		}
	}
	n = min(want, c.left)
	levels, nv, err = c.defsOf(n)
	return n, levels, nv, err
}

// defsOf reads the definition levels of the next n rows of the page: nil
// when all n are valid, else a level (1 valid, 0 NULL) a row; nv is how
// many are valid.
func (c *pqColumn) defsOf(n int) (levels []uint32, nv int, err error) {
	if !c.p.nullable {
		return nil, n, nil
	}
	v, ok, err := c.defs.run(n)
	if err != nil {
		return nil, 0, err
	}
	lv := growUint32(&c.levels, n)
	if ok {
		if v == 1 {
			return nil, n, nil
		}
		clear(lv)
		return lv, 0, nil
	}
	if got, err := c.defs.decode(lv); err != nil || got < n {
		return nil, 0, errors.Join(errCorrupt, err)
	}
	for _, l := range lv {
		nv += int(l)
	}
	if nv == n {
		return nil, n, nil
	}
	return lv, nv, nil
}

// indices decodes the next n dictionary indices (or RLE booleans).
func (c *pqColumn) indices(n int) ([]uint32, error) {
	ind := growUint32(&c.ind, n)
	if got, err := c.idx.decode(ind); err != nil || got < n {
		return nil, errors.Join(errCorrupt, err)
	}
	return ind, nil
}

// values decodes the next n non-null values of the page into dst, in
// DuckDB's layout.
func (c *pqColumn) values(dst []byte, n int) error {
	switch {
	case c.indexed:
		ind, err := c.indices(n)
		if err != nil {
			return err
		}
		if !gather(dst, c.dict, ind, c.p.width) {
			return fmt.Errorf("%w: a dictionary index out of range", errCorrupt)
		}
		return nil
	case c.rleBool:
		ind, err := c.indices(n)
		if err != nil {
			return err
		}
		for i, v := range ind {
			dst[i] = byte(v)
		}
		return nil
	case c.p.kind == pqBool:
		if err := c.p.convert(dst, c.plain, c.bit, n); err != nil {
			return err
		}
		c.bit += n
		return nil
	}
	in := c.p.inWidth()
	if len(c.plain) < n*in {
		return fmt.Errorf("%w: page values short", errCorrupt)
	}
	if err := c.p.convert(dst, c.plain[:n*in], 0, n); err != nil {
		return err
	}
	c.plain = c.plain[n*in:]
	return nil
}

// emitFixed writes the next k rows of a fixed-width column into vec.
func (c *pqColumn) emitFixed(vec duck.Vector, k int) error {
	w := c.p.width
	out := unsafe.Slice((*byte)(duck.VectorGetData(vec)), k*w)
	var mask []uint64
	for done := 0; done < k; {
		n, lv, nv, err := c.nextRun(k - done)
		if err != nil {
			return err
		}
		dst := out[done*w : (done+n)*w]
		if lv == nil {
			if err := c.values(dst, n); err != nil {
				return err
			}
		} else {
			tmp := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(growUint64(&c.tmp, (nv*w+7)/8)))), nv*w)
			if err := c.values(tmp, nv); err != nil {
				return err
			}
			spread(dst, tmp, lv, w)
			if mask == nil {
				mask = validityOf(vec, k)
			}
			setInvalid(mask, lv, done)
		}
		c.left -= n
		done += n
	}
	return nil
}

// validityOf returns vec's validity mask for k rows, writable.
func validityOf(vec duck.Vector, k int) []uint64 {
	duck.VectorEnsureValidityWritable(vec)
	return unsafe.Slice((*uint64)(duck.VectorGetValidity(vec)), (k+63)/64)
}

// setInvalid marks the rows from off whose level is 0 NULL.
func setInvalid(mask []uint64, levels []uint32, off int) {
	for r, l := range levels {
		if l == 0 {
			mask[(off+r)>>6] &^= 1 << ((off + r) & 63)
		}
	}
}

// inWidth is the bytes of a plain value in the file.
func (p *pqColPlan) inWidth() int {
	switch p.kind {
	case pqNarrow8, pqNarrow16:
		return 4
	case pqScale:
		return 8
	}
	return p.width
}

// convert decodes n plain values from src (booleans from bit bit) into
// dst, in DuckDB's layout.
func (p *pqColPlan) convert(dst, src []byte, bit, n int) error {
	switch p.kind {
	case pqCopy:
		if len(src) < n*p.width {
			return fmt.Errorf("%w: values short", errCorrupt)
		}
		copy(dst[:n*p.width], src)
	case pqNarrow8:
		if len(src) < n*4 {
			return fmt.Errorf("%w: values short", errCorrupt)
		}
		for i := range dst[:n] {
			dst[i] = src[4*i]
		}
	case pqNarrow16:
		if len(src) < n*4 {
			return fmt.Errorf("%w: values short", errCorrupt)
		}
		for i := range n {
			dst[2*i], dst[2*i+1] = src[4*i], src[4*i+1]
		}
	case pqScale:
		if len(src) < n*8 {
			return fmt.Errorf("%w: values short", errCorrupt)
		}
		out := asInt64s(dst[:n*8])
		if p.div > 0 {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint64(src[8*i:])) / p.div
			}
			return nil
		}
		lo, hi := math.MinInt64/p.mul, math.MaxInt64/p.mul
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(src[8*i:]))
			if v < lo || v > hi {
				return fmt.Errorf("timestamp %d out of range in DuckDB's unit", v)
			}
			out[i] = v * p.mul
		}
	case pqBool:
		if (bit+n+7)/8 > len(src) {
			return fmt.Errorf("%w: values short", errCorrupt)
		}
		for i := range dst[:n] {
			b := bit + i
			dst[i] = src[b>>3] >> (b & 7) & 1
		}
	}
	return nil
}

// gather writes dict[ind[i]] (values w bytes wide) into dst; false if an
// index is out of range.
func gather(dst, dict []byte, ind []uint32, w int) bool {
	switch w {
	case 1:
		return gatherOf(dst, dict, ind)
	case 2:
		return gatherOf(asUint16s(dst), asUint16s(dict), ind)
	case 4:
		return gatherOf(asUint32s(dst), asUint32s(dict), ind)
	default:
		return gatherOf(asUint64s(dst), asUint64s(dict), ind)
	}
}

func gatherOf[T any](dst, dict []T, ind []uint32) bool {
	dst = dst[:len(ind)]
	for i, x := range ind {
		if int(x) >= len(dict) {
			return false
		}
		dst[i] = dict[x]
	}
	return true
}

// spread writes the values of src (w bytes each) into the rows of dst
// whose level is 1, in order; NULL rows get zeros.
func spread(dst, src []byte, levels []uint32, w int) {
	switch w {
	case 1:
		spreadOf(dst, src, levels)
	case 2:
		spreadOf(asUint16s(dst), asUint16s(src), levels)
	case 4:
		spreadOf(asUint32s(dst), asUint32s(src), levels)
	default:
		spreadOf(asUint64s(dst), asUint64s(src), levels)
	}
}

func spreadOf[T any](dst, src []T, levels []uint32) {
	var zero T
	j := 0
	for r, l := range levels {
		if l != 0 {
			dst[r] = src[j]
			j++
		} else {
			dst[r] = zero
		}
	}
}

// Typed views of aligned byte slices (DuckDB's vectors, alignedBytes).
func asUint16s(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

func asUint32s(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func asUint64s(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func asInt64s(b []byte) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

// alignedBytes returns n bytes aligned for any fixed-width value.
func alignedBytes(n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(make([]uint64, (n+7)/8+1)))), n)
}

func growUint32(buf *[]uint32, n int) []uint32 {
	if cap(*buf) < n {
		*buf = make([]uint32, n)
	}
	return (*buf)[:n]
}

func growUint64(buf *[]uint64, n int) []uint64 {
	if cap(*buf) < n {
		*buf = make([]uint64, n)
	}
	return (*buf)[:n]
}
