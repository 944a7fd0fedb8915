//go:build duckdb_arrow

package query

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet/file"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// pqDisabled sends every persisted file through pqarrow: tests compare
// the native decoder with it.
var pqDisabled atomic.Bool

// pqNative and pqFallback count the files scans read natively and through
// pqarrow, for tests.
var pqNative, pqFallback atomic.Int64

// pqGroupsNarrowed, pqGroupsSkipped and pqRowsSkipped count the row groups
// read from a row other than their first or to one other than their last,
// those of which no row could match, and the rows left unread in the
// first (pqrange.go), for tests.
var pqGroupsNarrowed, pqGroupsSkipped, pqRowsSkipped atomic.Int64

// pqHooks are called, when set, at the steps a test of the sharing of a
// file's row groups between threads orders (TestPQFileSharedByThreads).
type pqHooks struct {
	opening func()           // a thread is about to open a file
	idle    func()           // a thread found no file left to open
	group   func(*scanLocal) // a thread opened a row group
}

var pqTestHooks atomic.Pointer[pqHooks]

// pqFile is a persisted file the native decoder reads, shared by the
// threads reading its row groups: closed when the last lets go.
type pqFile struct {
	p      *parquetFile
	plan   []pqColPlan              // per output column
	narrow pqNarrow                 // what its row groups may be narrowed by (pqrange.go)
	pages  *lru[pqPageKey, *pqPage] // the engine's page cache (pqpages.go), or nil
	// indexes is the engine's cache of decoded page indexes (pqindex.go).
	indexes *lru[pqIndexKey, *rgIndex]
	refs    atomic.Int32
}

func (f *pqFile) release() {
	if f.refs.Add(-1) == 0 {
		f.p.close()
	}
}

// pqUnit is one row group of a file: what a scan thread takes at a time.
type pqUnit struct {
	f  *pqFile
	rg int
}

// pqQueue holds the row groups of the files threads opened that no thread
// has taken yet: a file of several row groups is read by as many threads.
//
// A thread that finds nothing left to take or open must not end its scan
// while another thread is still opening a file: DuckDB ends a thread's
// part of the pipeline when its scan returns no rows, and the row groups
// the other thread then queues would all be read by that one thread. A
// table of one persisted file (the usual case after a persist) was read
// on one core: the peer benchmark's aggregate over 5M persisted rows took
// 280 ms against 155 buffered, for the same CPU. So the files whose
// opening is over are counted, and a thread out of work waits until all
// of the scan's are (wait). Counting the ones done rather than the ones
// under way leaves no moment, between a thread's claim of a file and the
// start of its opening, at which a thread could find nothing pending.
type pqQueue struct {
	n     atomic.Int32 // len(units): no lock taken while it is 0
	mu    sync.Mutex
	units []pqUnit
	// opened counts the files whose opening is over (row groups queued,
	// read through pqarrow, pruned, or failed); done is signalled at each.
	opened int
	done   *sync.Cond
}

func (q *pqQueue) push(us []pqUnit) {
	q.mu.Lock()
	q.units = append(q.units, us...)
	q.n.Store(int32(len(q.units)))
	if q.done != nil && len(us) > 0 {
		q.done.Broadcast() // a waiting thread takes them at once
	}
	q.mu.Unlock()
}

func (q *pqQueue) take() (pqUnit, bool) {
	if q.n.Load() == 0 {
		return pqUnit{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.units) == 0 {
		return pqUnit{}, false
	}
	u := q.units[0]
	q.units = q.units[1:]
	q.n.Store(int32(len(q.units)))
	return u, true
}

// fileOpened says a file's opening is over, its row groups queued or not.
func (q *pqQueue) fileOpened() {
	q.mu.Lock()
	q.opened++
	if q.done != nil {
		q.done.Broadcast()
	}
	q.mu.Unlock()
}

// wait takes a unit, waiting while files the scan's other threads claimed
// may still queue some; false once none is queued and the openings of all
// the scan's files are over. A thread opens the file it claims at once,
// and the opening ends, with the row groups queued or with an error, in
// the time its fetch and footer take (the fetch stops with the query's
// context): the wait is bounded by that.
func (q *pqQueue) wait(files int) (pqUnit, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if len(q.units) > 0 {
			u := q.units[0]
			q.units = q.units[1:]
			q.n.Store(int32(len(q.units)))
			return u, true
		}
		if q.opened >= files {
			return pqUnit{}, false
		}
		if q.done == nil {
			q.done = sync.NewCond(&q.mu)
		}
		q.done.Wait()
	}
}

// drop releases the units nobody took (a query that ended early).
func (q *pqQueue) drop() {
	q.mu.Lock()
	us := q.units
	q.units = nil
	q.n.Store(0)
	q.mu.Unlock()
	for _, u := range us {
		u.f.release()
	}
}

// openNative makes p a file the native decoder reads, if it can (pqPlan),
// queues its row groups but the first and returns that one; ok false
// leaves p to the caller.
func (g *scanGlobal) openNative(p *parquetFile) (first pqUnit, ok bool) {
	plan, ok := g.pqPlan(p.pf.MetaData(), p.groups)
	if !ok {
		pqFallback.Add(1)
		return pqUnit{}, false
	}
	pqNative.Add(1)
	f := &pqFile{p: p, plan: plan, narrow: g.narrowing(), pages: g.bind.e.pages, indexes: g.bind.e.pageIndexes}
	f.refs.Store(int32(len(p.groups)))
	rest := make([]pqUnit, 0, len(p.groups)-1)
	for _, rg := range p.groups[1:] {
		rest = append(rest, pqUnit{f, rg})
	}
	g.pq.push(rest)
	return pqUnit{f, p.groups[0]}, true
}

// pager reads column leaf of u's row group, rg, through the page cache.
func (u pqUnit) pager(rg *file.RowGroupReader, leaf int) *pqPager {
	return newPQPager(rg, leaf, u.f.pages, pqPageKey{file: fileKey(u.f.p.f), rg: int32(u.rg)})
}

// pqGroup is a scan thread's row group being read natively.
type pqGroup struct {
	u    pqUnit
	rows int // left
	// Per output column: its decoder, or nil for one the file lacks
	// (NULLs), a row id (nothing) or the copy of another's (same).
	cols []*pqColumn
	same []int // >= 0: the output column this one references
	// lead is the output column of the string column the row group is
	// sorted by first, if projected: output is cut where its runs of one
	// value start and end, for constant vectors (pqMinConstRun); -1 if
	// none.
	lead int
}

// openGroup starts reading u, with the scan thread's dictionaries; it owns
// u's reference from then on.
func openGroup(u pqUnit, dicts *pqDictCache) (_ *pqGroup, err error) {
	gr := &pqGroup{u: u, cols: make([]*pqColumn, len(u.f.plan)), same: make([]int, len(u.f.plan)), lead: -1}
	defer func() {
		if err != nil {
			gr.close()
		}
	}()
	rg := u.f.p.pf.RowGroup(u.rg)
	rows := int(rg.NumRows())
	lo, hi, pages, err := u.f.rowRange(rg, u, rows, dicts)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u.f.p.f.Path, err)
	}
	gr.rows = hi - lo
	if gr.rows == 0 {
		pqGroupsSkipped.Add(1)
		return gr, nil // no row can match: nothing to read
	}
	if pages != nil {
		pqGroupsNarrowed.Add(1)
		pqRowsSkipped.Add(int64(rows - gr.rows))
	}
	byLeaf := map[int]int{}
	for i, p := range u.f.plan {
		gr.same[i] = -1
		if p.leaf < 0 {
			continue
		}
		if j, ok := byLeaf[p.leaf]; ok {
			gr.same[i] = j
			continue
		}
		byLeaf[p.leaf] = i
		gr.cols[i] = newPQColumn(p, u.pager(rg, p.leaf), dicts)
		if pages != nil {
			if err := gr.cols[i].seek(lo, pages[p.leaf]); err != nil {
				return nil, fmt.Errorf("reading %s: column %d from row %d: %w", u.f.p.f.Path, p.leaf, lo, err)
			}
		}
	}
	if sc := rg.MetaData().SortingColumns(); len(sc) > 0 {
		if i, ok := byLeaf[int(sc[0].ColumnIdx)]; ok && u.f.plan[i].kind == pqBytes {
			gr.lead = i
		}
	}
	return gr, nil
}

func (gr *pqGroup) close() {
	for _, c := range gr.cols {
		if c != nil {
			c.close()
		}
	}
	gr.cols = nil
	if gr.u.f != nil {
		gr.u.f.release()
		gr.u.f = nil
	}
}

// emit writes the next at most vectorSize rows into out.
func (gr *pqGroup) emit(l *scanLocal, out duck.DataChunk) error {
	k := min(vectorSize, gr.rows)
	if gr.lead >= 0 {
		_, n, err := gr.cols[gr.lead].constRun()
		if err != nil {
			return fmt.Errorf("reading %s: %w", gr.u.f.p.f.Path, err)
		}
		if n >= pqMinConstRun {
			k = min(k, n)
		}
	}
	for i, p := range gr.u.f.plan {
		vec := duck.DataChunkGetVector(out, duck.IdxT(i))
		switch {
		case gr.cols[i] != nil:
			if err := gr.cols[i].emit(vec, k); err != nil {
				return fmt.Errorf("reading %s: column %q: %w", gr.u.f.p.f.Path, l.g.bind.fields[l.g.proj[i]].Name, err)
			}
		case gr.same[i] >= 0:
			duck.VectorReferenceVector(vec, duck.DataChunkGetVector(out, duck.IdxT(gr.same[i])))
		case p.leaf == -1:
			nulls, err := l.nullChunk()
			if err != nil {
				return err
			}
			duck.VectorReferenceVector(vec, duck.DataChunkGetVector(nulls, duck.IdxT(l.g.proj[i])))
		}
	}
	duck.DataChunkSetSize(out, duck.IdxT(k))
	gr.rows -= k
	return nil
}
