package buffer

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Project returns c's rows with the columns of schema, in its order, for a
// reader that wants a table's current schema: columns the chunk predates are
// null, dictionary strings become plain utf8. The caller releases the result.
func Project(c Chunk, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	n := int(c.Rec.NumRows())
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	recSchema := c.Rec.Schema()
	for i, f := range schema.Fields() {
		idx := recSchema.FieldIndices(f.Name)
		switch {
		case len(idx) == 0:
			cols[i] = array.MakeArrayOfNull(mem, f.Type, n)
		case arrow.TypeEqual(c.Rec.Column(idx[0]).DataType(), f.Type):
			cols[i] = c.Rec.Column(idx[0])
			cols[i].Retain()
		default:
			d, ok := c.Rec.Column(idx[0]).(*array.Dictionary)
			if !ok || f.Type.ID() != arrow.STRING {
				return nil, fmt.Errorf("buffer: column %q is %s in the buffer, %s in the schema", f.Name, c.Rec.Column(idx[0]).DataType(), f.Type)
			}
			cols[i] = decodeStrings(d, mem)
		}
	}
	return array.NewRecordBatch(schema, cols, int64(n)), nil
}

// decodeStrings turns a dictionary of utf8 into a plain utf8 array.
func decodeStrings(d *array.Dictionary, mem memory.Allocator) arrow.Array {
	dict := d.Dictionary().(*array.String)
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(d.Len())
	size := 0
	for i := 0; i < d.Len(); i++ {
		if d.IsValid(i) {
			size += len(dict.Value(d.GetValueIndex(i)))
		}
	}
	b.ReserveData(size)
	for i := 0; i < d.Len(); i++ {
		if d.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(dict.Value(d.GetValueIndex(i)))
	}
	return b.NewArray()
}
