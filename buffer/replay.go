package buffer

import (
	"fmt"
	"sort"
	"time"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/wal"
)

// replay rebuilds catalog changes and buffered rows from every WAL file, in
// segment and record order. Each record is in exactly one file and files
// are read once, so every acknowledged row comes back exactly once; the
// sequence numbers are checked to grow, which would catch a file replayed
// twice. Replayed segments are closed: writes go to a new segment.
func (b *WriteBuffer) replay() ([]*Segment, error) {
	start := time.Now()
	segs := map[uint64]*Segment{}
	var lastSeq uint64
	var rows int64
	stats, err := wal.Replay(wal.ReplayOptions{Dir: b.walDir, FS: b.cfg.WALFS, Logger: b.log, MoveCorrupt: b.cfg.WALMoveCorrupt},
		func(segID uint64, offset int64, payload []byte) error {
			e, rec, err := decodeEntry(payload, b.mem)
			if err != nil {
				return err
			}
			defer rec.Release()
			if e.Sequence <= lastSeq {
				return fmt.Errorf("sequence %d follows %d: records out of order", e.Sequence, lastSeq)
			}
			lastSeq = e.Sequence
			nb, err := normalize(rec, b.cfg.Now(), b.mem, fromWAL, 0)
			if err != nil {
				return err
			}
			defer nb.release()
			ch, err := b.cat.PlanWrite(e.Database, e.Table, nb.rec.Schema(), catalog.WriteOptions{Replay: true})
			if err != nil {
				return err
			}
			if ch != nil {
				if err := b.cat.Apply(ch); err != nil {
					return err
				}
			}
			seg := segs[segID]
			if seg == nil {
				seg = newSegment(segID, b.cfg.Now(), walFileName(b.walDir, segID), b.cfg.ChunkRows)
				segs[segID] = seg
			}
			seg.noteSequence(e.Sequence)
			if _, err := seg.append(TableKey{e.Database, e.Table}, nb); err != nil {
				return err
			}
			rows += e.Rows
			return nil
		})
	out := make([]*Segment, 0, len(segs))
	for _, s := range segs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	if err != nil {
		return out, fmt.Errorf("buffer: replaying WAL: %w", err)
	}
	// A file with no records (the open segment of a run that took no
	// writes) holds nothing to keep; remove it, but not its id, which is
	// never used again.
	ids, err := wal.ListSegments(b.cfg.WALFS, b.walDir)
	if err != nil {
		return out, fmt.Errorf("buffer: listing WAL files: %w", err)
	}
	removed := 0
	for _, id := range ids {
		b.maxSegID = max(b.maxSegID, id)
		if segs[id] != nil {
			continue
		}
		if err := b.cfg.WALFS.Remove(walFileName(b.walDir, id)); err != nil {
			return out, fmt.Errorf("buffer: removing empty WAL file: %w", err)
		}
		removed++
	}
	if removed > 0 {
		if err := b.cfg.WALFS.SyncDir(b.walDir); err != nil {
			return out, fmt.Errorf("buffer: syncing WAL dir: %w", err)
		}
	}
	now := b.cfg.Now()
	for _, s := range out {
		s.close(now)
		s.seal()
	}
	b.mu.seq = lastSeq
	b.log.Info("WAL replayed", "files", stats.Files, "records", stats.Records, "rows", rows, "bytes", stats.Bytes,
		"truncated_bytes", stats.TruncatedBytes, "moved_aside", stats.MovedAside, "duration", time.Since(start))
	return out, nil
}
