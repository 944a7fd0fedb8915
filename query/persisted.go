//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// parquetBatchRows is how many rows pqarrow decodes of a persisted file at
// a time (fileReader); the scan then hands DuckDB vectorSize rows of a
// batch per call.
const parquetBatchRows = 8 << 10

// parquetFile is a persisted file opened for a scan: its footer read, the
// row groups that may hold rows within the scan's time bounds found. The
// native decoder (pq*.go) or a fileReader reads it.
type parquetFile struct {
	f      persist.File
	unpin  func()
	pf     *file.Reader
	groups []int
}

// openParquet opens f for the scan, or returns nil when none of its row
// groups can match.
func (g *scanGlobal) openParquet(f persist.File) (_ *parquetFile, err error) {
	e := g.bind.e
	if e.cache == nil {
		return nil, fmt.Errorf("table %s.%s: %w", f.Database, f.Table, errNoStore)
	}
	path, unpin, err := e.cache.acquire(g.ctx, f)
	if err != nil {
		return nil, err
	}
	p := &parquetFile{f: f, unpin: unpin}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.pf, err = e.openFooter(path, f); err != nil {
		return nil, err
	}
	gs := e.groupStatsOf(f, p.pf.MetaData())

	// Row groups whose time statistics cannot match are skipped, and
	// those whose string statistics hold none of the values the query
	// wants.
	b := g.bounds
	for i, rows := range gs.rows {
		if rows == 0 {
			continue
		}
		if b != allTime && gs.timeOK[i] && (gs.timeHi[i] < b.min || gs.timeLo[i] > b.max) {
			e.rowGroupsPruned.Add(1)
			continue
		}
		if gs.excludedByEquals(i, g.equals) {
			e.rowGroupsPruned.Add(1)
			continue
		}
		p.groups = append(p.groups, i)
	}
	e.rowGroupsScanned.Add(int64(len(p.groups)))
	if len(p.groups) == 0 {
		p.close()
		return nil, nil
	}
	return p, nil
}

// parquetReadBuffer is what a column chunk's reader reads of the file at a
// time. Without a buffered stream, arrow-go reads the whole column chunk
// (a megabyte and more of a 128k-row group) into a new slice for every
// column a scan opens, where a selective query needs one page of it (see
// pqrange.go); a page larger than the buffer grows it. The buffer is a
// new allocation of every column reader (arrow-go takes no allocator for
// it), so it starts at the 16 KiB arrow-go peeks for a page header and
// grows to the page a reader meets: at 128 KiB it was 58% of the bytes
// a query of one series over a persisted file allocated, and the GC that
// followed, for pages of 16-64 KiB.
const parquetReadBuffer = 16 << 10

// parquetReadProps are the properties persisted files are read with: the
// page readers' decompression buffers from the scan recycler (not
// garbage), and column chunks read through a buffer
// (parquetReadBuffer), not whole.
func (e *Engine) parquetReadProps() *parquet.ReaderProperties {
	props := parquet.NewReaderProperties(e.scanMem)
	props.BufferedStreamEnabled = true
	props.BufferSize = parquetReadBuffer
	return props
}

func (p *parquetFile) close() {
	if p.pf != nil {
		p.pf.Close()
		p.pf = nil
	}
	if p.unpin != nil {
		p.unpin()
		p.unpin = nil
	}
}

// fileReader is one scan thread's open persisted file read through
// pqarrow: its row groups decoded a batch at a time into records of the
// table's declared types, ready to be read like buffered chunks. It reads
// what the native decoder does not (see pqPlan), and direct scans.
type fileReader struct {
	g       *scanGlobal
	p       *parquetFile
	rr      pqarrow.RecordReader
	fields  []arrow.Field // of the records handed out: declared names and types
	counts  []int64       // with no column wanted: rows of the row groups left
	scratch context.Context
}

// openFile opens f for the scan, or returns nil when none of its row
// groups can match.
func (g *scanGlobal) openFile(f persist.File) (*fileReader, error) {
	p, err := g.openParquet(f)
	if err != nil || p == nil {
		return nil, err
	}
	return g.newFileReader(p)
}

// newFileReader reads p through pqarrow; it owns p from then on, also on
// error.
func (g *scanGlobal) newFileReader(p *parquetFile) (_ *fileReader, err error) {
	e := g.bind.e
	r := &fileReader{g: g, p: p, scratch: compute.WithAllocator(g.ctx, e.wb.Allocator())}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	mem := e.wb.Allocator()
	md := p.pf.MetaData()

	// The wanted columns the file has, in the order of the table; strings
	// read as dictionaries, as the buffer has them (Parquet stores them
	// dictionary-encoded: the indices are taken over, not the values
	// hashed again).
	var cols []int
	var props pqarrow.ArrowReadProperties
	props.BatchSize = parquetBatchRows
	seen := map[int]bool{}
	for _, tc := range g.proj {
		if tc < 0 || seen[tc] {
			continue
		}
		seen[tc] = true
		want := g.bind.fields[tc]
		leaf := md.Schema.ColumnIndexByName(want.Name)
		if leaf < 0 {
			continue // the file predates the column: NULLs
		}
		if want.Type.ID() == arrow.DICTIONARY {
			props.SetReadDict(leaf, true)
		}
		cols = append(cols, leaf)
		r.fields = append(r.fields, arrow.Field{Name: want.Name, Type: want.Type, Nullable: true})
	}
	if len(cols) == 0 {
		for _, i := range p.groups {
			r.counts = append(r.counts, md.RowGroup(i).NumRows())
		}
		return r, nil
	}
	fr, err := pqarrow.NewFileReader(p.pf, props, mem)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.f.Path, err)
	}
	if r.rr, err = fr.GetRecordReader(g.ctx, cols, p.groups); err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.f.Path, err)
	}
	return r, nil
}

// next returns the next batch as a chunk (retained: the caller releases
// its Rec), or false at the end of the file.
func (r *fileReader) next() (buffer.Chunk, bool, error) {
	mem := r.g.bind.e.wb.Allocator()
	if r.rr == nil {
		if len(r.counts) == 0 {
			return buffer.Chunk{}, false, nil
		}
		n := r.counts[0]
		r.counts = r.counts[1:]
		return buffer.Chunk{Rec: array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, n)}, true, nil
	}
	for r.rr.Next() {
		rec := r.rr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		cols := make([]arrow.Array, len(r.fields))
		for i, f := range r.fields {
			c, err := convertArray(r.scratch, rec.Column(i), f.Type, mem)
			if err != nil {
				for _, c := range cols[:i] {
					c.Release()
				}
				return buffer.Chunk{}, false, fmt.Errorf("reading %s: column %q: %w", r.p.f.Path, f.Name, err)
			}
			cols[i] = c
		}
		out := array.NewRecordBatch(arrow.NewSchema(r.fields, nil), cols, rec.NumRows())
		for _, c := range cols {
			c.Release()
		}
		return buffer.Chunk{Rec: out}, true, nil
	}
	if err := r.rr.Err(); err != nil {
		return buffer.Chunk{}, false, fmt.Errorf("reading %s: %w", r.p.f.Path, err)
	}
	return buffer.Chunk{}, false, nil
}

func (r *fileReader) close() {
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
	if r.p != nil {
		r.p.close()
		r.p = nil
	}
}

// convertArray returns a as type want, retained: as is when it already
// is, re-typed without copying when only the type's metadata differs
// (a timestamp's zone), strings dictionary-encoded, else cast.
func convertArray(ctx context.Context, a arrow.Array, want arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	have := a.DataType()
	if arrow.TypeEqual(have, want) {
		a.Retain()
		return a, nil
	}
	if hw, ok := have.(arrow.FixedWidthDataType); ok && have.ID() == want.ID() && sameUnit(have, want) {
		if ww, ok := want.(arrow.FixedWidthDataType); ok && hw.BitWidth() == ww.BitWidth() {
			d := a.Data()
			nd := array.NewData(want, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
			defer nd.Release()
			return array.MakeFromData(nd), nil
		}
	}
	if wd, ok := want.(*arrow.DictionaryType); ok && (have.ID() == arrow.STRING || have.ID() == arrow.LARGE_STRING) {
		b := array.NewDictionaryBuilder(mem, wd)
		defer b.Release()
		if err := b.AppendArray(a); err != nil {
			return nil, err
		}
		return b.NewArray(), nil
	}
	if hd, ok := have.(*arrow.DictionaryType); ok {
		// Decode, then encode as wanted.
		plain, err := compute.CastArray(ctx, a, compute.SafeCastOptions(hd.ValueType))
		if err != nil {
			return nil, fmt.Errorf("%s as %s: %w", have, want, err)
		}
		defer plain.Release()
		return convertArray(ctx, plain, want, mem)
	}
	out, err := compute.CastArray(ctx, a, compute.SafeCastOptions(want))
	if err != nil {
		return nil, fmt.Errorf("%s as %s: %w", have, want, err)
	}
	return out, nil
}

// sameUnit says whether two types of one ID count in the same unit: a
// timestamp[s] column comes back from Parquet as timestamp[ms] (Parquet
// has no seconds), whose values must be converted, not re-typed.
func sameUnit(a, b arrow.DataType) bool {
	at, ok := a.(*arrow.TimestampType)
	if !ok {
		return true
	}
	bt, ok := b.(*arrow.TimestampType)
	return ok && at.Unit == bt.Unit
}
