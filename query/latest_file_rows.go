//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// A persisted file's latest rows per key, for the latest row per key
// without a last-value cache (latest_direct.go) when pruning leaves files.
//
// A file never changes (a delete or a compaction writes another one): its
// row of the greatest time for each value of a key column, NULL
// included, is the same for every query. So it is read once, streaming
// the file's row groups through pqarrow with the key column as a
// dictionary and keeping each value's first row of the greatest time
// (pickLatest over what was kept and the next batch), and kept
// (Engine.fileRows, bounded by defaultFileRowsBytes) as one small batch
// in the buffer's column types. A query then picks among the buffered
// chunks and these batches as among chunks alone. The peer benchmark's
// 200 hosts over its 5M-row table persisted whole: the first query reads
// the file (as DuckDB's aggregate did at each query: 974 ms), the next
// ones pick among 200 rows.
//
// Concurrent first queries of a file read it once (fileRowsFlight). The
// batches are allocated by Go's allocator, not the engine's: the cache
// drops them without a word when it is full, and the garbage collector
// frees them once no query holds them; the cache's reference is never
// released, so a query's Release never frees what another reads.

// fileRows is a file's latest row of each value of a key column.
type fileRows struct {
	chunk buffer.Chunk // no rows for an empty file
	size  int64        // bytes of its buffers
}

// defaultFileRowsBytes bounds the kept rows of files. A value over an
// eighth of it is not kept (lru.put): 16 MiB, about 150,000 series of
// the peer benchmark's nine columns.
const defaultFileRowsBytes = 128 << 20

// fileRowsBatch is how many rows of a file are read at a time.
const fileRowsBatch = 64 << 10

// errFileRowsTypes: a file's column is not of a type the buffer's chunks
// can hold for its table column; DuckDB answers.
var errFileRowsTypes = errors.New("a persisted column's type differs from the table's")

// fileRowsOf returns f's latest row of each value of col (a string column
// of t), from the cache when an earlier query read them.
func (e *Engine) fileRowsOf(ctx context.Context, f persist.File, col string, t *catalog.Table) (*fileRows, error) {
	k := fileKeysKey{fileKey(f), col}
	if r, ok := e.fileRows.get(k); ok {
		return r, nil
	}
	v, err, _ := e.fileRowsFlight.Do(fmt.Sprintf("%s\x00%d\x00%d\x00%s", f.Path, f.Size, f.CRC32C, col), func() (any, error) {
		if r, ok := e.fileRows.peek(k); ok {
			return r, nil
		}
		if e.cache == nil {
			return nil, fmt.Errorf("table %s.%s: %w", f.Database, f.Table, errNoStore)
		}
		path, unpin, err := e.cache.acquire(ctx, f)
		if err != nil {
			return nil, err
		}
		defer unpin()
		pf, err := e.openFooter(path, f)
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		r, err := readFileRows(ctx, pf, col, t, fileRowsBatch)
		if err != nil {
			return nil, fmt.Errorf("reading the latest rows of %q in %s: %w", col, f.Path, err)
		}
		e.fileRowsRead.Add(1)
		e.fileRows.put(k, r, r.size)
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*fileRows), nil
}

// readFileRows reads every row of pf, batch rows at a time, and keeps
// the latest of each value of col.
func readFileRows(ctx context.Context, pf *file.Reader, col string, t *catalog.Table, batch int64) (*fileRows, error) {
	mem := memory.DefaultAllocator
	props := pqarrow.ArrowReadProperties{BatchSize: batch, Parallel: true}
	if ci := pf.MetaData().Schema.ColumnIndexByName(col); ci >= 0 {
		props.SetReadDict(ci, true)
	}
	fr, err := pqarrow.NewFileReader(pf, props, mem)
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var kept []buffer.Chunk
	defer func() {
		for _, c := range kept {
			c.Rec.Release()
		}
	}()
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec := rr.RecordBatch()
		rec.Retain()
		all := append(kept, buffer.Chunk{Rec: rec})
		picks, ok := pickLatest(all, col)
		if !ok {
			rec.Release()
			return nil, fmt.Errorf("%w: %q is not dictionary-encoded strings, or a time is NULL", errFileRowsTypes, col)
		}
		next, err := gatherPicks(all, picks, mem)
		for _, c := range all {
			c.Rec.Release()
		}
		kept = next
		if err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	return joinFileRows(kept, col, t, mem)
}

// joinFileRows makes one batch of kept, in t's types: col re-encoded
// with a dictionary of its values alone (each of kept's holds the
// dictionary of the row group it was read from).
func joinFileRows(kept []buffer.Chunk, col string, t *catalog.Table, mem memory.Allocator) (*fileRows, error) {
	if len(kept) == 0 {
		return &fileRows{}, nil
	}
	schema := kept[0].Rec.Schema()
	fields := make([]arrow.Field, schema.NumFields())
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(kept))
	var rows int64
	span := timeBounds{kept[0].MinTime, kept[0].MaxTime}
	for _, c := range kept {
		if !c.Rec.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: the file's batches differ in schema", errFileRowsTypes)
		}
		rows += c.Rec.NumRows()
		span.min, span.max = min(span.min, c.MinTime), max(span.max, c.MaxTime)
	}
	var size int64
	for i, fl := range schema.Fields() {
		tc, ok := tableColumn(t, fl.Name)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a column of the table", errFileRowsTypes, fl.Name)
		}
		for j, c := range kept {
			parts[j] = c.Rec.Column(i)
		}
		var err error
		if fl.Name == col {
			cols[i], err = dictionaryOfStrings(parts, mem)
			fields[i] = arrow.Field{Name: fl.Name, Type: cols[i].DataType(), Nullable: true}
		} else {
			cols[i], err = conformColumn(parts, tc.Type, mem)
			fields[i] = arrow.Field{Name: fl.Name, Type: cols[i].DataType(), Nullable: true}
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", fl.Name, err)
		}
		for _, b := range cols[i].Data().Buffers() {
			if b != nil {
				size += int64(b.Len())
			}
		}
		if d, ok := cols[i].(*array.Dictionary); ok {
			for _, b := range d.Dictionary().Data().Buffers() {
				if b != nil {
					size += int64(b.Len())
				}
			}
		}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rows)
	return &fileRows{chunk: buffer.Chunk{Rec: rec, MinTime: span.min, MaxTime: span.max}, size: size + 256}, nil
}

// tableColumn is t's column name.
func tableColumn(t *catalog.Table, name string) (catalog.Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return catalog.Column{}, false
}

// dictionaryOfStrings joins dictionary-encoded string columns into one
// with a dictionary of the values they hold.
func dictionaryOfStrings(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	for _, p := range parts {
		d, ok := p.(*array.Dictionary)
		if !ok {
			return nil, fmt.Errorf("%w: %s, not dictionary-encoded strings", errFileRowsTypes, p.DataType())
		}
		values, ok := d.Dictionary().(*array.String)
		if !ok {
			return nil, fmt.Errorf("%w: a dictionary of %s, not of strings", errFileRowsTypes, d.Dictionary().DataType())
		}
		for r := range d.Len() {
			if d.IsNull(r) {
				b.AppendNull()
				continue
			}
			if err := b.AppendString(values.Value(d.GetValueIndex(r))); err != nil {
				return nil, err
			}
		}
	}
	return b.NewArray(), nil
}

// conformColumn joins parts into one column of the buffer's type for a
// table column of type want: strings as they are (the direct scan decodes
// them, direct.go), other types when the file's is want or has its layout
// (a timestamp read back with another zone or unit name).
func conformColumn(parts []arrow.Array, want arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	a, err := array.Concatenate(parts, mem)
	if err != nil {
		return nil, err
	}
	got := a.DataType()
	switch {
	case arrow.TypeEqual(got, want):
		return a, nil
	case want.ID() == arrow.STRING && (got.ID() == arrow.STRING || got.ID() == arrow.DICTIONARY):
		return a, nil
	case got.ID() == want.ID() && want.ID() != arrow.DICTIONARY && sameTimestampUnit(got, want):
		d := array.NewData(want, a.Len(), a.Data().Buffers(), nil, a.NullN(), a.Data().Offset())
		a.Release()
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	a.Release()
	return nil, fmt.Errorf("%w: %s in the file, %s in the table", errFileRowsTypes, got, want)
}

// sameTimestampUnit says whether got and want, of one type ID, have one
// layout: any but timestamps of two units.
func sameTimestampUnit(got, want arrow.DataType) bool {
	g, ok1 := got.(*arrow.TimestampType)
	w, ok2 := want.(*arrow.TimestampType)
	if ok1 != ok2 {
		return false
	}
	return !ok1 || g.Unit == w.Unit
}
