package buffer

import (
	"slices"

	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const nsPerDay = int64(24 * 60 * 60 * 1e9)

// dayOf is the UTC day of a time, the partition key.
func dayOf(ns int64) int64 {
	d := ns / nsPerDay
	if ns%nsPerDay < 0 {
		d--
	}
	return d
}

// partition holds one UTC day of one table in one segment.
type partition struct {
	day    int64
	sealed []Chunk
	open   *openChunk
	// dicts intern the partition's string columns, shared by its chunks.
	dicts map[string]*stringDict
	// series number each string column's values across its dictionaries
	// (series.go).
	series map[string]*SeriesSpace
	// retired counts the bytes of dictionaries no longer taking values but
	// still referenced by sealed chunks.
	retired int64
	// latest are the sealed chunks' latest times of each series of each
	// string column with series ids (series_latest.go).
	latest map[string]*seriesLatest
	// sealedStat sums the sealed chunks' stats (summaries).
	sealedStat ChunkStat
}

// size is the memory held besides sealed chunks: the open chunk and the
// dictionaries.
func (p *partition) size() int64 {
	s := p.retired
	if p.open != nil {
		s += p.open.size()
	}
	for _, d := range p.dicts {
		s += d.size()
	}
	for _, sp := range p.series {
		s += sp.size()
	}
	for _, sl := range p.latest {
		s += sl.size()
	}
	return s
}

// maxSharedDict is how many chunks' worth of rows a partition's
// dictionary may grow to before the next chunk starts a new one, so that a
// chunk's dictionary stays within a few times its own size.
const maxSharedDict = 4

// dictsToRetire names the dictionaries that the next chunk should not
// share: those of nearly unique strings (more distinct values than a
// quarter of the rows that used them), which gain nothing from sharing,
// and those grown past maxSharedDict chunks' worth. all retires every one.
func (p *partition) dictsToRetire(chunkRows int, all bool) []string {
	var names []string
	for name, d := range p.dicts {
		if all || d.len() > (d.chunks+1)*chunkRows/4 || d.len() > maxSharedDict*chunkRows {
			names = append(names, name)
		}
	}
	return names
}

// retireDicts drops dictionaries from the partition: the map goes, the
// values stay with the chunks that use them.
func (p *partition) retireDicts(names []string) {
	for _, name := range names {
		d := p.dicts[name]
		p.retired += int64(cap(d.offsets))*4 + int64(cap(d.data)) + int64(cap(d.ids))*4
		delete(p.dicts, name)
	}
}

// tableBuffer is one table's rows in one segment, split by day.
type tableBuffer struct {
	database, table string
	chunkRows       int
	sealMem         memory.Allocator // of sealed chunks (sealed.go); nil: the Go heap

	mu struct {
		sync.Mutex
		parts map[int64]*partition
		rows  int64
		size  int64 // bytes held, sealed and open
	}
}

func newTableBuffer(db, table string, chunkRows int, sealMem memory.Allocator) *tableBuffer {
	t := &tableBuffer{database: db, table: table, chunkRows: chunkRows, sealMem: sealMem}
	t.mu.parts = make(map[int64]*partition)
	return t
}

// append adds every row of b, split into runs of rows of the same day.
// It returns how many bytes the table's buffer grew by.
func (t *tableBuffer) append(b *batch) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.mu.size
	times := b.times
	for start := 0; start < len(times); {
		day := dayOf(times[start])
		end := start + 1
		for end < len(times) && dayOf(times[end]) == day {
			end++
		}
		if err := t.appendRunLocked(b, day, start, end-start); err != nil {
			return t.mu.size - before, err
		}
		start = end
	}
	if len(times) == 0 {
		// A batch with no rows still defines columns; nothing to buffer.
		return 0, nil
	}
	t.mu.rows += int64(len(times))
	return t.mu.size - before, nil
}

func (t *tableBuffer) appendRunLocked(b *batch, day int64, off, n int) error {
	p := t.mu.parts[day]
	if p == nil {
		p = &partition{day: day}
		t.mu.parts[day] = p
	}
	for n > 0 {
		if p.open == nil {
			if p.dicts == nil {
				p.dicts = make(map[string]*stringDict)
				p.series = make(map[string]*SeriesSpace)
			}
			// A partition that filled a chunk fills the next: reserve it
			// whole, rather than let small batches grow it by copies.
			rows := min(n, t.chunkRows)
			if len(p.sealed) > 0 {
				rows = t.chunkRows
			}
			p.open = newOpenChunk(p.dicts, p.series, rows)
		}
		k := min(n, t.chunkRows-p.open.n)
		before := p.size()
		err := p.open.append(b, off, k)
		t.mu.size += p.size() - before
		if err != nil {
			return err
		}
		if p.open.n == t.chunkRows {
			t.sealLocked(p)
		}
		off += k
		n -= k
	}
	return nil
}

// sealLocked turns the partition's open chunk into an immutable Chunk.
func (t *tableBuffer) sealLocked(p *partition) {
	if p.open == nil || p.open.n == 0 {
		return
	}
	before := p.size()
	retire := p.dictsToRetire(t.chunkRows, false)
	for _, name := range retire {
		if d := p.dicts[name]; d.chunks == 0 {
			// No other chunk shares it: give back append's slack.
			d.shrink()
		}
	}
	c := p.open.seal(t.sealMem)
	p.foldLatest(c)
	p.sealedStat = addStat(p.sealedStat, ChunkStat{Rows: c.Rec.NumRows(), MinTime: c.MinTime, MaxTime: c.MaxTime})
	p.sealed = append(p.sealed, c)
	p.open = nil
	for _, d := range p.dicts {
		d.chunks++
	}
	p.retireDicts(retire)
	t.mu.size += recordSize(c) + p.size() - before
}

// sealAll seals every open chunk; used when a segment closes.
func (t *tableBuffer) sealAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.mu.parts {
		t.sealLocked(p)
		before := p.size()
		p.retireDicts(p.dictsToRetire(t.chunkRows, true))
		t.mu.size += p.size() - before
	}
}

// snapshot returns the table's chunks, partitions in day order, each
// retained: the caller releases them. The open chunk of a partition is
// included as it is at this moment, sharing its value memory.
func (t *tableBuffer) snapshot() []Chunk {
	return t.snapshotWhere(nil)
}

// snapshotWhere is snapshot of the chunks keep admits (nil: all), told
// each one's stats under t's lock, before it is retained (or, for the
// open chunk, made): a query of the last minutes of 5M rows kept 2 of
// ~600 chunks, and retained, released and listed all of them.
func (t *tableBuffer) snapshotWhere(keep func(ChunkStat) bool) []Chunk {
	out, _ := t.snapshotSkipping(keep, nil)
	return out
}

// snapshotLatest is snapshotWhere for the latest row per value of string
// column col within times at most upper: of a partition's sealed chunks,
// it leaves out those whose rows all precede L (series_latest.go) when
// upper is past the partition's sealed rows. skipped counts the chunks
// left out so.
func (t *tableBuffer) snapshotLatest(col string, upper int64, keep func(ChunkStat) bool) (out []Chunk, skipped int) {
	return t.snapshotSkipping(keep, func(p *partition) (int64, bool) { return p.latestLeast(col, upper) })
}

// snapshotSkipping is snapshotWhere, but for the sealed chunks of a
// partition p whose rows all precede the time before(p) gives when it
// gives one (nil: none), left out and counted in skipped.
func (t *tableBuffer) snapshotSkipping(keep func(ChunkStat) bool, before func(*partition) (int64, bool)) (out []Chunk, skipped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	days := make([]int64, 0, len(t.mu.parts))
	n := 0
	for d, p := range t.mu.parts {
		days = append(days, d)
		n += len(p.sealed) + 1
	}
	slices.Sort(days)
	if keep == nil && before == nil {
		out = make([]Chunk, 0, n)
	}
	for _, d := range days {
		p := t.mu.parts[d]
		var least int64
		skip := false
		if before != nil {
			least, skip = before(p)
		}
		for _, c := range p.sealed {
			if skip && c.MaxTime < least {
				skipped++
				continue
			}
			if keep != nil && !keep(ChunkStat{Rows: c.Rec.NumRows(), MinTime: c.MinTime, MaxTime: c.MaxTime}) {
				continue
			}
			c.Rec.Retain()
			out = append(out, c)
		}
		if p.open != nil && p.open.n > 0 {
			if keep != nil && !keep(ChunkStat{Rows: int64(p.open.n), MinTime: p.open.minT, MaxTime: p.open.maxT}) {
				continue
			}
			out = append(out, p.open.chunk(false))
		}
	}
	return out, skipped
}

// stats appends to dst the rows and time range of each chunk snapshot
// would return, retaining none.
func (t *tableBuffer) stats(dst []ChunkStat) []ChunkStat {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.mu.parts {
		for _, c := range p.sealed {
			dst = append(dst, ChunkStat{Rows: c.Rec.NumRows(), MinTime: c.MinTime, MaxTime: c.MaxTime})
		}
		if p.open != nil && p.open.n > 0 {
			dst = append(dst, ChunkStat{Rows: int64(p.open.n), MinTime: p.open.minT, MaxTime: p.open.maxT})
		}
	}
	return dst
}

// summaries appends to dst the stats of each partition's sealed chunks,
// summed, and of its open chunk: stats summed by partition (a count of
// 5M rows read ~600 chunks' stats, 24 µs of a 0.3 ms query). n is how
// many chunks they sum.
func (t *tableBuffer) summaries(dst []ChunkStat) (_ []ChunkStat, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.mu.parts {
		if len(p.sealed) > 0 {
			dst = append(dst, p.sealedStat)
			n += len(p.sealed)
		}
		if p.open != nil && p.open.n > 0 {
			dst = append(dst, ChunkStat{Rows: int64(p.open.n), MinTime: p.open.minT, MaxTime: p.open.maxT})
			n++
		}
	}
	return dst, n
}

func (t *tableBuffer) sizeNow() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.size
}

func (t *tableBuffer) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.mu.parts {
		for _, c := range p.sealed {
			c.Rec.Release()
		}
		p.sealed = nil
		p.open = nil
		p.latest = nil
		p.sealedStat = ChunkStat{}
	}
}

// recordSize is the memory of a sealed record's buffers, but for string
// dictionaries, which the partition counts.
func recordSize(c Chunk) int64 {
	var s int64
	for _, col := range c.Rec.Columns() {
		if col.DataType().ID() == arrow.DICTIONARY {
			s += dataSize(col.(*array.Dictionary).Indices().Data())
			continue
		}
		s += dataSize(col.Data())
	}
	return s
}

func dataSize(d arrow.ArrayData) int64 {
	var s int64
	for _, b := range d.Buffers() {
		if b != nil {
			s += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		s += dataSize(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		// Dictionary() is a typed nil for other types.
		s += dataSize(d.Dictionary())
	}
	return s
}
