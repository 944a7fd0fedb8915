//go:build duckdb_arrow

package query

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// bindRow binds the n parameters of stmt, by position, to row of params.
func bindRow(stmt duck.PreparedStatement, n int, params arrow.RecordBatch, row int) error {
	if params == nil || int(params.NumCols()) < n {
		got := 0
		if params != nil {
			got = int(params.NumCols())
		}
		return newError(ErrSyntax, "the statement has %d parameters, %d are bound", n, got)
	}
	for i := range n {
		if err := bindValue(stmt, duck.IdxT(i+1), params.Column(i), row); err != nil {
			return newError(ErrSyntax, "parameter %d (%s): %v", i+1, params.Schema().Field(i).Name, err)
		}
	}
	return nil
}

func bindValue(stmt duck.PreparedStatement, idx duck.IdxT, col arrow.Array, row int) error {
	var st duck.State
	if col.IsNull(row) {
		st = duck.BindNull(stmt, idx)
	} else {
		switch a := col.(type) {
		case *array.Int8:
			st = duck.BindInt8(stmt, idx, a.Value(row))
		case *array.Int16:
			st = duck.BindInt16(stmt, idx, a.Value(row))
		case *array.Int32:
			st = duck.BindInt32(stmt, idx, a.Value(row))
		case *array.Int64:
			st = duck.BindInt64(stmt, idx, a.Value(row))
		case *array.Uint8:
			st = duck.BindUInt8(stmt, idx, a.Value(row))
		case *array.Uint16:
			st = duck.BindUInt16(stmt, idx, a.Value(row))
		case *array.Uint32:
			st = duck.BindUInt32(stmt, idx, a.Value(row))
		case *array.Uint64:
			st = duck.BindUInt64(stmt, idx, a.Value(row))
		case *array.Float32:
			st = duck.BindFloat(stmt, idx, a.Value(row))
		case *array.Float64:
			st = duck.BindDouble(stmt, idx, a.Value(row))
		case *array.Boolean:
			st = duck.BindBoolean(stmt, idx, a.Value(row))
		case *array.String:
			st = duck.BindVarchar(stmt, idx, a.Value(row))
		case *array.LargeString:
			st = duck.BindVarchar(stmt, idx, a.Value(row))
		case *array.StringView: // polars sends these; checked by validateView
			st = duck.BindVarchar(stmt, idx, a.Value(row))
		case *array.Binary:
			st = duck.BindBlob(stmt, idx, a.Value(row))
		case *array.BinaryView:
			st = duck.BindBlob(stmt, idx, a.Value(row))
		case *array.LargeBinary:
			st = duck.BindBlob(stmt, idx, a.Value(row))
		case *array.Date32:
			st = duck.BindDate(stmt, idx, duck.NewDate(int32(a.Value(row))))
		case *array.Timestamp:
			ns, err := timestampNanos(a.DataType().(*arrow.TimestampType).Unit, int64(a.Value(row)))
			if err != nil {
				return err
			}
			v := duck.CreateTimestampNS(duck.NewTimestampNS(ns))
			st = duck.BindValue(stmt, idx, v)
			duck.DestroyValue(&v)
		case *array.Time32: // JDBC's setTime
			st = duck.BindTime(stmt, idx, duck.NewTime(int64(a.Value(row))*map[arrow.TimeUnit]int64{arrow.Second: 1e6, arrow.Millisecond: 1e3}[a.DataType().(*arrow.Time32Type).Unit]))
		case *array.Time64:
			v := int64(a.Value(row))
			if a.DataType().(*arrow.Time64Type).Unit == arrow.Nanosecond {
				// A TIME, DuckDB's microseconds: it compares a TIME_NS
				// with nothing else without a cast.
				v /= 1e3
			}
			st = duck.BindTime(stmt, idx, duck.NewTime(v))
		case *array.Dictionary:
			return bindValue(stmt, idx, a.Dictionary(), a.GetValueIndex(row))
		case *array.Null: // Python's ADBC driver sends None so
			st = duck.BindNull(stmt, idx)
		default:
			return fmt.Errorf("values of type %s cannot be bound", col.DataType())
		}
	}
	if st == duck.StateError {
		return fmt.Errorf("DuckDB refused the value")
	}
	return nil
}

// validateParams checks the view columns of a client's parameters (whose
// views may point anywhere) before any value is read, once for all rows.
func validateParams(params arrow.RecordBatch) error {
	if params == nil {
		return nil
	}
	for i, c := range params.Columns() {
		if err := validateView(c); err != nil {
			return newError(ErrSyntax, "parameter %d (%s): %v", i+1, params.Schema().Field(i).Name, err)
		}
	}
	return nil
}

func validateView(a arrow.Array) error {
	switch v := a.(type) {
	case *array.StringView:
		return v.ValidateFull()
	case *array.BinaryView:
		return v.ValidateFull()
	case *array.Dictionary:
		return validateView(v.Dictionary())
	}
	return nil
}

func timestampNanos(unit arrow.TimeUnit, v int64) (int64, error) {
	mult := map[arrow.TimeUnit]int64{arrow.Second: 1e9, arrow.Millisecond: 1e6, arrow.Microsecond: 1e3, arrow.Nanosecond: 1}[unit]
	if v > (1<<63-1)/mult || v < -(1<<63)/mult {
		return 0, fmt.Errorf("timestamp %d%s is outside the nanosecond range", v, unit)
	}
	return v * mult, nil
}
