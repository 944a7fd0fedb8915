//go:build duckdb_arrow

package query

import (
	"cmp"
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// The latest row per series, without a last-value cache.
//
// A query of the shape
//
//	SELECT key, max(time), arg_max(col, time), … FROM table GROUP BY key
//
// (key one string column; the list may hold the key, constants, max(time)
// and arg_max / max_by / arg_max_null(col, time); ORDER BY and LIMIT of
// the groups allowed; a WHERE of bounds on time, and of equalities of
// the key (key = 'v', key IN ('v', 'w')), or none) needs, for each value
// of key, only its rows of the greatest time. (Equalities of other
// string columns make those columns keys too: latest_multi.go.)
// QuestDB answers it with LATEST ON, InfluxDB 3 with a last-value
// cache; DuckDB's aggregate reads every row. Its scan
// hands it fewer: chunks are taken newest first (by their greatest
// time), and a chunk whose rows all match for certain (within the
// WHERE's exact bounds, scanBounds, and no retention cutoff among them)
// credits each key value it holds with the greatest time of its rows of
// that value (bound). A chunk is left out when every
// key value of its rows (NULL included) has a bound after the chunk's
// greatest time: for each of them a kept
// row is strictly later than any of the chunk's, so no group, maximum or
// tie changes without it. For arg_max(col, time), which skips rows whose
// col is NULL, only rows with every such col non-NULL credit.
//
// A persisted file is left out the same way when the key values it can
// hold are known from its dictionary pages (latest_files.go): a table
// persisted up to its last hour is read as that hour's chunks. Files
// credit nothing when DuckDB reads them; when the latest rows are picked
// in Go (latest_direct.go), a file kept credits its latest rows, newest
// files first, so that older files of the same series are left out
// unread. The files left are read by DuckDB, or, for a query that only
// selects the latest rows (latest_direct.go), once each for their latest
// row of each key value (latest_file_rows.go).
//
// Crediting reads the key and time of a chunk's rows. Checking a chunk
// looks up its dictionary's values (once per dictionary and change of
// the bounds); when one has no later bound (a series that stopped
// reporting is still in the dictionaries of the partition's later
// chunks), it reads the chunk's keys, a nanosecond or so a row against
// the ~50 DuckDB's aggregate would spend. The work is bounded by
// latestBudget, past which the chunks left are kept.

// latestPrune is the pruning of one such query.
type latestPrune struct {
	key buffer.TableKey // lower-cased
	col string          // the key column, as the table names it
	// cols, when set, are the key columns (two or more, col the first):
	// the chunks are pruned by their combinations (latest_multi.go),
	// those of sealed chunks kept in combos (the engine's; nil: none).
	cols   []string
	combos *comboCache
	// colOnly, when set, is per column of cols the values the WHERE's
	// equalities admit (nil: any). Rows of other values match nothing,
	// so their combinations need no later row (latest_multi.go). A
	// column may be in cols for its equalities alone, not a key of the
	// answer: WHERE region = 'r' GROUP BY host is pruned by (host,
	// region), of region 'r' only.
	colOnly []map[string]bool
	// exact are the times within which a row matches the WHERE for
	// certain (allTime without one).
	exact timeBounds
	// nonNull are the columns arg_max (and max_by) read: a row credits
	// its key only if none of them is NULL in it.
	nonNull []string
	// project, when set, is the table column each output column is of
	// the one row of each key, which then is the answer: a query
	// selecting the key, max(time) and arg_max(col, time) only, with no
	// WHERE or one of bounds on time and values of the key (where,
	// only), and no ORDER BY or LIMIT or those of cut (latest_direct.go,
	// latest_order.go).
	project []int
	table   *catalog.Table
	// tab is the table, whether or not the answer is found in Go: for
	// the files DuckDB is given as their latest rows
	// (latest_file_swap.go).
	tab   *catalog.Table
	where *directWhere
	cut   *latestCut
	// countKeys: the answer is the number of the latest rows' key values,
	// NULL not counted (SELECT count(DISTINCT key): latest_count.go).
	countKeys bool
	// only, when not nil, are the key values the WHERE admits (key = 'v'
	// beside bounds on time): rows of other values, and NULL keys, match
	// nothing, so they need no later row for a chunk or a file to be
	// left out, and are not picked.
	only map[string]bool
}

// latestBudget bounds the work of a pruning (rows read and dictionary
// entries looked up): some tens of milliseconds at most, where DuckDB's
// aggregate spends about 50 ns on each row it is given.
const latestBudget = 1 << 26

// latestOf returns the pruning of the statement tree, nil if its shape is
// not the one above. exact is scanBounds'.
func latestOf(tree map[string]any, db string, snap *catalog.Snapshot, exact, exactEq map[buffer.TableKey]timeBounds, equals map[buffer.TableKey]map[string][]string) *latestPrune {
	node, t, sh, ok := oneTableSelect(tree, db, snap)
	if !ok {
		return nil
	}
	p := &latestPrune{key: lowerKey(t.Database, t.Name), exact: allTime, tab: t}
	var eq map[string][]string
	if node["where_clause"] != nil {
		// Bounds on time and nothing else (a table in exact), or those
		// and equalities of string columns (in exactEq; the key's taken
		// by keyOf, others' by multiEqualsOf).
		if p.exact, ok = exact[p.key]; !ok {
			if p.exact, ok = exactEq[p.key]; !ok {
				return nil
			}
			eq = equals[p.key]
		}
	}
	groups, _ := node["group_expressions"].([]any)
	sets, _ := node["group_sets"].([]any)
	if len(groups) == 0 && len(sets) == 0 {
		if c := latestCountOf(node, t, sh, p, eq); c != nil {
			return c // latest_count.go
		}
		return latestDistinctOf(node, t, sh, p, eq) // latest_distinct.go
	}
	if len(groups) == 0 || len(sets) > 1 {
		return nil
	}
	if len(groups) > 1 {
		// Several key columns (latest_multi.go).
		if !p.multiKeysOf(sh, t, groups) || !p.multiEqualsOf(t, eq) {
			return nil
		}
	} else if _, ok = p.keyOf(sh, t, groups[0], eq); !ok {
		// Equalities of other columns: pruned by the combinations of
		// the key and those columns (latest_multi.go).
		if eq == nil || !p.multiKeysOf(sh, t, groups) || !p.multiEqualsOf(t, eq) {
			return nil
		}
	}
	list, _ := node["select_list"].([]any)
	var distinct []string // count(DISTINCT col)'s columns
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m == nil {
			return nil
		}
		switch m["class"] {
		case "CONSTANT":
		case "COLUMN_REF":
			if n, ok := sh.colRef(m); !ok || !sh.keys[n] {
				return nil
			}
		case "FUNCTION":
			if col, ok := countDistinctOf(sh, t, m); ok {
				distinct = append(distinct, col)
				continue
			}
			c, ok := sh.lastAggregate(m)
			if !ok {
				return nil
			}
			if c != "" {
				name, ok := findColumn(t, c)
				if !ok {
					return nil
				}
				p.nonNull = append(p.nonNull, name)
			}
		default:
			return nil
		}
	}
	mods, _ := node["modifiers"].([]any)
	for _, x := range mods {
		if !groupModifier(x) {
			return nil
		}
	}
	if len(distinct) > 0 {
		// DuckDB counts over what the pruning keeps (latest_multi.go).
		if !p.distinctKeys(distinct) {
			return nil
		}
		return p
	}
	if len(p.cols) > 0 && (len(mods) > 0 || !p.combosAreGroups(len(groups))) {
		// Several keys with an ORDER BY or LIMIT (latest_order.go cuts
		// by one key), or a column of equalities alone of several values
		// (a group's row is then the latest of its combinations): DuckDB
		// answers over what the pruning keeps.
		return p
	}
	// Answered from the latest rows (latest_direct.go) when the WHERE,
	// if any, is bounds on time that a filtered direct scan understands
	// (direct_where.go), with equalities of the key or none: the times
	// it admits are then known exactly at each run.
	if w := node["where_clause"]; w != nil {
		if !p.whereOf(w, t, sh) {
			return p
		}
	}
	project := projection(sh, t, list)
	if project == nil {
		return p
	}
	if len(mods) > 0 {
		var ok bool
		if p.cut, ok = latestCutOf(mods, sh, list, project, t, p.col); !ok {
			return p
		}
	}
	p.project, p.table = project, t
	return p
}

// whereOf reads the WHERE clause w of the query (of table t) into
// p.where; false when it is not bounds on time, with equalities of the
// key column (p.only) or none.
func (p *latestPrune) whereOf(w any, t *catalog.Table, sh *shapeCheck) bool {
	from, ok := newFromTable(t, sh.alias)
	if !ok {
		return false
	}
	if p.where, ok = directWhereOf(w, from, sh.alias, sh.table); !ok {
		return false
	}
	return len(p.where.equals) == 0 || p.only != nil || p.colOnly != nil
}

// keyOf takes e, a string column, as p's key (p.col, and sh.keys)
// with eq, the WHERE's string equalities (keyEquals); g is its
// lower-cased name. false: e is no key p can have.
func (p *latestPrune) keyOf(sh *shapeCheck, t *catalog.Table, e any, eq map[string][]string) (g string, ok bool) {
	g, col, ok := latestKeyColumn(sh, t, e)
	if !ok || !p.keyEquals(eq, g) {
		return "", false
	}
	sh.keys = map[string]bool{g: true}
	p.col = col
	return g, true
}

// keyEquals takes eq, the WHERE's string equalities (nil: none), as the
// key values p is of, g being the key column (lower-cased); false when
// eq is of another column too (a row of a key value could then match
// or not: its latest row is not the answer's).
func (p *latestPrune) keyEquals(eq map[string][]string, g string) bool {
	if eq == nil {
		return true
	}
	vals, ok := eq[g]
	if !ok || len(eq) != 1 {
		return false
	}
	p.only = make(map[string]bool, len(vals)) // empty: x = 'a' AND x = 'b'
	for _, v := range vals {
		p.only[v] = true
	}
	return true
}

// latestKeyColumn is the key column e names (lower-cased, and as t
// names it): a string column of t.
func latestKeyColumn(sh *shapeCheck, t *catalog.Table, e any) (g, col string, ok bool) {
	g, ok = sh.colRef(e)
	if !ok || g == buffer.TimeColumn {
		return "", "", false
	}
	col, ok = findColumn(t, g)
	if !ok || !isStringColumn(t, col) {
		return "", "", false
	}
	return g, col, true
}

func isStringColumn(t *catalog.Table, name string) bool {
	for _, c := range t.Columns {
		if c.Name == name {
			return c.Type.ID() == arrow.STRING
		}
	}
	return false
}

// prune leaves out of chunks and files those it can (see above) and
// returns the rest, with how many of each it left out. keysOf gives the
// key values a file can hold (latest_files.go; nil: not known), rowsOf,
// if not nil, a file's latest row of each key value (latest_file_rows.go;
// false: not known). Chunks left out are released.
func (p *latestPrune) prune(chunks []buffer.Chunk, files []persist.File, cutoff int64, keysOf func(persist.File) *fileKeySet, rowsOf func(persist.File) (buffer.Chunk, bool)) (_ []buffer.Chunk, _ []persist.File, nchunks, nfiles int) {
	if len(p.cols) > 0 {
		return p.pruneMulti(chunks, files, cutoff)
	}
	order := newestFirst(chunks)
	sure := metaAgg{exact: p.exact}
	keys, has := latestKeysOf(chunks, p.col)
	b := newLatestBounds(0)
	b.only = p.only
	b.useSpaces(keys)
	b.useSingle(keys, has)
	if b.single == nil || len(files) > 0 {
		hint := keysHint(chunks, keys)
		if p.only != nil {
			hint = min(hint, len(p.only)) // credit bounds no other value
		}
		b.bound = make(map[string]int64, hint)
	}
	out := make([]bool, len(chunks))
	n := 0
	for _, i := range order {
		if b.work > latestBudget {
			break
		}
		c := chunks[i]
		k, ok := keys[i], has[i]
		if !ok {
			continue
		}
		if b.covered(k, c.MaxTime) {
			out[i] = true
			n++
			continue
		}
		if sure.sure(c.MinTime, c.MaxTime, cutoff) {
			b.credit(c.Rec, k, p.nonNull)
		}
	}
	if len(files) > 0 {
		b.leaveSingle() // files are checked by value
	}
	// A file is left out when every key value it can hold has a later
	// row. Files are looked at newest first, and one kept credits its
	// latest rows (rowsOf; nil: files credit nothing) when all its rows
	// match for certain: a table's older files then hold only values
	// the newer ones credit, and are left out without being read.
	forder := make([]int, len(files))
	for i := range forder {
		forder[i] = i
	}
	slices.SortStableFunc(forder, func(a, b int) int { return cmp.Compare(files[b].MaxTime, files[a].MaxTime) })
	outFiles := make([]bool, len(files))
	for _, i := range forder {
		f := files[i]
		if f.Rows == 0 || b.work > latestBudget {
			continue
		}
		if b.latest > f.MaxTime {
			if ks := keysOf(f); ks != nil && ks.known {
				b.work += len(ks.values) + fileLookCost
				if (!ks.null || b.only != nil || b.null > f.MaxTime) && b.coveredValues(ks.values, f.MaxTime) {
					outFiles[i] = true
					nfiles++
					continue
				}
			}
		}
		if rowsOf == nil || !sure.sure(f.MinTime, f.MaxTime, cutoff) {
			continue
		}
		if c, ok := rowsOf(f); ok {
			if k, ok := latestKeyOf(c.Rec, p.col); ok {
				b.credit(c.Rec, k, p.nonNull)
			}
		}
	}
	if nfiles > 0 {
		keptFiles := make([]persist.File, 0, len(files)-nfiles)
		for i, f := range files {
			if !outFiles[i] {
				keptFiles = append(keptFiles, f)
			}
		}
		files = keptFiles
	}
	if n == 0 {
		return chunks, files, 0, nfiles
	}
	return releaseLeftOut(chunks, out), files, n, nfiles
}

// newestFirst is the indices of chunks with rows, by their greatest time,
// newest first.
func newestFirst(chunks []buffer.Chunk) []int {
	order := make([]int, 0, len(chunks))
	for i, c := range chunks {
		if c.Rec.NumRows() > 0 {
			order = append(order, i)
		}
	}
	// Rows written in time order give chunks oldest first, each
	// strictly later than the last: reversed when so, rather than sorted
	// (a third of a sort's time of 600). Ties are sorted, stably.
	for i := 1; i < len(order); i++ {
		if chunks[order[i]].MaxTime <= chunks[order[i-1]].MaxTime {
			slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(chunks[b].MaxTime, chunks[a].MaxTime) })
			return order
		}
	}
	slices.Reverse(order)
	return order
}

// releaseLeftOut releases the chunks out says are left out, and returns
// the others (in chunks' memory). Released only once a pruning is done: a
// dictionary's memory freed while it runs could be reused by another at
// the same address, which its memos (dictID) would then take for the
// first.
func releaseLeftOut(chunks []buffer.Chunk, out []bool) []buffer.Chunk {
	kept := chunks[:0]
	for i, c := range chunks {
		if out[i] {
			c.Rec.Release()
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// fileLookCost is the work a file's key set counts for besides its
// values: a footer and dictionary pages read the first time.
const fileLookCost = 1 << 12

// latestKey is a chunk's key column: its dictionary-encoded strings, or
// none (dict nil: a chunk written before the column existed, every key
// NULL).
type latestKey struct {
	arr  *array.Dictionary
	dict *array.String
	idx  []int32
	// series, when not nil, are the series ids of dict's values, by
	// which the bounds are read when b.spaces says so (latest_series.go).
	series *buffer.SeriesIDs
}

// latestKeyOf finds column col of rec; ok is false for a column that is
// not dictionary-encoded strings with int32 indices (such a chunk is
// kept and credits nothing).
func latestKeyOf(rec arrow.RecordBatch, col string) (latestKey, bool) {
	ix := rec.Schema().FieldIndices(col)
	if len(ix) == 0 {
		return latestKey{}, true
	}
	return latestKeyAt(rec, ix[0])
}

// latestKeyAt is latestKeyOf of rec's column i (-1: none).
func latestKeyAt(rec arrow.RecordBatch, i int) (latestKey, bool) {
	if i < 0 {
		return latestKey{}, true
	}
	d, ok := rec.Column(i).(*array.Dictionary)
	if !ok {
		return latestKey{}, false
	}
	dict, ok := d.Dictionary().(*array.String)
	idx, ok2 := d.Indices().(*array.Int32)
	if !ok || !ok2 {
		return latestKey{}, false
	}
	return latestKey{arr: d, dict: dict, idx: idx.Int32Values()}, true
}

// hasNull says whether a row of the chunk may have a NULL key.
func (k latestKey) hasNull() bool { return k.arr == nil || k.arr.NullN() > 0 }

// latestBounds are, per key value, the greatest time of a kept row that
// credits it.
type latestBounds struct {
	bound     map[string]int64
	null      int64 // of the NULL key; math.MinInt64: none yet
	latest    int64 // the greatest bound, NULL's included
	version   int   // changes with every raised bound
	dictMemos map[dictID]*dictMemo
	// spaces are the memos of the series spaces that chunks are checked
	// by (latest_series.go); a space not in it is not used.
	spaces map[*buffer.SeriesSpace]*spaceMemo
	// single, when not nil, is the one space of every chunk: its memo's
	// bounds are the bounds, not made from bound (latest_series.go).
	single *buffer.SeriesSpace
	work   int
	// only: latestPrune.only. Values not in it, and NULL, need no bound.
	only map[string]bool
}

// dictID names a dictionary: the chunks of a partition share its memory
// until it grows.
type dictID struct {
	offsets *int32
	n       int
}

// dictMemo is, at a version of the bounds, the bound of each of a
// dictionary's values (math.MinInt64: none) and the least of them.
type dictMemo struct {
	bounds  []int64
	least   int64
	version int
}

// newLatestBounds makes bounds with room for hint key values.
func newLatestBounds(hint int) *latestBounds {
	return &latestBounds{bound: make(map[string]int64, hint), null: math.MinInt64, latest: math.MinInt64, dictMemos: map[dictID]*dictMemo{}}
}

// covered says whether every key value of a chunk's rows (key k) has a
// bound after maxTime. When every value of its dictionary has one, the
// rows are not read.
func (b *latestBounds) covered(k latestKey, maxTime int64) bool {
	if b.only == nil && k.hasNull() && b.null <= maxTime {
		return false
	}
	if k.dict == nil || k.dict.Len() == 0 {
		return true
	}
	if k.series != nil {
		if sm, ok := b.spaces[k.series.Space]; ok {
			return b.coveredBySeries(k, sm, maxTime)
		}
	}
	m := b.memo(k.dict)
	if m.least > maxTime {
		return true
	}
	// A value of the dictionary has no later bound (a series that
	// stopped, a value of a newer chunk): the chunk is covered if none
	// of its rows holds such a value.
	b.work += len(k.idx)
	if k.arr.NullN() == 0 {
		for _, v := range k.idx {
			if m.bounds[v] <= maxTime {
				return false
			}
		}
		return true
	}
	for r, v := range k.idx {
		if k.arr.IsValid(r) && m.bounds[v] <= maxTime {
			return false
		}
	}
	return true
}

// coveredValues says whether every one of values has a bound after
// maxTime.
func (b *latestBounds) coveredValues(values []string, maxTime int64) bool {
	for _, v := range values {
		if b.only != nil && !b.only[v] {
			continue
		}
		if t, ok := b.bound[v]; !ok || t <= maxTime {
			return false
		}
	}
	return true
}

// memo is dict's memo at the bounds' version, made again when they have
// changed since.
func (b *latestBounds) memo(dict *array.String) *dictMemo {
	id := dictID{offsets: unsafe.SliceData(dict.ValueOffsets()), n: dict.Len()}
	m := b.dictMemos[id]
	if m != nil && m.version == b.version {
		return m
	}
	if m == nil {
		m = &dictMemo{bounds: make([]int64, dict.Len())}
		b.dictMemos[id] = m
	}
	m.version, m.least = b.version, math.MaxInt64
	for i := range m.bounds {
		s := dict.Value(i)
		if b.only != nil && !b.only[s] {
			m.bounds[i] = math.MaxInt64 // needs none
			continue
		}
		v, ok := b.bound[s]
		if !ok {
			v = math.MinInt64
		}
		m.bounds[i] = v
		m.least = min(m.least, v)
	}
	b.work += dict.Len()
	return m
}

// creditColumns are rec's times, and the columns whose NULLs make a row
// credit nothing (those of nonNull with a NULL, and the times if they
// have one); false when no row credits (no time column, or one of
// nonNull missing: NULL in every row).
func creditColumns(rec arrow.RecordBatch, nonNull []string) (times []arrow.Timestamp, need []arrow.Array, ok bool) {
	ts, ok := timeColumn(rec)
	if !ok {
		return nil, nil, false
	}
	for _, name := range nonNull {
		ix := rec.Schema().FieldIndices(name)
		if len(ix) == 0 {
			return nil, nil, false
		}
		if a := rec.Column(ix[0]); a.NullN() > 0 {
			need = append(need, a)
		}
	}
	if ts.NullN() > 0 {
		need = append(need, ts)
	}
	return ts.TimestampValues(), need, true
}

// credit raises the bounds of the key values of rec's rows (key k) to
// their greatest times, counting only rows where no column of nonNull is
// NULL.
func (b *latestBounds) credit(rec arrow.RecordBatch, k latestKey, nonNull []string) {
	n := int(rec.NumRows())
	b.work += n
	times, need, ok := creditColumns(rec, nonNull)
	if !ok {
		return
	}
	counts := func(r int) bool {
		for _, a := range need {
			if a.IsNull(r) {
				return false
			}
		}
		return true
	}
	raised := false
	if k.dict == nil {
		for r := range n {
			if t := int64(times[r]); counts(r) && t > b.null {
				b.null, raised = t, true
				b.latest = max(b.latest, t)
			}
		}
	} else {
		best := make([]int64, k.dict.Len())
		for i := range best {
			best[i] = math.MinInt64
		}
		keyNulls := k.arr.NullN() > 0
		for r := range n {
			if !counts(r) {
				continue
			}
			t := int64(times[r])
			if keyNulls && k.arr.IsNull(r) {
				if t > b.null {
					b.null, raised = t, true
					b.latest = max(b.latest, t)
				}
				continue
			}
			if v := k.idx[r]; t > best[v] {
				best[v] = t
			}
		}
		b.work += len(best)
		if b.creditSingle(k, best) {
			if raised { // the NULL key's
				b.version++
			}
			return
		}
		sm := b.currentSpaceMemo(k)
		for i, t := range best {
			if t == math.MinInt64 {
				continue
			}
			s := k.dict.Value(i)
			if b.only != nil && !b.only[s] {
				// Needs no bound (covered, coveredValues, the memos).
				b.latest = max(b.latest, t)
				continue
			}
			if old, ok := b.bound[s]; !ok || t > old {
				b.bound[s], raised = t, true
				b.latest = max(b.latest, t)
				if sm != nil {
					sm.raise(k.series.IDs[i], t)
				}
			}
		}
		if raised && sm != nil && sm.version == b.version {
			sm.version = b.version + 1 // raised in place: current still
		}
	}
	if raised {
		b.version++
	}
}

// latestColFor is the key column of q's latest row per key when it
// prunes the scans of table k by one column and nothing else prunes
// them: their chunks are then those the buffer says can hold a key's
// latest row (Engine.latestSnapshot).
func (q *queryState) latestColFor(k buffer.TableKey) (string, bool) {
	key := lowerKey(k.Database, k.Table)
	if q == nil || q.latest == nil || q.latest.key != key || len(q.latest.cols) > 0 {
		return "", false
	}
	if q.meta != nil && q.meta.key == key || q.newest != nil && q.newest.key == key {
		return "", false
	}
	return q.latest.col, true
}
