package buffer

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apron-db/apron/persist"
)

// The sweep deletes persisted files no reader may see any more: those of
// dropped tables (ddl.go) and those whose rows have all expired
// (retention.go). It runs in the persister's goroutine, so that segment
// files are written by one goroutine only, every SweepInterval and when
// a drop or a retention change asks for it: between two persists when
// segments keep waiting, unless memory presses (persister).
//
// A file leaves the Index first (removeFilesLocked, under mu): Views
// taken from then on do not list it. Its segment is then dirty: its
// segment file still lists the file, until the sweep rewrites it
// (persist.Store.RewriteSegmentFile). The file itself is deleted only
// after that, and once no View taken before it left the Index is still
// held (a query reading it finishes with it): Views carry the Index's
// generation, which grows each time files leave it. A crash at any point
// leaves files that the segment files list (and that startup removes
// from the Index again, by the same rules) or that none lists (orphans,
// deleted at startup, which finds them in the journal of unlisted objects
// the sweep puts them in before any rewrite): never a listed file that is
// gone.

// sweepState is guarded by WriteBuffer.mu.
type sweepState struct {
	gen uint64 // the Index's generation; Views hold it (viewstate.go)
	// dirty: listing (persist.Segment.Listing: a segment file or a
	// compaction file) → what it is to list (a listing left with no file
	// leaves the Index: this is then its only copy), with the mark of the
	// last change the stored listing does not show yet.
	dirty  map[string]dirtyListing
	mark   uint64
	doomed []doomedFile
	// deleting counts the doomed files a sweep took to delete and has not
	// finished with.
	deleting int
}

type dirtyListing struct {
	seg  persist.Segment
	mark uint64
}

// doomedFile is a file out of the Index, to delete once its segment file
// no longer lists it and no View of a generation before gen is held.
type doomedFile struct {
	file    persist.File
	listing string
	gen     uint64
	reason  string // dropped or expired
}

// removeFilesLocked takes the files drop selects out of the Index, for
// the sweep to delete. It says whether it removed any.
func (b *WriteBuffer) removeFilesLocked(reason string, drop func(persist.Segment, persist.File) bool) bool {
	st := &b.mu.sweep
	var removed []doomedFile
	b.mu.persisted.Update(func(segs []persist.Segment) []persist.Segment {
		out := segs
		copied := false
		for i, s := range segs {
			var keep []persist.File
			changed := false
			for j, f := range s.Files {
				if !drop(s, f) {
					if changed {
						keep = append(keep, f)
					}
					continue
				}
				if !changed {
					keep = append(make([]persist.File, 0, len(s.Files)-1), s.Files[:j]...)
					changed = true
				}
				removed = append(removed, doomedFile{file: f, listing: s.Listing(), gen: st.gen + 1, reason: reason})
			}
			if !changed {
				continue
			}
			if !copied {
				out = slices.Clone(segs)
				copied = true
			}
			s.Files = keep
			out[i] = s
			b.markDirtyLocked(s)
		}
		// A listing left with no file is nothing to read: it leaves the
		// Index (which every View copies), and the sweep rewrites it from
		// its dirty entry.
		if copied {
			out = slices.DeleteFunc(out, func(s persist.Segment) bool { return len(s.Files) == 0 })
		}
		return out
	})
	if len(removed) == 0 {
		return false
	}
	st.gen++
	st.doomed = append(st.doomed, removed...)
	b.markStaleLocked()
	return true
}

// markDirtyLocked notes that seg's stored listing names files the Index
// no longer has: the sweep rewrites it as seg.
func (b *WriteBuffer) markDirtyLocked(seg persist.Segment) {
	st := &b.mu.sweep
	if st.dirty == nil {
		st.dirty = map[string]dirtyListing{}
	}
	st.mark++
	st.dirty[seg.Listing()] = dirtyListing{seg: seg, mark: st.mark}
}

// forgetDroppedLocked takes the files of dropped tables out of the Index.
func (b *WriteBuffer) forgetDroppedLocked() {
	snap := b.cat.Snapshot()
	if !snap.HasDropped() {
		return
	}
	if b.removeFilesLocked("dropped", func(s persist.Segment, f persist.File) bool { return snap.Hidden(f.Database, f.Table, s.ID) }) {
		b.kickSweep()
	}
}

// forgetExpiredLocked takes the files whose rows have all expired at now
// out of the Index.
func (b *WriteBuffer) forgetExpiredLocked(now time.Time) {
	snap := b.cat.Snapshot()
	cutoffs := map[string]int64{}
	b.removeFilesLocked("expired", func(_ persist.Segment, f persist.File) bool {
		c, ok := cutoffs[f.Database]
		if !ok {
			c = b.cutoffAt(snap, f.Database, now)
			cutoffs[f.Database] = c
		}
		return c != math.MinInt64 && f.MaxTime < c
	})
}

// oldestViewLocked is the generation of the oldest View held, or the
// current one if none is. (The last View of an older generation to go
// kicks the sweep: viewState.unref.)
func (b *WriteBuffer) oldestViewLocked() uint64 {
	oldest := b.mu.sweep.gen
	for _, s := range b.liveStatesLocked() {
		oldest = min(oldest, s.gen)
	}
	return oldest
}

// kickSweep asks the persister to sweep soon.
func (b *WriteBuffer) kickSweep() {
	select {
	case b.persist.sweep <- struct{}{}:
	default:
	}
}

// persistsFirst says whether a long sweep is to stop where it is and
// let the persister persist: memory presses and a segment waits. What
// it leaves (listings still dirty, files still doomed) is the next
// sweep's. (A drop of a table of thousands of files on GCS deletes them
// for minutes; writes must not wait behind that.)
func (b *WriteBuffer) persistsFirst() bool {
	return b.memoryPressing() && b.nextToPersist() != nil
}

// Sweep runs one sweep now (tests; the persister sweeps by itself).
func (b *WriteBuffer) Sweep(ctx context.Context) error {
	if b.persist.store == nil {
		return nil
	}
	return b.sweep(ctx)
}

// sweep rewrites the dirty segment files, then deletes the doomed files
// that may go. Only cancellation (or shutdown) ends its retries.
func (b *WriteBuffer) sweep(ctx context.Context) error {
	type rewrite struct {
		seg  persist.Segment
		mark uint64
	}
	b.mu.Lock()
	b.forgetExpiredLocked(b.cfg.Now())
	var rewrites []rewrite
	for _, d := range b.mu.sweep.dirty {
		rewrites = append(rewrites, rewrite{d.seg, d.mark})
	}
	// The files the rewrites unlist go in the journal of unlisted objects
	// first (persist/unlisted.go): a crash after a rewrite leaves them
	// for startup to delete.
	doomed := make([]string, len(b.mu.sweep.doomed))
	for i, d := range b.mu.sweep.doomed {
		doomed[i] = d.file.Path
	}
	b.mu.Unlock()
	if len(rewrites) > 0 {
		if err := b.retry(ctx, "noting the files to delete in the journal of unlisted objects", func() error {
			return b.persist.store.NoteUnlisted(doomed...)
		}); err != nil {
			return err
		}
	}
	slices.SortFunc(rewrites, func(x, y rewrite) int { return strings.Compare(x.seg.Listing(), y.seg.Listing()) })
	for i, r := range rewrites {
		if i > 0 && b.persistsFirst() {
			b.kickSweep() // the rest stay dirty, for the next sweep
			return nil
		}
		err := b.retry(ctx, "rewriting "+r.seg.Listing(), func() error {
			return b.attempt(ctx, 0, func(ctx context.Context) error { return b.persist.store.RewriteListing(ctx, r.seg) })
		})
		if err != nil {
			return err
		}
		b.mu.Lock()
		if b.mu.sweep.dirty[r.seg.Listing()].mark == r.mark {
			delete(b.mu.sweep.dirty, r.seg.Listing())
		}
		b.mu.Unlock()
	}

	b.mu.Lock()
	oldest := b.oldestViewLocked()
	var ready, wait []doomedFile
	for _, d := range b.mu.sweep.doomed {
		if _, dirty := b.mu.sweep.dirty[d.listing]; !dirty && d.gen <= oldest {
			ready = append(ready, d)
		} else {
			wait = append(wait, d)
		}
	}
	b.mu.sweep.doomed = wait
	b.mu.sweep.deleting += len(ready)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.mu.sweep.deleting -= len(ready)
		b.mu.Unlock()
	}()
	deleted := map[string]int{}
	var gone []string
	// Out of the journal of unlisted objects in one write, also when a
	// delete fails after others.
	defer func() { b.persist.store.SettleUnlisted(gone...) }()
	for i, d := range ready {
		if i > 0 && b.persistsFirst() {
			b.mu.Lock()
			b.mu.sweep.doomed = append(b.mu.sweep.doomed, ready[i:]...)
			b.mu.Unlock()
			b.kickSweep()
			break
		}
		err := b.retry(ctx, "deleting "+d.file.Path, func() error {
			return b.attempt(ctx, 0, func(ctx context.Context) error { return b.persist.store.DeleteFile(ctx, d.file.Path) })
		})
		if err != nil {
			b.mu.Lock()
			b.mu.sweep.doomed = append(b.mu.sweep.doomed, ready[i:]...)
			b.mu.Unlock()
			return err
		}
		gone = append(gone, d.file.Path)
		b.metrics.filesDeleted.WithLabelValues(d.reason).Inc()
		b.metrics.bytesDeleted.WithLabelValues(d.reason).Add(float64(d.file.Size))
		deleted[d.reason]++
	}
	for reason, n := range deleted {
		b.log.Info("deleted persisted files", "reason", reason, "files", n)
	}
	return nil
}
