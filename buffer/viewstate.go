package buffer

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// Taking a View does not take WriteBuffer.mu: a write that changes the
// catalog holds mu across its WAL fsync, a rollover across the WAL file's
// creation and the catalog's save, and a query must not queue behind
// them. What a View needs (the buffered segments, the persisted ones not
// among them, the Index's generation) is published as one immutable
// viewState behind an atomic pointer, and a View is a pointer load and a
// reference on it.
//
// A critical section of mu that changes any of it (a rollover, a segment
// persisted or dropped, files leaving or joining the Index) marks the
// state stale (markStaleLocked); publishMutex.Unlock then publishes the
// new state once, as mu is released, so that a View sees the state of
// one instant between critical sections, never one half-way through
// (compaction's files out and its merged file in come together).
//
// References: a viewState holds one reference on each of its segments,
// and the buffer one on each segment it buffers (Segment.refs); a
// segment's memory is freed when the last goes. The current viewState
// holds one reference on itself, dropped when the next replaces it; each
// View holds one more. A viewState whose count reached zero is dead and
// never referenced again (tryRef refuses it, and View loads the newer
// state, published before the old one was let go).
//
// The sweep (sweep.go) must not delete a file a held View lists: the
// retired states still referenced are kept in mu.live, and the oldest
// generation among them (and the current one) is what the sweep waits on.

// viewState is what a View reads; immutable once published but for refs.
type viewState struct {
	segs      []*Segment        // open and closed, in id order
	persisted []persist.Segment // persisted, not in segs, in id order
	gen       uint64            // the Index's generation (sweep.go)
	// cat is the catalog as the segments were: taken with them under mu,
	// so that a View never pairs a catalog that already hides a replaced
	// table's rows with segments that do not yet hold its new ones.
	cat  *catalog.Snapshot
	refs atomic.Int64
}

// tryRef takes a reference unless the state is dead.
func (s *viewState) tryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unref drops a reference; the last one lets go of the segments and asks
// for a sweep, which may have files that waited on this state.
func (s *viewState) unref(b *WriteBuffer) {
	if s.refs.Add(-1) != 0 {
		return
	}
	for _, seg := range s.segs {
		seg.unref()
	}
	if s.gen < b.viewGen.Load() {
		b.kickSweep()
	}
}

// publishMutex is WriteBuffer.mu's mutex: Unlock publishes the View state
// when the critical section marked it stale (once Open has published the
// first one).
type publishMutex struct {
	sync.Mutex
	stale   bool
	publish func()
	// catalogMoved says whether the catalog changed since the state was
	// published (a write that made a table or a column, DDL, a replace):
	// the state is published again then too.
	catalogMoved func() bool
}

func (m *publishMutex) Unlock() {
	if m.publish != nil && (m.stale || m.catalogMoved()) {
		m.stale = false
		m.publish()
	}
	m.Mutex.Unlock()
}

// markStaleLocked says that the segments or the Index changed: the View
// state is published again as mu is released.
func (b *WriteBuffer) markStaleLocked() { b.mu.stale = true }

// publishLocked publishes the View state of now and retires the previous
// one.
func (b *WriteBuffer) publishLocked() {
	st := &viewState{gen: b.mu.sweep.gen, cat: b.cat.Snapshot()}
	if !b.mu.released {
		st.segs = make([]*Segment, 0, len(b.mu.closed)+1)
		ids := make(map[uint64]bool, len(b.mu.closed)+1)
		for _, s := range append(slices.Clip(b.mu.closed), b.mu.open) {
			s.refs.Add(1)
			st.segs = append(st.segs, s)
			ids[s.id] = true
		}
		st.persisted = b.mu.persisted.Without(ids)
	}
	st.refs.Store(1)
	b.viewGen.Store(st.gen)
	old := b.viewState.Swap(st)
	close(b.published)
	b.published = make(chan struct{})
	if old == nil {
		return
	}
	b.mu.live = slices.DeleteFunc(b.mu.live, func(s *viewState) bool { return s.refs.Load() <= 0 })
	b.mu.live = append(b.mu.live, old)
	old.unref(b)
}

// liveStatesLocked are the View states some View holds, current included.
func (b *WriteBuffer) liveStatesLocked() []*viewState {
	b.mu.live = slices.DeleteFunc(b.mu.live, func(s *viewState) bool { return s.refs.Load() <= 0 })
	out := slices.Clone(b.mu.live)
	if cur := b.viewState.Load(); cur != nil && cur.refs.Load() > 1 {
		out = append(out, cur)
	}
	return out
}

// unref drops a reference on the segment; the last one frees its memory
// (and says so).
func (s *Segment) unref() (freed bool) {
	if s.refs.Add(-1) != 0 {
		return false
	}
	s.release()
	return true
}
