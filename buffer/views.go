package buffer

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Arrow's view types (string_view, binary_view), which polars sends for
// every string column (and dictionary<string_view> for a Categorical),
// are stored as their plain forms: a view is an in-memory layout, not a
// type of its own, and the WAL, the buffer's string dictionaries, Parquet
// and DuckDB all take the plain ones.

// isViewType says whether t is a view type or a dictionary of one.
func isViewType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING_VIEW, arrow.BINARY_VIEW:
		return true
	case arrow.DICTIONARY:
		return isViewType(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// unview returns a copy of a view array in the plain layout (utf8,
// binary, or a dictionary of utf8 with the same indices), after checking
// the views: a client's view may point anywhere.
func unview(a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	switch v := a.(type) {
	case *array.StringView:
		if err := v.ValidateFull(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		b := array.NewStringBuilder(mem)
		defer b.Release()
		return copyValues(v, b, func(i int) { b.Append(v.Value(i)) }), nil
	case *array.BinaryView:
		if err := v.ValidateFull(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		return copyValues(v, b, func(i int) { b.Append(v.Value(i)) }), nil
	case *array.Dictionary:
		values, err := unview(v.Dictionary(), mem)
		if err != nil {
			return nil, err
		}
		defer values.Release()
		dt := &arrow.DictionaryType{IndexType: v.DataType().(*arrow.DictionaryType).IndexType, ValueType: values.DataType()}
		return array.NewDictionaryArray(dt, v.Indices(), values), nil
	}
	return nil, fmt.Errorf("%w: %s is not a view type", ErrInvalidBatch, a.DataType())
}

// copyValues appends every value of a to b (appendValue(i) appends value
// i), nulls as nulls, and returns the new array.
func copyValues(a arrow.Array, b array.Builder, appendValue func(i int)) arrow.Array {
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			appendValue(i)
		}
	}
	return b.NewArray()
}
