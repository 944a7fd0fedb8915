//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// The latest row per series of several tag columns.
//
// SELECT host, region, max(time), arg_max(usage, time) … GROUP BY host,
// region (two to four string columns; the list and the rest as for one
// key in latest.go) is pruned as one key is: chunks newest first, each
// whose rows all match crediting each combination of key values of its
// rows with their latest time, and a chunk whose every combination
// (NULLs included) already has a later row is left out. Each
// combination's latest row is then picked without DuckDB when the query
// selects the keys and the latest rows' columns alone, with no ORDER BY
// or LIMIT (latest_multi_direct.go); otherwise DuckDB answers over the
// chunks kept and the persisted files, given as their latest rows where
// those stand for them (latest_file_swap.go).
//
// Equalities of string columns in the WHERE (region = 'r', host IN
// (…)) admit the rows of their values alone: a combination of other
// values (or NULL) in such a column matches nothing, and needs no later
// row for its chunk to be left out (its bound reads as +inf). A column
// of equalities that is not grouped by is a key column all the same: the
// latest row per host of region 'r' is that of (host, 'r').
//
// A combination is named, in the bounds, by its values (multiKey); in a
// chunk, by its dictionaries' indices, one number a row (the indices
// mixed, a slot past each dictionary for NULL), and what each number's
// bound is (looked up once per number) is kept per tuple of dictionaries
// (multiMemo), which a partition's chunks share while their dictionaries
// are shared: a chunk is checked in one pass over its rows, a few
// nanoseconds each. Dictionaries whose numbers would exceed
// maxMultiCodes (tags of many values each) make their chunk kept and
// crediting nothing, which prunes less, never wrongly.

// maxMultiKeys bounds the key columns taken.
const maxMultiKeys = 4

// maxMultiMemos bounds the numbers a pruning's memos hold (12 bytes
// each): ~12 MiB.
const maxMultiMemos = 1 << 20

// maxMultiCodes is how many numbers the dictionaries of a chunk of rows
// rows may name: a few times its rows, so that a memo and a credit's
// array stay near the chunk's size.
func maxMultiCodes(rows int) int { return max(4*rows, 1<<12) }

// multiKeysOf reads GROUP BY groups (two or more) as p's key columns
// (p.cols), and sh.keys; false when one is not a string column of t, or
// one is named twice.
func (p *latestPrune) multiKeysOf(sh *shapeCheck, t *catalog.Table, groups []any) bool {
	if len(groups) > maxMultiKeys {
		return false
	}
	sh.keys = map[string]bool{}
	for _, e := range groups {
		g, col, ok := latestKeyColumn(sh, t, e)
		if !ok || sh.keys[g] {
			return false
		}
		sh.keys[g] = true
		p.cols = append(p.cols, col)
	}
	p.col = p.cols[0]
	return true
}

// multiEqualsOf takes eq, the WHERE's string equalities (nil: none), as
// the values p.colOnly admits, adding their columns to p.cols; false
// when a column is not a string column of t, or the columns would be
// too many.
func (p *latestPrune) multiEqualsOf(t *catalog.Table, eq map[string][]string) bool {
	if eq == nil {
		return true
	}
	p.colOnly = make([]map[string]bool, len(p.cols))
	// In a fixed order: the kept combinations of chunks are named by the
	// columns (latest_combos.go).
	for _, g := range slices.Sorted(maps.Keys(eq)) {
		col, ok := findColumn(t, g)
		if !ok || !isStringColumn(t, col) {
			return false
		}
		i := slices.Index(p.cols, col)
		if i < 0 {
			if len(p.cols) == maxMultiKeys {
				return false
			}
			p.cols = append(p.cols, col)
			p.colOnly = append(p.colOnly, nil)
			i = len(p.cols) - 1
		}
		only := make(map[string]bool, len(eq[g])) // empty: x = 'a' AND x = 'b'
		for _, v := range eq[g] {
			only[v] = true
		}
		p.colOnly[i] = only
	}
	return true
}

// combosAreGroups says whether each combination of p.cols is one group
// of the answer, the first groups columns being those grouped by: each
// column past them (of equalities alone) admits at most one value.
func (p *latestPrune) combosAreGroups(groups int) bool {
	for i := groups; i < len(p.cols); i++ {
		if p.colOnly == nil || p.colOnly[i] == nil || len(p.colOnly[i]) > 1 {
			return false
		}
	}
	return true
}

// How many series per group: SELECT region, count(DISTINCT host) …
// GROUP BY region counts the combinations of (region, host) with a
// host, and every combination keeps its latest row through the pruning
// by (region, host): DuckDB counts over what it keeps, the files given
// as their latest rows (latest_file_swap.go). The other aggregates the
// list may hold (max(time), arg_max) read the latest rows of each
// combination, which are the group's latest rows too.

// countDistinctOf is the column of m when it is count(DISTINCT col) of a
// string column of t.
func countDistinctOf(sh *shapeCheck, t *catalog.Table, m map[string]any) (string, bool) {
	arg, ok := countDistinctArg(m) // latest_count.go
	if !ok {
		return "", false
	}
	_, col, ok := latestKeyColumn(sh, t, arg)
	return col, ok
}

// distinctKeys adds cols, whose distinct values the query counts, to the
// key columns (one key becoming the first of several); false when they
// would be too many.
func (p *latestPrune) distinctKeys(cols []string) bool {
	if len(p.cols) == 0 {
		p.cols = []string{p.col}
		if p.only != nil {
			p.colOnly, p.only = []map[string]bool{p.only}, nil
		}
	}
	for _, c := range cols {
		if slices.Contains(p.cols, c) {
			continue
		}
		if len(p.cols) == maxMultiKeys {
			return false
		}
		p.cols = append(p.cols, c)
		if p.colOnly != nil {
			p.colOnly = append(p.colOnly, nil)
		}
	}
	return true
}

// multiCols are a chunk's key columns, in p.cols' order, and the stride
// of each in a combination's number.
type multiCols struct {
	keys    []latestKey
	strides []int
	codes   int // how many numbers: the product of each column's values plus NULL
}

// multiColsFinder finds the key columns of chunk after chunk in memory
// of its own, and keeps where they are in the last schema: a pruning
// looks at hundreds of chunks, most of one schema.
type multiColsFinder struct {
	cols   []string
	m      multiCols
	schema *arrow.Schema
	pos    []int // of each of cols in schema; -1: not there
}

// samePlaces says whether sc (each chunk has a schema of its own) has
// the columns where the last one had them, and no other of their names.
func (f *multiColsFinder) samePlaces(sc *arrow.Schema) bool {
	if f.schema == nil || sc.NumFields() != f.schema.NumFields() {
		return false
	}
	for i, pos := range f.pos {
		if pos < 0 || sc.Field(pos).Name != f.cols[i] {
			return false
		}
	}
	return true
}

// of returns rec's key columns, valid until the next call; ok is false
// for a column that is not dictionary-encoded strings, or numbers past
// maxMultiCodes.
func (f *multiColsFinder) of(rec arrow.RecordBatch) (*multiCols, bool) {
	if sc := rec.Schema(); sc != f.schema && !f.samePlaces(sc) {
		f.schema = sc
		f.pos = f.pos[:0]
		for _, col := range f.cols {
			i := -1
			if ix := sc.FieldIndices(col); len(ix) > 0 {
				i = ix[0]
			}
			f.pos = append(f.pos, i)
		}
	}
	m := &f.m
	m.keys, m.strides, m.codes = m.keys[:0], m.strides[:0], 1
	limit := maxMultiCodes(int(rec.NumRows()))
	for _, pos := range f.pos {
		k, ok := latestKeyAt(rec, pos)
		if !ok {
			return nil, false
		}
		n := 1 // NULL's slot
		if k.dict != nil {
			n += k.dict.Len()
		}
		m.keys, m.strides = append(m.keys, k), append(m.strides, m.codes)
		if m.codes *= n; m.codes > limit {
			return nil, false
		}
	}
	return m, true
}

// codesOf returns each of rows rows' combination number, in buf's
// memory: column by column, each a tight loop.
func (m *multiCols) codesOf(rows int, buf []int32) []int32 {
	buf = slices.Grow(buf[:0], rows)[:rows]
	clear(buf)
	for i, k := range m.keys {
		s := int32(m.strides[i])
		switch {
		case k.dict == nil: // NULL, slot 0
		case k.arr.NullN() == 0:
			for r, v := range k.idx[:rows] {
				buf[r] += v * s
			}
		default:
			null := int32(k.dict.Len()) * s
			for r, v := range k.idx[:rows] {
				if k.arr.IsValid(r) {
					buf[r] += v * s
				} else {
					buf[r] += null
				}
			}
		}
	}
	return buf
}

// key is the bounds' name of combination number c: each column's value,
// length-prefixed, or a NULL mark.
func (m *multiCols) key(c int, buf []byte) []byte {
	buf = buf[:0]
	for i := len(m.keys) - 1; i >= 0; i-- {
		k := m.keys[i]
		v := c / m.strides[i]
		c -= v * m.strides[i]
		if k.dict == nil || v == k.dict.Len() {
			buf = append(buf, 0)
			continue
		}
		s := k.dict.Value(v)
		buf = append(buf, 1)
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf
}

// admits says whether combination number c holds, in each column, a
// value only admits (only[i] nil: any value of column i; NULL is no
// value admitted).
func (m *multiCols) admits(c int, only []map[string]bool) bool {
	for i := len(m.keys) - 1; i >= 0; i-- {
		k := m.keys[i]
		v := c / m.strides[i]
		c -= v * m.strides[i]
		if only[i] == nil {
			continue
		}
		if k.dict == nil || v == k.dict.Len() || !only[i][k.dict.Value(v)] {
			return false
		}
	}
	return true
}

// multiMemo is, for a tuple of dictionaries at a version of the bounds,
// the bound of each combination number looked up (gen[c] == cur).
type multiMemo struct {
	bounds  []int64
	gen     []uint32
	cur     uint32
	version int
}

// multiBounds are, per combination of key values, the greatest time of
// a kept row that credits it.
type multiBounds struct {
	bound   map[string]int64
	version int
	memos   map[string]*multiMemo // by the dictionaries' dictIDs
	// memoCodes counts the numbers of memos, bounded by memoLimit
	// (maxMultiMemos; less in tests).
	memoCodes, memoLimit int
	best                 []int64 // a credit's, reused
	work                 int
	buf                  []byte
	codes                []int32 // a chunk's, reused
	// seen[c] == seenGen: c was seen in the chunk being checked.
	seen    []uint32
	seenGen uint32
	cache   *comboCache // nil: none kept
	cols    []string
	colsKey string // keySpec(cols), naming cache entries
	idBuf   []byte // a memo's name, reused
	// only, when not nil, are the values each column admits
	// (latestPrune.colOnly).
	only []map[string]bool
}

func newMultiBounds(cache *comboCache, cols []string) *multiBounds {
	return &multiBounds{bound: map[string]int64{}, memos: map[string]*multiMemo{}, memoLimit: maxMultiMemos, cache: cache, cols: cols, colsKey: keySpec(cols)}
}

// memo is the memo of m's dictionaries, at the bounds' version.
func (b *multiBounds) memo(m *multiCols) *multiMemo {
	id := b.idBuf[:0]
	defer func() { b.idBuf = id }()
	for _, k := range m.keys {
		if k.dict == nil {
			id = append(id, 0)
			continue
		}
		// As dictID: a dictionary's memory and length; the chunks are
		// released only once the pruning is done.
		id = binary.AppendUvarint(id, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(k.dict.ValueOffsets())))))
		id = binary.AppendUvarint(id, uint64(k.dict.Len()))
	}
	mm := b.memos[string(id)]
	if mm == nil {
		// Chunks of dictionaries of their own each need a memo, which
		// serves them alone: past maxMultiMemos numbers, the memos go,
		// their memory taken again by the next.
		var reuse *multiMemo
		if b.memoCodes+m.codes > b.memoLimit {
			for _, old := range b.memos {
				if cap(old.bounds) >= m.codes && (reuse == nil || cap(old.bounds) < cap(reuse.bounds)) {
					reuse = old
				}
			}
			clear(b.memos)
			b.memoCodes = 0
		}
		if reuse != nil {
			mm = reuse
			mm.bounds, mm.gen = mm.bounds[:m.codes], mm.gen[:m.codes]
			clear(mm.gen)
			mm.cur, mm.version = 1, b.version
		} else {
			mm = &multiMemo{bounds: make([]int64, m.codes), gen: make([]uint32, m.codes), cur: 1, version: b.version}
		}
		b.memos[string(id)] = mm
		b.memoCodes += m.codes
		b.work += m.codes
	}
	if mm.version != b.version {
		mm.version = b.version
		if mm.cur++; mm.cur == 0 {
			clear(mm.gen)
			mm.cur = 1
		}
	}
	return mm
}

// covered says whether every combination of the chunk's rows (columns
// m) has a bound after maxTime. The combinations are those b.cache keeps
// for the chunk, or found in a pass over its rows and kept when every
// row was looked at.
func (b *multiBounds) covered(m *multiCols, rows int, maxTime int64) bool {
	mm := b.memo(m)
	key, cacheable := b.cache.keyOf(m, b.colsKey)
	if cacheable {
		if codes := b.cache.get(key, m); codes != nil {
			b.work += len(codes)
			for _, c := range codes {
				if !b.laterBound(m, mm, c, maxTime) {
					return false
				}
			}
			return true
		}
	}
	b.work += rows
	b.codes = m.codesOf(rows, b.codes)
	if len(b.seen) < m.codes {
		b.seen = make([]uint32, m.codes)
	}
	if b.seenGen++; b.seenGen == 0 {
		clear(b.seen)
		b.seenGen = 1
	}
	var distinct []int32
	for _, c := range b.codes {
		if b.seen[c] == b.seenGen {
			continue
		}
		b.seen[c] = b.seenGen
		if !b.laterBound(m, mm, c, maxTime) {
			return false
		}
		distinct = append(distinct, c)
	}
	if cacheable {
		slices.Sort(distinct)
		b.cache.put(key, m, distinct)
	}
	return true
}

// laterBound says whether combination number c (columns m, memo mm) has
// a bound after maxTime.
func (b *multiBounds) laterBound(m *multiCols, mm *multiMemo, c int32, maxTime int64) bool {
	if mm.gen[c] != mm.cur {
		b.lookUp(m, mm, c)
	}
	return mm.bounds[c] > maxTime
}

// lookUp sets mm's bound of combination number c (columns m): +inf for
// one the WHERE's equalities do not admit, whose rows match nothing.
func (b *multiBounds) lookUp(m *multiCols, mm *multiMemo, c int32) {
	if b.only != nil && !m.admits(int(c), b.only) {
		mm.bounds[c], mm.gen[c] = math.MaxInt64, mm.cur
		b.work++
		return
	}
	b.buf = m.key(int(c), b.buf)
	v, ok := b.bound[string(b.buf)]
	if !ok {
		v = math.MinInt64
	}
	mm.bounds[c], mm.gen[c] = v, mm.cur
	b.work++
}

// credit raises the bounds of the combinations of rec's rows (columns m)
// to their greatest times, counting only rows where no column of
// nonNull is NULL.
func (b *multiBounds) credit(rec arrow.RecordBatch, m *multiCols, nonNull []string) {
	n := int(rec.NumRows())
	b.work += n + m.codes
	times, need, ok := creditColumns(rec, nonNull)
	if !ok {
		return
	}
	if cap(b.best) < m.codes {
		b.best = make([]int64, m.codes)
	}
	best := b.best[:m.codes]
	for i := range best {
		best[i] = math.MinInt64
	}
	b.codes = m.codesOf(n, b.codes)
rows:
	for r, c := range b.codes {
		for _, a := range need {
			if a.IsNull(r) {
				continue rows
			}
		}
		if t := int64(times[r]); t > best[c] {
			best[c] = t
		}
	}
	raised := false
	for c, t := range best {
		if t == math.MinInt64 {
			continue
		}
		b.buf = m.key(c, b.buf)
		if old, ok := b.bound[string(b.buf)]; !ok || t > old {
			b.bound[string(b.buf)], raised = t, true
		}
	}
	if raised {
		b.version++
	}
}

// pruneMulti is prune for several key columns: files are all kept (what
// combinations a file holds is not known without reading it: its
// dictionary pages give each column's values, whose product, for tags
// that go together as host and region do, holds combinations no row
// has, and no later row could credit).
func (p *latestPrune) pruneMulti(chunks []buffer.Chunk, files []persist.File, cutoff int64) (_ []buffer.Chunk, _ []persist.File, nchunks, nfiles int) {
	order := newestFirst(chunks)
	sure := metaAgg{exact: p.exact}
	b := newMultiBounds(p.combos, p.cols)
	b.only = p.colOnly
	out := make([]bool, len(chunks))
	n := 0
	find := multiColsFinder{cols: p.cols}
	for _, i := range order {
		if b.work > latestBudget {
			break
		}
		c := chunks[i]
		m, ok := find.of(c.Rec)
		if !ok {
			continue
		}
		if b.covered(m, int(c.Rec.NumRows()), c.MaxTime) {
			out[i] = true
			n++
			continue
		}
		if sure.sure(c.MinTime, c.MaxTime, cutoff) {
			b.credit(c.Rec, m, p.nonNull)
		}
	}
	if n == 0 {
		return chunks, files, 0, 0
	}
	return releaseLeftOut(chunks, out), files, n, 0
}
