package persist

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
)

// CompactInput is one compaction: files of one table and day, merged
// into one file in the table's current columns.
type CompactInput struct {
	Generation             uint64
	Database, Table        string
	Partition              string // YYYY-MM-DD
	Schema                 *catalog.Table
	Files                  []File
	MinSegment, MaxSegment uint64
	// Cutoff drops the rows older than it (retention); math.MinInt64
	// keeps every row.
	Cutoff int64
	Mem    memory.Allocator
	// Pace, if set, is called between the batches read and written.
	Pace Pacer
}

// Compact merges in.Files: reads them, writes the merged file (sorted as
// every persisted file is, parquet.go), uploads it and commits with the
// compaction file. It returns the committed compaction. On error nothing
// is committed (an uploaded merged file is an orphan until startup).
//
// Files that declare that order (every file Apron writes) are merged as
// they are read, a batch of each at a time (compact_merge.go), in memory
// bounded by the files' count, not their rows; others are read whole and
// sorted as a segment's rows are.
func (s *Store) Compact(ctx context.Context, in CompactInput) (Compaction, error) {
	var inputs []*compactFile
	defer func() {
		for _, f := range inputs {
			f.close()
		}
	}()
	for _, f := range in.Files {
		if f.MaxTime < in.Cutoff {
			continue // every row expired
		}
		cf, err := s.openForCompaction(ctx, f)
		if err != nil {
			return Compaction{}, err
		}
		inputs = append(inputs, cf)
	}
	c := Compaction{Generation: in.Generation, MinSegment: in.MinSegment, MaxSegment: in.MaxSegment}
	for _, f := range in.Files {
		c.Replaces = append(c.Replaces, f.Path)
	}
	if len(inputs) > 0 {
		f, err := s.writeCompacted(ctx, inputs, in)
		if err != nil {
			return Compaction{}, fmt.Errorf("persist: writing the merged file of %s.%s %s: %w", in.Database, in.Table, in.Partition, err)
		}
		if f != nil {
			defer f.Remove()
			if err := s.UploadParquet(ctx, f); err != nil {
				return Compaction{}, err
			}
			c.Files = []File{f.File()}
		}
	}
	// Every row expired: the compaction replaces the files with none.
	if err := s.PutCompactionFile(ctx, c); err != nil {
		return Compaction{}, err
	}
	return c, nil
}

// writeCompacted writes the merged file of inputs into a temporary file;
// nil if no row is left.
func (s *Store) writeCompacted(ctx context.Context, inputs []*compactFile, in CompactInput) (*TempFile, error) {
	day, err := parseDay(in.Partition)
	if err != nil {
		return nil, err
	}
	name := CompactedObject(in.Database, in.Table, in.Partition, in.Generation)
	if !mergeable(inputs, in.Schema) {
		s.log.Warn("compaction inputs do not declare the order of Apron's files; reading them whole into memory to sort them",
			"database", in.Database, "table", in.Table, "partition", in.Partition, "files", len(inputs))
		return s.writeSortedWhole(ctx, name, day, inputs, in)
	}
	f, err := s.writeTemp(ctx, name, in.Database, in.Table, day, func(w io.Writer) (partFile, error) {
		return s.writeMerged(ctx, w, inputs, in)
	})
	if err != nil || f.file.Rows > 0 {
		return f, err
	}
	f.Remove()
	return nil, nil
}

// writeSortedWhole writes the merged file of inputs as a segment's file
// is written: every row read into memory, then sorted.
func (s *Store) writeSortedWhole(ctx context.Context, name string, day int64, inputs []*compactFile, in CompactInput) (*TempFile, error) {
	var chunks []Chunk
	defer func() { releaseChunks(chunks) }()
	for _, f := range inputs {
		cs, err := f.readAll(ctx, in)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, cs...)
	}
	if len(chunks) == 0 {
		return nil, nil
	}
	p := Part{Segment: in.MaxSegment, Database: in.Database, Table: in.Table, Day: day, Schema: in.Schema, Chunks: chunks,
		Name: name, RowGroupRows: RowGroupRows, Pace: in.Pace}
	return s.WriteTemp(ctx, p, in.Mem)
}

// compactFile is an input file of a compaction, copied from the store
// into a temporary file and open.
type compactFile struct {
	f   File
	tmp TempHandle
	pf  *file.Reader
}

func (s *Store) openForCompaction(ctx context.Context, f File) (_ *compactFile, err error) {
	r, err := s.objects.Get(ctx, f.Path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.Path, err)
	}
	defer r.Close()
	tmp, err := s.createTemp("compact-*.parquet")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.Path, err)
	}
	// Column chunks are read through a buffer, not whole: a merge reads
	// every input at once.
	props := parquet.NewReaderProperties(memory.NewGoAllocator())
	props.BufferedStreamEnabled = true
	pf, err := file.NewParquetReader(tmp, file.WithReadProps(props))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.Path, err)
	}
	return &compactFile{f: f, tmp: tmp, pf: pf}, nil
}

func (f *compactFile) close() {
	f.pf.Close()
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}

// records returns a reader of f's rows in batches of batchRows; the
// columns dict names (true: every string column of in.Schema) read
// dictionary-encoded; only the columns of leaves, nil for all.
func (f *compactFile) records(ctx context.Context, in CompactInput, batchRows int64, dict func(name string) bool, leaves []int) (pqarrow.RecordReader, error) {
	props := pqarrow.ArrowReadProperties{BatchSize: batchRows}
	for i := 0; i < f.pf.MetaData().Schema.NumColumns(); i++ {
		name := f.pf.MetaData().Schema.Column(i).Name()
		if col, _, ok := in.Schema.Column(name); ok && col.Type.ID() == arrow.STRING && dict(name) {
			props.SetReadDict(i, true)
		}
	}
	// The Go allocator, not in.Mem: arrow-go v18.8.0's record reader
	// leaks a few buffers of its allocator when a read fails half-way (a
	// store that fails mid-compaction); the garbage collector takes them.
	fr, err := pqarrow.NewFileReader(f.pf, props, memory.NewGoAllocator())
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.f.Path, err)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.f.Path, err)
	}
	return rr, nil
}

func everyString(string) bool { return true }

// readAll reads f's rows as chunks in in.Schema's columns (strings
// dictionary-encoded, as the Parquet writer takes them), without the rows
// older than in.Cutoff.
func (f *compactFile) readAll(ctx context.Context, in CompactInput) ([]Chunk, error) {
	rr, err := f.records(ctx, in, 64<<10, everyString, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []Chunk
	for rr.Next() {
		c, err := compactionChunk(ctx, rr.RecordBatch(), in, memory.NewGoAllocator(), true)
		if err != nil {
			releaseChunks(out)
			return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.f.Path, err)
		}
		if c.Rec != nil {
			out = append(out, c)
		}
		if in.Pace != nil {
			if err := in.Pace(); err != nil {
				releaseChunks(out)
				return nil, err
			}
		}
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		releaseChunks(out)
		return nil, fmt.Errorf("%w %s: %w", errCompactionInput, f.f.Path, err)
	}
	return out, nil
}

func releaseChunks(cs []Chunk) {
	for _, c := range cs {
		c.Rec.Release()
	}
}

// compactionChunk is rec (a batch read from a file) in the table's column
// types, where the file's differ only as Parquet makes them (a timestamp's
// unit or zone), without the rows older than in.Cutoff; a nil Rec when
// none is left. keep says it is kept beside others (tight).
func compactionChunk(ctx context.Context, rec arrow.RecordBatch, in CompactInput, mem memory.Allocator, keep bool) (Chunk, error) {
	cctx := compute.WithAllocator(ctx, mem)
	fields := make([]arrow.Field, 0, rec.NumCols())
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, f := range rec.Schema().Fields() {
		col, _, ok := in.Schema.Column(f.Name)
		if !ok {
			continue // not a column of the table (cannot happen for Apron's files)
		}
		a := rec.Column(i)
		switch {
		case arrow.TypeEqual(a.DataType(), col.Type),
			col.Type.ID() == arrow.STRING && a.DataType().ID() == arrow.DICTIONARY:
			if keep {
				a = tight(a, mem)
			} else {
				a.Retain()
			}
		case col.Type.ID() == arrow.TIMESTAMP && a.DataType().ID() == arrow.TIMESTAMP:
			cast, err := compute.CastArray(cctx, a, compute.SafeCastOptions(col.Type))
			if err != nil {
				return Chunk{}, fmt.Errorf("column %q: %w", f.Name, err)
			}
			a = cast
		default:
			return Chunk{}, fmt.Errorf("column %q is %s in the file, %s in the table", f.Name, a.DataType(), col.Type)
		}
		fields = append(fields, arrow.Field{Name: col.Name, Type: a.DataType(), Nullable: true})
		cols = append(cols, a)
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	if in.Cutoff != math.MinInt64 {
		live, err := KeepSince(out, in.Cutoff, mem)
		out.Release()
		if err != nil {
			return Chunk{}, err
		}
		out = live
	}
	if out.NumRows() == 0 {
		out.Release()
		return Chunk{}, nil
	}
	c := Chunk{Rec: out, MinTime: math.MaxInt64, MaxTime: math.MinInt64}
	times := out.Column(0).(*array.Timestamp)
	for i := range times.Len() {
		v := int64(times.Value(i))
		c.MinTime, c.MaxTime = min(c.MinTime, v), max(c.MaxTime, v)
	}
	return c, nil
}

// tight is a, retained, or a copy of it whose buffers hold no more room
// than their bytes. The Parquet record reader grows its buffers by powers
// of two and hands them to the batch, room and all; a compaction holds a
// day's batches at once, and with the room they took several times the
// memory of their rows (a day of 1.7M rows: 305 MB instead of ~50).
func tight(a arrow.Array, mem memory.Allocator) arrow.Array {
	d := a.Data()
	out := slices.Clone(d.Buffers())
	copied := false
	for i, b := range out {
		// Not b.Cap(): the Go allocator shrinks a buffer by reslicing
		// it, and the room stays behind the slice's capacity.
		if b == nil || cap(b.Buf()) <= b.Len()+b.Len()/8+4096 {
			continue
		}
		nb := memory.NewResizableBuffer(mem)
		nb.Resize(b.Len())
		copy(nb.Bytes(), b.Bytes())
		defer nb.Release() // NewData below takes its own reference
		out[i], copied = nb, true
	}
	if !copied {
		a.Retain()
		return a
	}
	nd := array.NewData(d.DataType(), d.Len(), out, d.Children(), d.NullN(), d.Offset())
	defer nd.Release()
	if dict := d.Dictionary(); dict != nil {
		nd.SetDictionary(dict)
	}
	return array.MakeFromData(nd)
}

// KeepSince returns the rows of rec whose time is at or after cutoff (ns).
func KeepSince(rec arrow.RecordBatch, cutoff int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	idx := rec.Schema().FieldIndices(catalog.TimeColumn)
	if len(idx) != 1 {
		return nil, fmt.Errorf("persist: a batch without its time column")
	}
	times, ok := rec.Column(idx[0]).(*array.Timestamp)
	if !ok || times.DataType().(*arrow.TimestampType).Unit != arrow.Nanosecond {
		return nil, fmt.Errorf("persist: time column of type %s", rec.Column(idx[0]).DataType())
	}
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.Reserve(times.Len())
	for i := range times.Len() {
		b.UnsafeAppend(times.IsValid(i) && int64(times.Value(i)) >= cutoff)
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(compute.WithAllocator(context.Background(), mem), rec, mask, compute.DefaultFilterOptions())
}
