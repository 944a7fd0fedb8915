package persist

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// A rewrite replaces some of a table's files by files that hold only some
// of their rows: a DELETE of persisted rows (query/delete.go,
// buffer/rewrite.go). Each file replaced becomes one file of the rows that
// stay (or none, when none stays), written and uploaded as a compaction's
// merged file is, and all of them are committed together by one
// compaction file (compaction.go) whose replaces are the old files and
// whose files are the new ones. So a rewrite needs nothing of its own at
// startup or in the sweep: a crash before the compaction file leaves the
// old files (the new ones are orphans, in the journal of unlisted objects),
// after it the new ones, never a mix. The new files are named
//
//	dbs/<db>/<table>/<YYYY-MM-DD>/r<generation %020d>-<n %06d>.parquet
//
// n counting the rewrite's files from 1, so that one generation may
// replace several files of one day (a compaction's merged file is one per
// generation, c<generation>.parquet).

// RewrittenObject names the n-th file of rewrite generation gen.
func RewrittenObject(db, table, partition string, gen uint64, n int) string {
	return fmt.Sprintf("%s%s/%s/%s/r%020d-%06d.parquet", DBsPrefix, escapeSegment(db), escapeSegment(table), partition, gen, n)
}

// RewriteInput is one file of a rewrite and the rows of it that stay.
type RewriteInput struct {
	Generation uint64
	N          int            // the file's number in the rewrite, from 1
	Schema     *catalog.Table // the table: the new file's columns
	// File is the file replaced; Segment the segment its rows are of
	// (its listing's ID), which names nothing but orders the merge.
	File    File
	Segment uint64
	// Chunks are the rows that stay, in the table's column types
	// (strings plain or dictionary-encoded), in any order: the file is
	// sorted as every persisted file is.
	Chunks []Chunk
	Mem    memory.Allocator
}

// WriteRewritten writes the file that replaces in.File and uploads it
// (journaled as unlisted until the compaction file lists it). ok is false
// when no row stays: nothing is written then.
func (s *Store) WriteRewritten(ctx context.Context, in RewriteInput) (_ File, ok bool, err error) {
	var rows int64
	for _, c := range in.Chunks {
		rows += c.Rec.NumRows()
	}
	if rows == 0 {
		return File{}, false, nil
	}
	day, err := parseDay(in.File.Partition)
	if err != nil {
		return File{}, false, err
	}
	p := Part{Segment: in.Segment, Database: in.File.Database, Table: in.File.Table, Day: day, Schema: in.Schema, Chunks: in.Chunks,
		Name: RewrittenObject(in.File.Database, in.File.Table, in.File.Partition, in.Generation, in.N), RowGroupRows: RowGroupRows}
	tmp, err := s.WriteTemp(ctx, p, in.Mem)
	if err != nil {
		return File{}, false, fmt.Errorf("persist: writing the file replacing %s: %w", in.File.Path, err)
	}
	defer tmp.Remove()
	if err := s.UploadParquet(ctx, tmp); err != nil {
		return File{}, false, fmt.Errorf("persist: uploading the file replacing %s: %w", in.File.Path, err)
	}
	return tmp.File(), true, nil
}

// ChunkOf is rec, whose time column is a timestamp[ns] (catalog
// TimeColumn), as a Chunk with its time extremes. rec is not retained.
func ChunkOf(rec arrow.RecordBatch) (Chunk, error) {
	idx := rec.Schema().FieldIndices(catalog.TimeColumn)
	if len(idx) != 1 {
		return Chunk{}, fmt.Errorf("persist: a batch without one %q column", catalog.TimeColumn)
	}
	times, ok := rec.Column(idx[0]).(*array.Timestamp)
	if !ok || times.DataType().(*arrow.TimestampType).Unit != arrow.Nanosecond {
		return Chunk{}, fmt.Errorf("persist: time column of type %s, want timestamp[ns]", rec.Column(idx[0]).DataType())
	}
	c := Chunk{Rec: rec, MinTime: math.MaxInt64, MaxTime: math.MinInt64}
	for i := range times.Len() {
		if times.IsNull(i) {
			return Chunk{}, fmt.Errorf("persist: a null %q", catalog.TimeColumn)
		}
		v := int64(times.Value(i))
		c.MinTime, c.MaxTime = min(c.MinTime, v), max(c.MaxTime, v)
	}
	return c, nil
}
