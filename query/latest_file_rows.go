//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
// the file through pqarrow (readFileRows: its key, as a dictionary, and
// time columns to pick each value's first row of the greatest time,
// then every column to take those rows), and kept
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

// fileRows is a file's latest row of each value of a key column, or of
// each combination of values of several (latest_multi.go).
type fileRows struct {
	chunk buffer.Chunk // no rows for an empty file
	size  int64        // bytes of its buffers
	// unusable, when set, says why the file's rows cannot stand for it
	// (errFileRowsTypes: a column read back as a type other than the
	// table's, a date64 as date32, a timestamp[s] as [ms]). Kept as the
	// rows would be, so that DuckDB answers without the file being read
	// again for nothing.
	unusable error
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

// fileRowsOf returns f's latest row of each value of cols (string columns
// of t: one, or the combinations of several), from the cache when an
// earlier query read them; parallel reads the file's columns on every
// core. read says whether this call read the file (not the cache, nor
// another call reading it at once).
func (e *Engine) fileRowsOf(ctx context.Context, f persist.File, cols []string, t *catalog.Table, parallel bool) (_ *fileRows, read bool, _ error) {
	spec := keySpec(cols)
	k := fileKeysKey{fileKey(f), spec}
	if r, ok := e.fileRows.get(k); ok {
		return r, false, nil
	}
	v, err, _ := e.fileRowsFlight.Do(fmt.Sprintf("%s\x00%d\x00%d\x00%s", f.Path, f.Size, f.CRC32C, spec), func() (any, error) {
		if r, ok := e.fileRows.peek(k); ok {
			return r, nil
		}
		var r *fileRows
		err := e.readPersisted(ctx, f, func(pf *file.Reader) (err error) {
			r, err = readFileRows(ctx, pf, cols, t, fileRowsBatch, parallel)
			return err
		})
		if errors.Is(err, errFileRowsTypes) {
			r = &fileRows{unusable: fmt.Errorf("the latest rows of %q in %s: %w", cols, f.Path, err), size: 256}
		} else if err != nil {
			return nil, fmt.Errorf("reading the latest rows of %q in %s: %w", cols, f.Path, err)
		}
		e.fileRowsRead.Add(1)
		e.fileRows.put(k, r, r.size)
		read = true
		return r, nil
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*fileRows), read, nil
}

// readFileRows reads pf, batch rows at a time (its columns in parallel
// with parallel), for the latest row of each value of cols (of each
// combination, for several): its key and time columns first, to pick
// those rows; then every column, taking the rows picked. Picking as the rows are read, all columns at once, took
// 504 ms for 2M rows of 100,000 series (BenchmarkLatestPersisted), the
// kept rows gathered again with every batch; in two passes, each row is
// gathered once: 220-269 ms.
func readFileRows(ctx context.Context, pf *file.Reader, cols []string, t *catalog.Table, batch int64, parallel bool) (*fileRows, error) {
	mem := memory.DefaultAllocator
	sch := pf.MetaData().Schema
	tc := sch.ColumnIndexByName(buffer.TimeColumn)
	if tc < 0 {
		return nil, fmt.Errorf("%w: no %s column", errFileRowsTypes, buffer.TimeColumn)
	}
	props := pqarrow.ArrowReadProperties{BatchSize: batch, Parallel: parallel}
	leaves := []int{tc}
	for _, col := range cols {
		// A key column the file lacks (added later) is NULL in its rows.
		if kc := sch.ColumnIndexByName(col); kc >= 0 {
			props.SetReadDict(kc, true)
			leaves = append(leaves, kc)
		}
	}
	fr, err := pqarrow.NewFileReader(pf, props, mem)
	if err != nil {
		return nil, err
	}
	rows, err := pickFileRows(ctx, fr, leaves, cols)
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
	var at int64 // the file's row of the batch's first
	for rr.Next() && len(rows) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec := rr.RecordBatch()
		var sel []int32
		for len(rows) > 0 && rows[0] < at+rec.NumRows() {
			sel = append(sel, int32(rows[0]-at))
			rows = rows[1:]
		}
		at += rec.NumRows()
		if len(sel) == 0 {
			continue
		}
		cols, err := takeColumns(mem, rec.Columns(), sel)
		if err != nil {
			return nil, err
		}
		taken := array.NewRecordBatch(rec.Schema(), cols, int64(len(sel)))
		for _, a := range cols {
			a.Release()
		}
		kept = append(kept, buffer.Chunk{Rec: taken})
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		return nil, fmt.Errorf("the file ended %d rows before its last picked row", rows[len(rows)-1]-at+1)
	}
	return joinFileRows(kept, cols, t, mem)
}

// pickFileRows returns the file's rows (by position, in order) of the
// latest of each value of cols (of each combination, for several),
// reading only leaves (its time and key columns).
func pickFileRows(ctx context.Context, fr *pqarrow.FileReader, leaves []int, cols []string) ([]int64, error) {
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	// Key values are copied (clone): a batch's dictionary is not kept.
	var (
		one   *latestPicker
		multi *multiPicker
		add   func(ci int, rec arrow.RecordBatch) bool
	)
	if len(cols) == 1 {
		one = newLatestPicker(cols[0], 0, true)
		add = func(ci int, rec arrow.RecordBatch) bool { return one.add(ci, rec, nil) }
	} else {
		multi = newMultiPicker(cols)
		add = multi.add
	}
	var starts []int64 // of each batch, in the file's rows
	var at int64
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec := rr.RecordBatch()
		starts = append(starts, at)
		if !add(len(starts)-1, rec) {
			return nil, fmt.Errorf("%w: %q: not dictionary-encoded strings, of more values or combinations than are picked among (%d), or a time is NULL", errFileRowsTypes, cols, maxPicks)
		}
		at += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	var picks []latestPick
	if one != nil {
		picks = one.picks
	} else {
		picks = multi.picks
	}
	rows := make([]int64, len(picks))
	for i, pk := range picks {
		rows[i] = starts[pk.chunk] + int64(pk.row)
	}
	slices.Sort(rows)
	return rows, nil
}

// joinFileRows makes one batch of kept, in t's types: the key columns
// cols re-encoded with a dictionary of their values alone (each of kept's
// holds the dictionary of the row group it was read from).
func joinFileRows(kept []buffer.Chunk, keys []string, t *catalog.Table, mem memory.Allocator) (*fileRows, error) {
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
	for _, c := range kept {
		if !c.Rec.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: the file's batches differ in schema", errFileRowsTypes)
		}
		rows += c.Rec.NumRows()
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
		if slices.Contains(keys, fl.Name) || tc.Type.ID() == arrow.STRING {
			// Every string column as the buffer holds it: DuckDB's scan
			// is given these rows as a chunk (latest_file_swap.go).
			cols[i], err = dictionaryOfStrings(parts, mem)
		} else {
			cols[i], err = conformColumn(parts, tc.Type, mem)
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", fl.Name, err)
		}
		fields[i] = arrow.Field{Name: fl.Name, Type: cols[i].DataType(), Nullable: true}
		size += arraySize(cols[i])
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rows)
	c := buffer.Chunk{Rec: rec}
	ts, ok := timeColumn(rec)
	if !ok || ts.NullN() > 0 {
		rec.Release()
		return nil, fmt.Errorf("%w: the time column is not timestamps without NULL", errFileRowsTypes)
	}
	for i, v := range ts.TimestampValues() {
		if i == 0 || int64(v) < c.MinTime {
			c.MinTime = int64(v)
		}
		if i == 0 || int64(v) > c.MaxTime {
			c.MaxTime = int64(v)
		}
	}
	return &fileRows{chunk: c, size: size + 256}, nil
}

// arraySize is the bytes of a's buffers, its dictionary's included.
func arraySize(a arrow.Array) int64 {
	var n int64
	for _, b := range a.Data().Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	if d, ok := a.(*array.Dictionary); ok {
		n += arraySize(d.Dictionary())
	}
	return n
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

// dictionaryOfStrings joins string columns, dictionary-encoded or not,
// into one with a dictionary of the values they hold.
func dictionaryOfStrings(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	for _, p := range parts {
		if plain, ok := p.(*array.String); ok {
			for r := range plain.Len() {
				if plain.IsNull(r) {
					b.AppendNull()
				} else if err := b.AppendString(plain.Value(r)); err != nil {
					return nil, err
				}
			}
			continue
		}
		d, ok := p.(*array.Dictionary)
		if !ok {
			return nil, fmt.Errorf("%w: %s, not strings", errFileRowsTypes, p.DataType())
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
