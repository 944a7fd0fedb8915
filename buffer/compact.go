package buffer

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/apron-db/apron/persist"
)

// Compaction (persist/compaction.go) runs in the persister's goroutine
// every CompactionInterval, between two persists (taking turns with them,
// and giving way to writes: compact_pace.go): each
// table's persisted files of one day, once there are CompactionMinFiles
// of them, are merged into one file (sorted as persisted files are, with
// the rows that have expired left out), at most compactMaxBytes of input
// at a time. Only files of segments no longer in memory are merged: a
// View reads a segment in memory from memory and skips its listing, and
// a merged file spans several segments. The merged file joins the Index
// and its inputs leave it in one step under mu, so a View has either;
// the inputs are deleted by the sweep, once no View that lists them is
// held.

const (
	// compactMaxBytes bounds the Parquet bytes merged at once (the
	// merge reads its inputs a batch at a time: persist/compact_merge.go).
	compactMaxBytes = 256 << 20
	// compactMaxRows bounds the rows merged at once.
	compactMaxRows = 16 << 20
	// compactMaxFiles bounds the files merged at once: the merge holds a
	// batch and the column readers of each (~1 MB with the batches of
	// persist's merge, 4Ki rows; peak heap merging 24 files of a day,
	// 168k rows: 128-134 MB, against 68-71 when they were read whole).
	// A day of more files takes more rounds.
	compactMaxFiles = 32
	// compactBigFile: a file this large is left as it is.
	compactBigFile = compactMaxBytes / 2
)

// compactionJob is one merge the compactor chose.
type compactionJob struct {
	db, table, partition string
	files                []persist.File
	minSeg, maxSeg       uint64
}

// Compact runs the compactions due now (tests; the persister compacts by
// itself).
func (b *WriteBuffer) Compact(ctx context.Context) error {
	if b.persist.store == nil {
		return nil
	}
	return b.compact(ctx, false)
}

// compact runs every compaction due. Only cancellation (or shutdown)
// ends its retries. inPersister says that it runs in the persister's
// goroutine, whose work its pacer may do meanwhile (compact_pace.go).
func (b *WriteBuffer) compact(ctx context.Context, inPersister bool) error {
	// A rewrite (rewrite.go) in progress: its files are not merged under
	// it; the round is owed, and runs when it ends (compact_turn.go).
	select {
	case b.rewriting <- struct{}{}:
	default:
		if b.cfg.CompactionInterval > 0 {
			b.compactTurn.owe()
		}
		return nil
	}
	defer func() { <-b.rewriting }()
	defer b.compactTurn.paid()
	for _, job := range b.compactionJobs() {
		if b.draining() || ctx.Err() != nil {
			return ctx.Err()
		}
		if err := b.runCompaction(ctx, job, inPersister); err != nil {
			return err
		}
	}
	return nil
}

// compactionJobs chooses the merges due: for each table and day with at
// least CompactionMinFiles files of segments not in memory (big ones
// aside), the oldest of them up to compactMaxBytes, compactMaxRows and
// compactMaxFiles.
func (b *WriteBuffer) compactionJobs() []compactionJob {
	b.mu.Lock()
	defer b.mu.Unlock()
	inMemory := map[uint64]bool{b.mu.open.id: true}
	for _, s := range b.mu.closed {
		inMemory[s.id] = true
	}
	snap := b.cat.Snapshot()
	now := b.cfg.Now()
	type key struct{ db, table, partition string }
	type input struct {
		f   persist.File
		seg uint64 // the listing's ID
		min uint64 // the first segment its rows come from
	}
	groups := map[key][]input{}
	for _, s := range b.mu.persisted.Segments() {
		if inMemory[s.ID] {
			continue
		}
		minSeg := s.ID
		if s.Compaction != nil {
			minSeg = s.Compaction.MinSegment
		}
		for _, f := range s.Files {
			if f.Size >= compactBigFile || f.MaxTime < b.cutoffAt(snap, f.Database, now) {
				continue // big enough, or the sweep's
			}
			if _, ok := snap.Table(f.Database, f.Table); !ok {
				continue
			}
			k := key{f.Database, f.Table, f.Partition}
			groups[k] = append(groups[k], input{f, s.ID, minSeg})
		}
	}
	var jobs []compactionJob
	var backlog int64
	for k, in := range groups {
		if len(in) < b.cfg.CompactionMinFiles {
			continue
		}
		backlog += int64(len(in))
		slices.SortFunc(in, func(x, y input) int { return cmp.Compare(x.seg, y.seg) })
		job := compactionJob{db: k.db, table: k.table, partition: k.partition, minSeg: math.MaxUint64}
		var bytes, rows int64
		for _, x := range in {
			if len(job.files) >= 2 && (bytes+x.f.Size > compactMaxBytes || rows+x.f.Rows > compactMaxRows || len(job.files) == compactMaxFiles) {
				break
			}
			job.files = append(job.files, x.f)
			bytes += x.f.Size
			rows += x.f.Rows
			job.minSeg, job.maxSeg = min(job.minSeg, x.min), max(job.maxSeg, x.seg)
		}
		jobs = append(jobs, job)
	}
	b.compactBacklog.Store(backlog)
	slices.SortFunc(jobs, func(x, y compactionJob) int {
		return cmp.Or(cmp.Compare(x.db, y.db), cmp.Compare(x.table, y.table), cmp.Compare(x.partition, y.partition))
	})
	return jobs
}

// runCompaction merges job's files and publishes the result.
func (b *WriteBuffer) runCompaction(ctx context.Context, job compactionJob, inPersister bool) error {
	start := time.Now()
	tbl, ok := b.cat.Snapshot().Table(job.db, job.table)
	if !ok {
		return nil // dropped since: the sweep deletes its files
	}
	st := b.persist.store
	gen := st.NextGeneration()
	var in int64
	for _, f := range job.files {
		in += f.Size
	}
	var c persist.Compaction
	pacer := b.newCompactionPacer(ctx, inPersister)
	err := b.retry(ctx, "compacting "+job.db+"."+job.table+" "+job.partition, func() error {
		// Expired rows stay out of the merged file (retention.go).
		b.mu.Lock()
		cutoff := b.cutoffAt(b.cat.Snapshot(), job.db, b.cfg.Now())
		b.mu.Unlock()
		err := b.attempt(ctx, in, func(ctx context.Context) (err error) {
			c, err = st.Compact(ctx, persist.CompactInput{Generation: gen, Database: job.db, Table: job.table, Partition: job.partition,
				Schema: tbl, Files: job.files, MinSegment: job.minSeg, MaxSegment: job.maxSeg, Cutoff: cutoff, Mem: b.mem,
				Pace: pacer.pacer()})
			return err
		})
		if pacer.stopped != nil {
			return nil // not a failure: ended by its pacer, below
		}
		return err
	})
	if pacer.stopped != nil {
		if errors.Is(pacer.stopped, errDraining) {
			b.log.Info("compaction stopped by the shutdown; the next start compacts again", "database", job.db, "table", job.table, "partition", job.partition)
		}
		return pacer.stopped
	}
	if err != nil {
		b.metrics.compactions.WithLabelValues("failed").Inc()
		return err
	}
	for i := range c.Files {
		c.Files[i].URI = st.Objects().URI(c.Files[i].Path)
	}
	b.mu.Lock()
	replaced := make(map[string]bool, len(c.Replaces))
	for _, p := range c.Replaces {
		replaced[p] = true
	}
	b.removeFilesLocked("compacted", func(_ persist.Segment, f persist.File) bool { return replaced[f.Path] })
	b.mu.persisted.Add(c.Segment())
	b.markStaleLocked()
	b.forgetDroppedLocked() // a drop while it ran
	b.mu.Unlock()
	b.kickSweep()

	var out, rows int64
	for _, f := range c.Files {
		out += f.Size
		rows += f.Rows
	}
	b.compactBacklog.Add(-int64(len(job.files)))
	b.metrics.compactions.WithLabelValues("ok").Inc()
	b.metrics.compactionFilesIn.Add(float64(len(job.files)))
	b.metrics.compactionFilesOut.Add(float64(len(c.Files)))
	b.metrics.compactionBytesIn.Add(float64(in))
	b.metrics.compactionBytesOut.Add(float64(out))
	b.metrics.compactionTime.Observe(time.Since(start).Seconds())
	b.metrics.compactionPaced.Add(pacer.slept.Seconds())
	b.log.Info("compacted", "database", job.db, "table", job.table, "partition", job.partition, "generation", gen,
		"files_in", len(job.files), "bytes_in", in, "bytes_out", out, "rows", rows, "duration", time.Since(start).Round(time.Millisecond),
		"paced", pacer.slept.Round(time.Millisecond), "segments_persisted_meanwhile", pacer.persisted)
	return nil
}
