package persist

import (
	"cmp"
	"slices"
	"sync"
)

// Index lists the persisted segments, in id order: what queries read of
// the persisted side. The buffer fills it at startup (LoadSegments) and
// adds each segment once its segment file is durable; its View takes the
// segments that are no longer buffered. The zero Index is empty and ready
// for use. Safe for concurrent use.
type Index struct {
	mu   sync.Mutex
	segs []Segment
}

// Add adds segments.
func (x *Index) Add(segs ...Segment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.segs = append(x.segs, segs...)
	slices.SortFunc(x.segs, func(a, b Segment) int { return cmp.Compare(a.ID, b.ID) })
}

// Segments returns every segment, in id order.
func (x *Index) Segments() []Segment {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.segs)
}

// Without returns the segments whose id is not in ids, in id order; nil if
// none.
func (x *Index) Without(ids map[uint64]bool) []Segment {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Segment
	for _, s := range x.segs {
		if !ids[s.ID] {
			out = append(out, s)
		}
	}
	return out
}

// Update replaces the segments with what fn returns for them (in id
// order); fn must not modify the slice it is given, nor the files of its
// segments, which readers may share.
func (x *Index) Update(fn func([]Segment) []Segment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.segs = fn(slices.Clip(x.segs))
}
