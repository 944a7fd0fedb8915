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
		b.Reserve(v.Len())
		for i := range v.Len() {
			if v.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(v.Value(i))
			}
		}
		return b.NewArray(), nil
	case *array.BinaryView:
		if err := v.ValidateFull(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		b.Reserve(v.Len())
		for i := range v.Len() {
			if v.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(v.Value(i))
			}
		}
		return b.NewArray(), nil
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
