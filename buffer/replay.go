package buffer

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/wal"
)

// replayLogEvery is how often a long replay logs its progress (besides one
// line when it starts and one when it ends): an operator watching a
// restart sees it move, and how long is left.
const replayLogEvery = 5 * time.Second

// ReplayProgress is how far the WAL replay of Open has come. Open updates
// it while it replays (Config.ReplayProgress); any goroutine may read it
// meanwhile through Snapshot, e.g. a readiness endpoint answering before
// Open returns. The zero value is ready to use.
type ReplayProgress struct {
	filesTotal, filesDone atomic.Int64
	bytesTotal, bytesDone atomic.Int64
	rows                  atomic.Int64
	started, finished     atomic.Int64 // UnixNano; 0: not yet
}

// ReplaySnapshot is a ReplayProgress at one moment. Its fields are read
// one by one, so they may be a record apart from each other.
type ReplaySnapshot struct {
	Started, Done     bool
	Files, FilesTotal int64 // WAL files replayed, and found at the start
	Bytes, BytesTotal int64 // bytes of those files
	Rows              int64 // rows rebuilt so far
	Elapsed           time.Duration
	Percent           float64       // of BytesTotal; 100 once done
	MBPerSecond       float64       // bytes replayed per second so far, in MB (1e6)
	Remaining         time.Duration // estimated, at the rate so far; 0 when unknown or done
}

// Snapshot reads the progress now.
func (p *ReplayProgress) Snapshot() ReplaySnapshot {
	var s ReplaySnapshot
	start := p.started.Load()
	if start == 0 {
		return s
	}
	end := p.finished.Load()
	s.Started, s.Done = true, end != 0
	s.Files, s.FilesTotal = p.filesDone.Load(), p.filesTotal.Load()
	s.Bytes, s.BytesTotal = p.bytesDone.Load(), p.bytesTotal.Load()
	s.Rows = p.rows.Load()
	if end == 0 {
		end = time.Now().UnixNano()
	}
	s.Elapsed = time.Duration(end - start)
	switch {
	case s.Done:
		s.Percent = 100
	case s.BytesTotal > 0:
		s.Percent = min(100, 100*float64(s.Bytes)/float64(s.BytesTotal))
	}
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.MBPerSecond = float64(s.Bytes) / 1e6 / secs
		if !s.Done && s.Bytes > 0 && s.BytesTotal > s.Bytes {
			s.Remaining = time.Duration(float64(s.BytesTotal-s.Bytes) / (float64(s.Bytes) / secs) * float64(time.Second))
		}
	}
	return s
}

// begin records the WAL files about to be replayed.
func (p *ReplayProgress) begin(files, bytes int64) {
	p.filesTotal.Store(files)
	p.bytesTotal.Store(bytes)
	p.started.Store(time.Now().UnixNano())
}

// end records the end of the replay, successful or not.
func (p *ReplayProgress) end() {
	p.filesDone.Store(p.filesTotal.Load())
	p.bytesDone.Store(max(p.bytesDone.Load(), p.bytesTotal.Load()))
	p.finished.Store(time.Now().UnixNano())
}

// walSizes returns the size of each WAL file by segment id, and their
// sum, for the progress of a replay. A file that cannot be stat'ed counts
// as empty: the replay itself will say what is wrong with it.
func (b *WriteBuffer) walSizes() (map[uint64]int64, int64) {
	entries, err := b.cfg.WALFS.ReadDir(b.walDir)
	if err != nil {
		return nil, 0
	}
	ids, _ := wal.ListSegments(b.cfg.WALFS, b.walDir)
	want := make(map[string]uint64, len(ids))
	for _, id := range ids {
		want[wal.SegmentFileName(id)] = id
	}
	sizes := make(map[uint64]int64, len(ids))
	var total int64
	for _, e := range entries {
		id, ok := want[e.Name()]
		if !ok {
			continue
		}
		sizes[id] = 0
		if fi, err := e.Info(); err == nil {
			sizes[id] = fi.Size()
			total += fi.Size()
		}
	}
	return sizes, total
}

// logProgress logs one line of a replay's progress.
func (b *WriteBuffer) logProgress(msg string, s ReplaySnapshot) {
	b.log.Info(msg, "files", s.Files, "files_total", s.FilesTotal, "bytes", s.Bytes, "bytes_total", s.BytesTotal,
		"percent", fmt.Sprintf("%.1f", s.Percent), "mb_per_s", fmt.Sprintf("%.1f", s.MBPerSecond), "rows", s.Rows,
		"elapsed", s.Elapsed.Round(time.Millisecond), "eta", s.Remaining.Round(time.Second))
}

// replay rebuilds catalog changes and buffered rows from every WAL file, in
// segment and record order. Each record is in exactly one file and files
// are read once, so every acknowledged row comes back exactly once; the
// sequence numbers are checked to grow, which would catch a file replayed
// twice. Replayed segments are closed: writes go to a new segment.
func (b *WriteBuffer) replay() ([]*Segment, error) {
	start := time.Now()
	prog := b.cfg.ReplayProgress
	if prog == nil {
		prog = &ReplayProgress{}
	}
	sizes, total := b.walSizes()
	prog.begin(int64(len(sizes)), total)
	defer prog.end()
	if len(sizes) > 0 {
		b.logProgress("replaying the WAL", prog.Snapshot())
	}
	lastLog := start
	// The bytes of the files before the one being read: a record's offset
	// in its file, plus these, is how far the replay has come.
	var doneBefore int64
	var curSeg uint64
	curStarted := false

	segs := map[uint64]*Segment{}
	var lastSeq uint64
	var rows, droppedRecords int64
	stats, err := wal.Replay(wal.ReplayOptions{Dir: b.walDir, FS: b.cfg.WALFS, Logger: b.log, MoveCorrupt: b.cfg.WALMoveCorrupt},
		func(segID uint64, offset int64, payload []byte) error {
			if !curStarted || segID != curSeg {
				// Files are replayed in id order: those below are done.
				doneBefore = 0
				var done int64
				for id, size := range sizes {
					if id < segID {
						doneBefore += size
						done++
					}
				}
				prog.filesDone.Store(done)
				curSeg, curStarted = segID, true
			}
			e, rec, err := decodeEntry(payload, b.mem)
			if err != nil {
				return err
			}
			defer rec.Release()
			if e.Sequence <= lastSeq {
				return fmt.Errorf("sequence %d follows %d: records out of order", e.Sequence, lastSeq)
			}
			lastSeq = e.Sequence
			if b.cat.Snapshot().Hidden(e.Database, e.Table, segID) {
				// Its table was dropped (ddl.go): the catalog file, which
				// says so, is durable, so the rows are gone for good.
				droppedRecords++
				return nil
			}
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
				seg = newSegment(segID, b.cfg.Now(), walFileName(b.walDir, segID), b.cfg.ChunkRows, b.cfg.ChunkAllocator)
				segs[segID] = seg
			}
			seg.noteSequence(e.Sequence)
			if _, err := seg.append(TableKey{e.Database, e.Table}, nb); err != nil {
				return err
			}
			rows += e.Rows
			prog.rows.Store(rows)
			prog.bytesDone.Store(doneBefore + offset + wal.RecordHeaderSize + int64(len(payload)))
			if now := time.Now(); now.Sub(lastLog) >= replayLogEvery {
				lastLog = now
				b.logProgress("replaying the WAL", prog.Snapshot())
			}
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
	prog.end()
	snap := prog.Snapshot()
	b.log.Info("WAL replayed", "files", stats.Files, "records", stats.Records, "rows", rows, "bytes", stats.Bytes,
		"truncated_bytes", stats.TruncatedBytes, "records_of_dropped_tables", droppedRecords, "moved_aside", stats.MovedAside, "duration", time.Since(start),
		"mb_per_s", fmt.Sprintf("%.1f", snap.MBPerSecond))
	return out, nil
}
