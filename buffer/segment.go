package buffer

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// SegmentState says whether a segment still takes writes.
type SegmentState string

const (
	SegmentOpen   SegmentState = "open"
	SegmentClosed SegmentState = "closed"
)

// TableKey names a table.
type TableKey struct{ Database, Table string }

// Segment is the data written during one span of time, the unit of WAL files
// and (later) of persistence. The open segment takes writes; closed segments
// stay readable until persisted.
type Segment struct {
	id        uint64
	start     time.Time
	walFile   string
	chunkRows int
	sealMem   memory.Allocator // of sealed chunks; nil: the Go heap

	// inflight counts writes whose WAL record is in this segment's file but
	// whose rows are not yet in the buffer; a closed segment is complete
	// once it drops to zero.
	inflight sync.WaitGroup
	rows     atomic.Int64
	size     atomic.Int64
	sealOnce sync.Once

	// refs: one of the buffer while it buffers the segment, one of each
	// View state listing it (viewstate.go); its memory is freed when the
	// last goes.
	refs atomic.Int64

	// Guarded by WriteBuffer.mu (persist.go).
	firstSeq, lastSeq uint64 // WAL sequence range of its records
	persisted         bool   // its segment file is durable

	mu struct {
		sync.RWMutex
		tables map[TableKey]*tableBuffer
		state  SegmentState
		closed time.Time
	}
}

func newSegment(id uint64, start time.Time, walFile string, chunkRows int, sealMem memory.Allocator) *Segment {
	s := &Segment{id: id, start: start, walFile: walFile, chunkRows: chunkRows, sealMem: sealMem}
	s.mu.tables = make(map[TableKey]*tableBuffer)
	s.mu.state = SegmentOpen
	s.refs.Store(1)
	return s
}

// ID is the segment's id, also its WAL file's number.
func (s *Segment) ID() uint64 { return s.id }

func (s *Segment) tableBuffer(k TableKey, create bool) *tableBuffer {
	s.mu.RLock()
	t := s.mu.tables[k]
	s.mu.RUnlock()
	if t != nil || !create {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t = s.mu.tables[k]; t == nil {
		t = newTableBuffer(k.Database, k.Table, s.chunkRows, s.sealMem)
		s.mu.tables[k] = t
	}
	return t
}

// append buffers b's rows; it returns the growth in bytes.
func (s *Segment) append(k TableKey, b *batch) (int64, error) {
	grew, err := s.tableBuffer(k, true).append(b)
	s.size.Add(grew)
	if err == nil {
		s.rows.Add(int64(b.rows()))
	}
	return grew, err
}

// close marks the segment closed: it takes no new writes.
func (s *Segment) close(now time.Time) {
	s.mu.Lock()
	s.mu.state = SegmentClosed
	s.mu.closed = now
	s.mu.Unlock()
}

// seal waits for the writes still in flight into the closed segment to be
// buffered, then seals its open chunks: from then on it never changes.
func (s *Segment) seal() { s.sealOnce.Do(s.sealNow) }

func (s *Segment) sealNow() {
	s.inflight.Wait()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.mu.tables {
		before := t.sizeNow()
		t.sealAll()
		s.size.Add(t.sizeNow() - before)
	}
}

// Snapshot returns the chunks of one table in this segment, retained.
func (s *Segment) Snapshot(db, table string) []Chunk {
	t := s.tableBuffer(TableKey{db, table}, false)
	if t == nil {
		return nil
	}
	return t.snapshot()
}

// SnapshotWhere is Snapshot of the chunks keep admits, told each one's
// rows and time range before it is retained. keep runs under the table's
// lock: it must be quick and not call into the buffer.
func (s *Segment) SnapshotWhere(db, table string, keep func(ChunkStat) bool) []Chunk {
	t := s.tableBuffer(TableKey{db, table}, false)
	if t == nil {
		return nil
	}
	return t.snapshotWhere(keep)
}

// SnapshotLatest is SnapshotWhere for the latest row per value of string
// column col within times at most upper: it leaves out the chunks that
// cannot hold one (series_latest.go), and says how many.
func (s *Segment) SnapshotLatest(db, table, col string, upper int64, keep func(ChunkStat) bool) ([]Chunk, int) {
	t := s.tableBuffer(TableKey{db, table}, false)
	if t == nil {
		return nil, 0
	}
	return t.snapshotLatest(col, upper, keep)
}

// Stats appends to dst the rows and time range of each chunk Snapshot
// would return, retaining none.
func (s *Segment) Stats(db, table string, dst []ChunkStat) []ChunkStat {
	t := s.tableBuffer(TableKey{db, table}, false)
	if t == nil {
		return dst
	}
	return t.stats(dst)
}

// Summaries appends to dst the stats of a table's chunks summed by
// partition, its sealed chunks' and its open chunk's, and says how many
// chunks they sum.
func (s *Segment) Summaries(db, table string, dst []ChunkStat) ([]ChunkStat, int) {
	t := s.tableBuffer(TableKey{db, table}, false)
	if t == nil {
		return dst, 0
	}
	return t.summaries(dst)
}

// HasTable says whether the segment holds rows (or a schema) of a table.
func (s *Segment) HasTable(db, table string) bool {
	return s.tableBuffer(TableKey{db, table}, false) != nil
}

// Tables lists the tables with data in the segment, sorted.
func (s *Segment) Tables() []TableKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]TableKey, 0, len(s.mu.tables))
	for k := range s.mu.tables {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Database != out[j].Database {
			return out[i].Database < out[j].Database
		}
		return out[i].Table < out[j].Table
	})
	return out
}

// SegmentInfo describes a segment, for system tables and logs.
type SegmentInfo struct {
	ID      uint64
	State   SegmentState
	Start   time.Time
	Closed  time.Time
	Rows    int64
	Bytes   int64
	WALFile string
}

// Info describes the segment now.
func (s *Segment) Info() SegmentInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return SegmentInfo{ID: s.id, State: s.mu.state, Start: s.start, Closed: s.mu.closed,
		Rows: s.rows.Load(), Bytes: s.size.Load(), WALFile: s.walFile}
}

func (s *Segment) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.mu.tables {
		t.release()
	}
	s.mu.tables = map[TableKey]*tableBuffer{}
}
