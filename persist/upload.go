package persist

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
)

// The upload steps of the persist protocol (doc.go). Each makes one
// attempt; the buffer's persister retries it, with a timeout on each.

// PutCatalog stores data, the catalog file of version v, as
// catalogs/<v>.json, unless the store has it already (putImmutable); then
// CatalogVersion is v.
func (s *Store) PutCatalog(ctx context.Context, v uint64, data []byte) error {
	crc := objstore.CRC32C(data)
	if err := s.putImmutable(ctx, CatalogObject(v), func() io.Reader { return bytes.NewReader(data) }, int64(len(data)), crc, false); err != nil {
		return err
	}
	s.catVersion.Store(v)
	return nil
}

// PutSegmentFile stores data, the segment file of segment id
// (EncodeSegmentFile), unless the store has it already (putImmutable): the
// commit point of the segment's persist.
func (s *Store) PutSegmentFile(ctx context.Context, id uint64, data []byte) error {
	crc := objstore.CRC32C(data)
	return s.putImmutable(ctx, SegmentObject(id), func() io.Reader { return bytes.NewReader(data) }, int64(len(data)), crc, false)
}

// Part is one table's rows of one UTC day written during one segment: the
// contents of one Parquet file.
type Part struct {
	Segment         uint64
	Database, Table string
	Day             int64          // days since the epoch, UTC
	Schema          *catalog.Table // the table at persist time: the file's columns
	Chunks          []Chunk
	// Name, if set, is the object name instead of the segment's file
	// (a compaction's merged file).
	Name string
	// RowGroupRows bounds the rows of a row group; 0 is
	// SegmentRowGroupRows.
	RowGroupRows int64
	// Pace, if set, is called between the batches the file is written in;
	// an error from it ends the write with that error (Pacer).
	Pace Pacer
}

// A Pacer is called between the steps of long work (a compaction's reads
// and its merged file's batches, a few ms each) so that its caller can
// let other work run first: wait, or do that work there and then. An
// error from it ends the work, with that error, before anything is
// committed.
type Pacer func() error

// Object is the name of the part's Parquet file.
func (p *Part) Object() string {
	if p.Name != "" {
		return p.Name
	}
	return ParquetObject(p.Database, p.Table, p.Day, p.Segment)
}

// TempFile is a Part written as Parquet into a temporary file of the data
// dir, to be uploaded by UploadParquet.
type TempFile struct {
	f    TempHandle
	file File
}

// File is the file's entry in its segment file.
func (t *TempFile) File() File { return t.file }

// Size is the file's size in bytes.
func (t *TempFile) Size() int64 { return t.file.Size }

// Remove closes and removes the temporary file.
func (t *TempFile) Remove() {
	t.f.Close()
	os.Remove(t.f.Name())
}

// WriteTemp writes p as Parquet (parquet.go) into a temporary file under
// <data-dir>/persist, computing its CRC32C on the way. Once ctx ends, the
// encoding fails at its next write. mem is the allocator of the encoding
// (see writePartition).
func (s *Store) WriteTemp(ctx context.Context, p Part, mem memory.Allocator) (*TempFile, error) {
	groupRows := p.RowGroupRows
	if groupRows <= 0 {
		groupRows = SegmentRowGroupRows
	}
	return s.writeTemp(ctx, p.Object(), p.Database, p.Table, p.Day, func(w io.Writer) (partFile, error) {
		return writePartition(w, p.Schema, p.Chunks, mem, groupRows, p.Pace, s.slots)
	})
}

// writeTemp writes the Parquet file write writes, object name of table
// db.table's partition day, into a temporary file under <data-dir>/persist,
// computing its CRC32C on the way. Once ctx ends, the writes fail.
func (s *Store) writeTemp(ctx context.Context, name, db, table string, day int64, write func(io.Writer) (partFile, error)) (_ *TempFile, err error) {
	f, err := s.createTemp("part-*.parquet")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	cw := &countingWriter{ctx: ctx, w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	pf, err := write(bw)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return &TempFile{f: f, file: File{Path: name, URI: s.objects.URI(name), Size: cw.n, CRC32C: h.Sum32(), Rows: pf.Rows,
		MinTime: pf.MinTime, MaxTime: pf.MaxTime, Database: db, Table: table, Partition: partitionName(day)}}, nil
}

// UploadParquet uploads t under its name (putImmutable: a different object
// there is an orphan of an earlier attempt, and is replaced), once the
// name is in the journal of unlisted objects (unlisted.go): until the
// listing that names it is stored, it is an orphan if the process dies.
func (s *Store) UploadParquet(ctx context.Context, t *TempFile) error {
	size, crc := t.file.Size, t.file.CRC32C
	if err := s.NoteUnlisted(t.file.Path); err != nil {
		return err
	}
	return s.putImmutable(ctx, t.file.Path, func() io.Reader { return io.NewSectionReader(t.f, 0, size) }, size, crc, true)
}

// countingWriter counts what the Parquet writer writes, and fails once
// ctx ends: a cancelled persist stops encoding at its next write instead
// of finishing a file nobody will upload.
type countingWriter struct {
	ctx context.Context
	w   io.Writer
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// putImmutable stores an object under a deterministic name with
// MustNotExist. If the name is taken by the same bytes (size and CRC32C),
// an earlier attempt landed: done. If by other bytes, it is an error,
// unless overwrite: Parquet files are listed by no segment file until their
// segment file is written, so a different one is an orphan of an earlier
// attempt, and is replaced.
func (s *Store) putImmutable(ctx context.Context, name string, data func() io.Reader, size int64, crc uint32, overwrite bool) error {
	store := s.objects
	err := store.Put(ctx, name, data(), size, objstore.PutOptions{MustNotExist: true, CRC32C: &crc})
	if !errors.Is(err, objstore.ErrExists) {
		return err
	}
	a, err := store.Attributes(ctx, name)
	if err != nil {
		return err
	}
	if a.Size == size && a.CRC32C == crc {
		s.log.Info("object already in the store from an earlier attempt", "object", name, "size", size)
		return nil
	}
	if !overwrite {
		return fmt.Errorf("%s exists with other content (size %d crc32c %08x, want %d %08x): another server writing to the same store?",
			name, a.Size, a.CRC32C, size, crc)
	}
	s.log.Warn("replacing an unlisted Parquet file left by an earlier attempt", "object", name, "old_size", a.Size, "size", size)
	return store.Put(ctx, name, data(), size, objstore.PutOptions{CRC32C: &crc})
}
