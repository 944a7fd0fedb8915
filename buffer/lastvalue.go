package buffer

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// Last-value caches (the definitions are the catalog's, lastvalue.go
// there): per table with a cache, the latest Count rows of each key (the
// values of the key columns; a null is a value of its own).
//
// Writes: a write's rows are merged into its table's cache once they are
// durable in the WAL and buffered (PendingWrite.wait), just before the
// write is acknowledged: the cache shows a row from the instant reads of
// the table see it, never one the WAL does not hold. A batch is first
// reduced to its latest rows per key (by dictionary index where the key
// columns are dictionaries, as the write path makes them), then merged:
// a key keeps its Count rows of largest time. The merge is commutative,
// so writes racing each other, or a fill, may be applied in any order.
// Rows of a replace in progress are not merged; tables without a cache
// pay one map lookup per write.
//
// Completeness: a cache made at startup or by CREATE, or reset because
// its table was replaced (a DELETE is a replace), is filling: it answers
// nothing until its filler (the query engine, which reads a View of the
// table) has merged the latest rows of the whole table, writes meanwhile
// being merged as usual. Ready means it holds the latest rows of every
// row visible. A row that ties on time with the one kept is not kept:
// which of two rows of one key at the same time is "latest" is as
// arbitrary as it is for arg_max. A row merged twice (a write both in
// the fill's View and merged live) is kept once.
//
// Memory: the bytes of a cache's rows (an estimate: values plus per-row
// and per-key overhead) count in the buffer's memory, against MemLimit.

// LastValueState says whether a cache answers.
type LastValueState string

const (
	LastValueFilling LastValueState = "filling"
	LastValueReady   LastValueState = "ready"
)

// lastValues are the buffer's caches, kept in step with the catalog's
// definitions.
type lastValues struct {
	mu  sync.Mutex
	set atomic.Pointer[lvSet]
	// bytes are the bytes of every cache's rows.
	bytes atomic.Int64
	// fillc is signalled when a cache needs a fill.
	fillc chan struct{}
}

type lvSet struct {
	version uint64 // the catalog version it follows
	byKey   map[TableKey]*LastValueCache
}

func newLastValues() *lastValues {
	return &lastValues{fillc: make(chan struct{}, 1)}
}

// current is the set for snap, rebuilt when the catalog changed.
func (l *lastValues) current(snap *catalog.Snapshot) *lvSet {
	s := l.set.Load()
	if s != nil && s.version >= snap.Version() {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s = l.set.Load()
	if s != nil && s.version >= snap.Version() {
		return s
	}
	if s == nil {
		s = &lvSet{}
	}
	next := &lvSet{version: snap.Version(), byKey: map[TableKey]*LastValueCache{}}
	fill := false
	for _, def := range snap.LastValueCaches() {
		t, ok := snap.Table(def.Database, def.Table)
		if !ok {
			continue
		}
		k := TableKey{def.Database, def.Table}
		if old := s.byKey[k]; old != nil && old.tableID == t.ID && old.def.Name == def.Name && old.def.Count == def.Count && slices.Equal(old.def.Keys, def.Keys) {
			next.byKey[k] = old
			continue
		}
		next.byKey[k] = newLastValueCache(l, *def, t.ID)
		fill = true
	}
	for k, old := range s.byKey {
		if next.byKey[k] != old {
			old.drop()
		}
	}
	l.set.Store(next)
	if fill {
		select {
		case l.fillc <- struct{}{}:
		default:
		}
	}
	return next
}

// close frees every cache's rows (WriteBuffer.Close, once no write is in
// flight).
func (l *lastValues) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.set.Load(); s != nil {
		for _, c := range s.byKey {
			c.drop()
		}
	}
	l.set.Store(&lvSet{version: ^uint64(0)})
}

// LastValueCache is the rows of one table's cache.
type LastValueCache struct {
	l       *lastValues
	def     catalog.LastValueCache
	tableID uint64
	uses    atomic.Int64

	mu struct {
		sync.Mutex
		state   LastValueState
		dropped bool
		cols    map[string]int // column name → index into a row's vals
		series  map[string]*lvSeries
		rows    int
		bytes   int64
		version uint64 // grows with every change of the rows
		// memo are the chunks of every row built last, for version
		// memoVersion and the fields memoFields; memoMin their least
		// time.
		memo        []Chunk
		memoVersion uint64
		memoFields  []arrow.Field
		memoMin     int64
		memoBytes   int64 // of memo, in bytes too
	}
}

type lvSeries struct {
	rows []lvRow // by time, latest first; at most Count
}

type lvRow struct {
	t    int64
	vals []any // by cache column index; nil: null (or a column the row lacks)
}

func newLastValueCache(l *lastValues, def catalog.LastValueCache, tableID uint64) *LastValueCache {
	c := &LastValueCache{l: l, def: def, tableID: tableID}
	c.mu.state = LastValueFilling
	c.mu.cols = map[string]int{}
	c.mu.series = map[string]*lvSeries{}
	return c
}

// Definition is the cache's definition.
func (c *LastValueCache) Definition() catalog.LastValueCache { return c.def }

// TableID is the id of the table whose rows the cache holds.
func (c *LastValueCache) TableID() uint64 { return c.tableID }

// Uses counts the queries the cache answered; NoteUse adds one.
func (c *LastValueCache) Uses() int64 { return c.uses.Load() }
func (c *LastValueCache) NoteUse()    { c.uses.Add(1) }

// Info is what system.last_value_caches shows.
func (c *LastValueCache) Info() (state LastValueState, rows int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.state, c.mu.rows, c.mu.bytes
}

// drop frees the rows of a cache no longer defined (or replaced).
func (c *LastValueCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.dropped = true
	c.releaseMemoLocked()
	c.l.bytes.Add(-c.mu.bytes)
	c.mu.bytes, c.mu.rows = 0, 0
	c.mu.series = map[string]*lvSeries{}
}

// Ready says whether the cache holds the latest rows of all of its
// table's rows.
func (c *LastValueCache) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.state == LastValueReady && !c.mu.dropped
}

// FillDone marks the cache ready: the caller merged (MergeRecord) the
// latest Count rows per key of a View of the table taken after the cache
// was made, the table being c's (TableID) in that View.
func (c *LastValueCache) FillDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.dropped {
		c.mu.state = LastValueReady
	}
}

// MergeRecord merges rec's rows (columns of the table by name, time
// among them; strings in any Arrow encoding) into the cache.
func (c *LastValueCache) MergeRecord(rec arrow.RecordBatch) error {
	ti := rec.Schema().FieldIndices(TimeColumn)
	if len(ti) != 1 {
		return fmt.Errorf("buffer: last-value cache of %s.%s: a batch without one %q column", c.def.Database, c.def.Table, TimeColumn)
	}
	ta, ok := rec.Column(ti[0]).(*array.Timestamp)
	if !ok {
		return fmt.Errorf("buffer: last-value cache of %s.%s: column %q is %s, want a timestamp", c.def.Database, c.def.Table, TimeColumn, rec.Column(ti[0]).DataType())
	}
	times := make([]int64, ta.Len())
	for i := range times {
		times[i] = int64(ta.Value(i))
	}
	if u := ta.DataType().(*arrow.TimestampType).Unit; u != arrow.Nanosecond {
		mul := int64(u.Multiplier())
		for i := range times {
			times[i] *= mul
		}
	}
	c.merge(rec, times)
	return nil
}

// merge merges rec's rows, times being its time column in ns.
func (c *LastValueCache) merge(rec arrow.RecordBatch, times []int64) {
	n := int(rec.NumRows())
	if n == 0 {
		return
	}
	keys := make([]arrow.Array, len(c.def.Keys))
	for i, k := range c.def.Keys {
		if idx := rec.Schema().FieldIndices(k); len(idx) > 0 {
			keys[i] = rec.Column(idx[0])
		}
	}
	cands := latestPerKey(keys, times, c.def.Count)
	// Values of the candidates, outside the lock.
	fields := rec.Schema().Fields()
	type cand struct {
		key  string
		t    int64
		vals []any
	}
	out := make([]cand, 0, len(cands))
	var kb []byte
	for _, r := range cands {
		kb = appendKey(kb[:0], keys, r)
		vals := make([]any, len(fields))
		for j := range fields {
			vals[j] = valueAt(rec.Column(j), r)
		}
		out = append(out, cand{key: string(kb), t: times[r], vals: vals})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.dropped {
		return
	}
	// The batch's columns in the cache's numbering.
	colOf := make([]int, len(fields))
	identity := true // the batch's values are in the cache's numbering already
	for j, f := range fields {
		i, ok := c.mu.cols[f.Name]
		if !ok {
			i = len(c.mu.cols)
			c.mu.cols[f.Name] = i
		}
		colOf[j] = i
		identity = identity && i == j
	}
	width := len(c.mu.cols)
	identity = identity && width == len(fields)
	var delta int64
	changed := false
	for _, cd := range out {
		s := c.mu.series[cd.key]
		if s == nil {
			s = &lvSeries{}
			c.mu.series[cd.key] = s
			delta += int64(lvSeriesOverhead + len(cd.key))
		}
		if len(s.rows) == c.def.Count && cd.t <= s.rows[len(s.rows)-1].t {
			continue
		}
		vals := cd.vals
		if !identity {
			vals = make([]any, width)
			for j, v := range cd.vals {
				vals[colOf[j]] = v
			}
		}
		// Latest first; after the rows of equal time (they stay).
		at := len(s.rows)
		for i, r := range s.rows {
			if r.t == cd.t && sameValues(r.vals, vals) {
				at = -1 // merged already (a fill and a live write both had it)
				break
			}
			if r.t < cd.t && at == len(s.rows) {
				at = i
			}
		}
		if at < 0 {
			continue
		}
		if len(s.rows) == c.def.Count {
			delta -= rowBytes(s.rows[len(s.rows)-1])
			s.rows = s.rows[:len(s.rows)-1]
			c.mu.rows--
			at = min(at, len(s.rows))
		}
		row := lvRow{t: cd.t, vals: vals}
		s.rows = slices.Insert(s.rows, at, row)
		c.mu.rows++
		delta += rowBytes(row)
		changed = true
	}
	if changed {
		c.mu.version++
	}
	c.mu.bytes += delta
	c.l.bytes.Add(delta)
}

const (
	lvSeriesOverhead = 96 // map entry, series, slice header
	lvRowOverhead    = 48
)

func rowBytes(r lvRow) int64 {
	n := int64(lvRowOverhead + 16*len(r.vals))
	for _, v := range r.vals {
		switch v := v.(type) {
		case string:
			n += int64(len(v))
		case []byte:
			n += int64(len(v))
		}
	}
	return n
}

func sameValues(a, b []any) bool {
	for i := range max(len(a), len(b)) {
		var x, y any
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if xb, ok := x.([]byte); ok {
			yb, ok := y.([]byte)
			if !ok || string(xb) != string(yb) {
				return false
			}
			continue
		}
		if x != y {
			return false
		}
	}
	return true
}

// latestPerKey returns the rows of the batch that are among the latest
// count of their key (ties broken by row order), by key. keys[i] nil: a
// column the batch lacks (null).
func latestPerKey(keys []arrow.Array, times []int64, count int) []int {
	n := len(times)
	// Dictionary keys: the key is the tuple of indices (0: null), packed
	// into a uint64 when the dictionaries are small enough.
	dicts := make([]*array.Dictionary, len(keys))
	radix := uint64(1)
	packed := true
	for i, k := range keys {
		if k == nil {
			continue
		}
		d, ok := k.(*array.Dictionary)
		if !ok {
			packed = false
			break
		}
		dicts[i] = d
		r := uint64(d.Dictionary().Len()) + 1
		if radix > (1<<62)/r {
			packed = false
			break
		}
		radix *= r
	}
	if packed && count == 1 && radix <= uint64(4*n+1024) {
		return latestDense(dicts, times, int(radix))
	}
	best := map[uint64][]int{}
	var strBest map[string][]int
	var kb []byte
	// keep inserts r among rows (latest first, at most count; a row that
	// ties with the last kept when full is not kept).
	keep := func(rows []int, r int) []int {
		if len(rows) == count {
			if times[r] <= times[rows[len(rows)-1]] {
				return rows
			}
			rows = rows[:len(rows)-1]
		}
		at := len(rows)
		for i, o := range rows {
			if times[o] < times[r] {
				at = i
				break
			}
		}
		return slices.Insert(rows, at, r)
	}
	if !packed {
		strBest = map[string][]int{}
	}
	for r := range n {
		if packed {
			var k uint64
			for _, d := range dicts {
				var v uint64
				if d != nil && d.IsValid(r) {
					v = uint64(d.GetValueIndex(r)) + 1
				}
				if d != nil {
					k = k*(uint64(d.Dictionary().Len())+1) + v
				}
			}
			best[k] = keep(best[k], r)
			continue
		}
		kb = appendKey(kb[:0], keys, r)
		strBest[string(kb)] = keep(strBest[string(kb)], r)
	}
	var out []int
	for _, rows := range best {
		out = append(out, rows...)
	}
	for _, rows := range strBest {
		out = append(out, rows...)
	}
	return out
}

// latestDense is latestPerKey for count 1 over dictionary keys whose
// index tuples number at most radix: one slot per tuple, no map.
func latestDense(dicts []*array.Dictionary, times []int64, radix int) []int {
	best := make([]int32, radix)
	for i := range best {
		best[i] = -1
	}
	keys := make([]uint32, len(times))
	for _, d := range dicts {
		if d == nil {
			continue
		}
		width := uint32(d.Dictionary().Len()) + 1
		idx, plain := d.Indices().(*array.Int32)
		for r := range keys {
			var v uint32
			if d.IsValid(r) {
				if plain {
					v = uint32(idx.Value(r)) + 1
				} else {
					v = uint32(d.GetValueIndex(r)) + 1
				}
			}
			keys[r] = keys[r]*width + v
		}
	}
	for r, k := range keys {
		if b := best[k]; b < 0 || times[r] > times[b] {
			best[k] = int32(r)
		}
	}
	var out []int
	for _, r := range best {
		if r >= 0 {
			out = append(out, int(r))
		}
	}
	return out
}

// appendKey appends row r's key: per key column 0 for null, else the
// value's length plus one, then the value.
func appendKey(b []byte, keys []arrow.Array, r int) []byte {
	for _, k := range keys {
		v, ok := stringAt(k, r)
		if !ok {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(v))+1)
		b = append(b, v...)
	}
	return b
}

// stringAt is row r of a string column, false for null.
func stringAt(a arrow.Array, r int) (string, bool) {
	if a == nil || a.IsNull(r) {
		return "", false
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return stringAt(a.Dictionary(), a.GetValueIndex(r))
	case *array.String:
		return a.Value(r), true
	case *array.LargeString:
		return a.Value(r), true
	case *array.StringView:
		return a.Value(r), true
	}
	return a.ValueStr(r), true
}

// valueAt is row r of a as a Go value; nil for null.
func valueAt(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return valueAt(a.Dictionary(), a.GetValueIndex(r))
	case *array.String:
		return strings.Clone(a.Value(r))
	case *array.LargeString:
		return strings.Clone(a.Value(r))
	case *array.StringView:
		return strings.Clone(a.Value(r))
	case *array.Binary:
		return slices.Clone(a.Value(r))
	case *array.LargeBinary:
		return slices.Clone(a.Value(r))
	case *array.BinaryView:
		return slices.Clone(a.Value(r))
	case *array.Boolean:
		return a.Value(r)
	case *array.Int8:
		return a.Value(r)
	case *array.Int16:
		return a.Value(r)
	case *array.Int32:
		return a.Value(r)
	case *array.Int64:
		return a.Value(r)
	case *array.Uint8:
		return a.Value(r)
	case *array.Uint16:
		return a.Value(r)
	case *array.Uint32:
		return a.Value(r)
	case *array.Uint64:
		return a.Value(r)
	case *array.Float32:
		return a.Value(r)
	case *array.Float64:
		return a.Value(r)
	case *array.Date32:
		return a.Value(r)
	case *array.Date64:
		return a.Value(r)
	case *array.Timestamp:
		return a.Value(r)
	}
	return nil
}

// lvChunkRows is the most rows of a chunk of a cache's rows: each has a
// dictionary of its own strings, which a scan converts once (a dictionary
// over vectorSize values would be converted for every vector).
const lvChunkRows = 2048

// Chunks returns the cache's rows of time at least minTime as chunks of
// fields (the table's columns as a scan binds them: strings as
// dictionary<int32, utf8>), retained; the caller releases them. The
// chunks of every row are kept until the rows change, and served again;
// their memory counts in the cache's.
//
// The rows are copied under the cache's mutex and the chunks built
// outside it: every write of the table merges into the cache before its
// acknowledgement, under that mutex, and must not wait for a build of
// 100,000 series.
func (c *LastValueCache) Chunks(fields []arrow.Field, minTime int64, mem memory.Allocator) ([]Chunk, error) {
	c.mu.Lock()
	same := c.mu.memo != nil && c.mu.memoVersion == c.mu.version && slices.EqualFunc(fields, c.mu.memoFields, func(a, b arrow.Field) bool {
		return a.Name == b.Name && arrow.TypeEqual(a.Type, b.Type)
	})
	if same && minTime <= c.mu.memoMin {
		out := retainChunks(c.mu.memo)
		c.mu.Unlock()
		return out, nil
	}
	// Every row for a new memo; only those asked for when the memo is
	// current but holds older rows than wanted.
	from := int64(MinTime)
	if same {
		from = minTime
	}
	rows, version := c.rowsLocked(fields, from), c.mu.version
	c.mu.Unlock()

	chunks, err := buildLastValueChunks(rows, fields, mem, c.def)
	if err != nil || same {
		return chunks, err
	}
	lo := int64(MaxTime)
	for _, ch := range chunks {
		lo = min(lo, ch.MinTime)
	}
	var out []Chunk
	if minTime <= lo {
		out = retainChunks(chunks)
	} else if out, err = buildLastValueChunks(rows.from(minTime), fields, mem, c.def); err != nil {
		releaseChunks(chunks)
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.dropped || c.mu.version != version {
		// Changed while it was built: the next call builds again.
		releaseChunks(chunks)
		return out, nil
	}
	c.releaseMemoLocked()
	c.mu.memo, c.mu.memoVersion, c.mu.memoFields, c.mu.memoMin = chunks, version, slices.Clone(fields), lo
	for _, ch := range chunks {
		c.mu.memoBytes += persist.RecordBytes(ch.Rec)
	}
	c.mu.bytes += c.mu.memoBytes
	c.l.bytes.Add(c.mu.memoBytes)
	return out, nil
}

func (c *LastValueCache) releaseMemoLocked() {
	releaseChunks(c.mu.memo)
	c.mu.memo = nil
	c.mu.bytes -= c.mu.memoBytes
	c.l.bytes.Add(-c.mu.memoBytes)
	c.mu.memoBytes = 0
}

func retainChunks(chunks []Chunk) []Chunk {
	out := slices.Clone(chunks)
	for _, ch := range out {
		ch.Rec.Retain()
	}
	return out
}

func releaseChunks(chunks []Chunk) {
	for _, ch := range chunks {
		ch.Rec.Release()
	}
}

// lvRows is a copy of a cache's rows: by key, then latest first, with
// src mapping the fields asked for to the rows' values (-1: none). A
// row's vals are never changed once merged (merge makes new ones), so the
// copy shares them.
type lvRows struct {
	src  []int
	keys []string
	rows [][]lvRow // per key
}

// rowsLocked copies the rows of time at least from.
func (c *LastValueCache) rowsLocked(fields []arrow.Field, from int64) lvRows {
	out := lvRows{src: make([]int, len(fields)), keys: make([]string, 0, len(c.mu.series))}
	for i, f := range fields {
		if j, ok := c.mu.cols[f.Name]; ok {
			out.src[i] = j
		} else {
			out.src[i] = -1
		}
	}
	for k := range c.mu.series {
		out.keys = append(out.keys, k)
	}
	slices.Sort(out.keys)
	out.rows = make([][]lvRow, 0, len(out.keys))
	keys := out.keys[:0]
	for _, k := range out.keys {
		var rs []lvRow
		for _, r := range c.mu.series[k].rows {
			if r.t >= from {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			keys = append(keys, k)
			out.rows = append(out.rows, rs)
		}
	}
	out.keys = keys
	return out
}

// from is the rows of time at least t.
func (r lvRows) from(t int64) lvRows {
	out := lvRows{src: r.src}
	for i, rs := range r.rows {
		var kept []lvRow
		for _, x := range rs {
			if x.t >= t {
				kept = append(kept, x)
			}
		}
		if len(kept) > 0 {
			out.keys = append(out.keys, r.keys[i])
			out.rows = append(out.rows, kept)
		}
	}
	return out
}

// buildLastValueChunks builds chunks of fields of rows, lvChunkRows rows
// at most each.
func buildLastValueChunks(rows lvRows, fields []arrow.Field, mem memory.Allocator, def catalog.LastValueCache) (out []Chunk, err error) {
	defer func() {
		if err != nil {
			releaseChunks(out)
			out = nil
		}
	}()
	var bs []array.Builder
	n := 0
	lo, hi := int64(MaxTime), int64(MinTime)
	flush := func() {
		if bs == nil {
			return
		}
		cols := make([]arrow.Array, len(bs))
		for i, b := range bs {
			cols[i] = b.NewArray()
			b.Release()
		}
		rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
		for _, a := range cols {
			a.Release()
		}
		out = append(out, Chunk{Rec: rec, MinTime: lo, MaxTime: hi})
		bs, n, lo, hi = nil, 0, int64(MaxTime), int64(MinTime)
	}
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	for _, rs := range rows.rows {
		for _, r := range rs {
			if bs == nil {
				bs = make([]array.Builder, len(fields))
				for i, f := range fields {
					bs[i] = array.NewBuilder(mem, f.Type)
				}
			}
			lo, hi = min(lo, r.t), max(hi, r.t)
			for i, b := range bs {
				var v any
				if j := rows.src[i]; j >= 0 && j < len(r.vals) {
					v = r.vals[j]
				}
				if err := appendValue(b, v); err != nil {
					return out, fmt.Errorf("buffer: last-value cache of %s.%s column %q: %w", def.Database, def.Table, fields[i].Name, err)
				}
			}
			if n++; n == lvChunkRows {
				flush()
			}
		}
	}
	flush()
	return out, nil
}

// appendValue appends v (nil: null) to b, converting what the column's
// type was evolved from where Apron allows none: a value of another type
// is an error.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	ok := true
	switch b := b.(type) {
	case *array.BinaryDictionaryBuilder:
		s, is := v.(string)
		if ok = is; ok {
			return b.AppendString(s)
		}
	case *array.StringBuilder:
		s, is := v.(string)
		if ok = is; ok {
			b.Append(s)
		}
	case *array.BinaryBuilder:
		s, is := v.([]byte)
		if ok = is; ok {
			b.Append(s)
		}
	case *array.BooleanBuilder:
		x, is := v.(bool)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Int8Builder:
		x, is := v.(int8)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Int16Builder:
		x, is := v.(int16)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Int32Builder:
		x, is := v.(int32)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Int64Builder:
		x, is := v.(int64)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Uint8Builder:
		x, is := v.(uint8)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Uint16Builder:
		x, is := v.(uint16)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Uint32Builder:
		x, is := v.(uint32)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Uint64Builder:
		x, is := v.(uint64)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Float32Builder:
		x, is := v.(float32)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Float64Builder:
		x, is := v.(float64)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Date32Builder:
		x, is := v.(arrow.Date32)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.Date64Builder:
		x, is := v.(arrow.Date64)
		if ok = is; ok {
			b.Append(x)
		}
	case *array.TimestampBuilder:
		x, is := v.(arrow.Timestamp)
		if ok = is; ok {
			b.Append(x)
		}
	default:
		return fmt.Errorf("type %s is not kept by the cache", b.Type())
	}
	if !ok {
		return fmt.Errorf("a value of Go type %T for a column of type %s", v, b.Type())
	}
	return nil
}

// LastValueCache returns db.table's cache, if it has one.
func (b *WriteBuffer) LastValueCache(db, table string) (*LastValueCache, bool) {
	c, ok := b.lvc.current(b.cat.Snapshot()).byKey[TableKey{db, table}]
	return c, ok
}

// LastValueCaches returns every cache, sorted by database and table.
func (b *WriteBuffer) LastValueCaches() []*LastValueCache {
	s := b.lvc.current(b.cat.Snapshot())
	out := make([]*LastValueCache, 0, len(s.byKey))
	for _, c := range s.byKey {
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y *LastValueCache) int {
		if d := strings.Compare(x.def.Database, y.def.Database); d != 0 {
			return d
		}
		return strings.Compare(x.def.Table, y.def.Table)
	})
	return out
}

// LastValueFills is signalled when a cache starts filling: its filler
// then fills the caches that are not Ready (LastValueCaches).
func (b *WriteBuffer) LastValueFills() <-chan struct{} { return b.lvc.fillc }

// CreateLastValueCache defines a cache (catalog.CreateLastValueCache),
// durable before it returns; it answers once filled.
func (b *WriteBuffer) CreateLastValueCache(def catalog.LastValueCache, ifNotExists bool) (catalog.LastValueCache, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return catalog.LastValueCache{}, false, err
	}
	out, created, err := b.cat.CreateLastValueCache(b.catPath, def, ifNotExists)
	if created {
		b.lvc.current(b.cat.Snapshot())
		b.kickPersister()
	}
	return out, created, err
}

// DropLastValueCache drops db.table's cache.
func (b *WriteBuffer) DropLastValueCache(db, table string, ifExists bool) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	dropped, err := b.cat.DropLastValueCache(b.catPath, db, table, ifExists)
	if dropped {
		b.lvc.current(b.cat.Snapshot())
		b.kickPersister()
	}
	return dropped, err
}

// mergeLastValue merges a buffered write of table id into its table's
// cache, if it has one of that table.
func (b *WriteBuffer) mergeLastValue(k TableKey, tableID uint64, nb *batch) {
	c := b.lvc.current(b.cat.Snapshot()).byKey[k]
	if c == nil || c.tableID != tableID {
		return
	}
	c.merge(nb.rec, nb.times)
}

// retire drops the cache of k that is current, if any, and returns it: it
// answers no query from then on (queries read the table), and refill
// replaces it. Called under WriteBuffer.mu with the change that makes its
// rows wrong (rewrite.go: rows deleted), so that no View sees the change
// while the cache still answers.
func (l *lastValues) retire(k TableKey) *LastValueCache {
	s := l.set.Load()
	if s == nil {
		return nil
	}
	c := s.byKey[k]
	if c != nil {
		c.drop()
	}
	return c
}

// refill replaces old, the cache retire dropped, by an empty one that
// its filler fills, unless a newer set replaced old already. Called once
// the change is published: the fill's View is taken after it.
func (l *lastValues) refill(k TableKey, old *LastValueCache) {
	if old == nil {
		return
	}
	l.mu.Lock()
	s := l.set.Load()
	if s == nil || s.byKey[k] != old {
		l.mu.Unlock()
		return
	}
	next := &lvSet{version: s.version, byKey: maps.Clone(s.byKey)}
	next.byKey[k] = newLastValueCache(l, old.def, old.tableID)
	l.set.Store(next)
	l.mu.Unlock()
	select {
	case l.fillc <- struct{}{}:
	default:
	}
}
