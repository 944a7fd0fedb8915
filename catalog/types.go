package catalog

import "github.com/apache/arrow-go/v18/arrow"

// TimeColumn is the name of the column every table has.
const TimeColumn = "time"

// timeType is the only accepted type of the time column. The write path
// normalizes the incoming time column before planning, so anything else is
// a bug upstream or a hostile client.
var timeType = &arrow.TimestampType{Unit: arrow.Nanosecond}

// TimeType returns the type of every table's time column: timestamp[ns]
// without time zone. The returned value is shared; do not modify it.
func TimeType() *arrow.TimestampType { return timeType }

// isTimeType reports whether dt is exactly timestamp[ns] without zone.
func isTimeType(dt arrow.DataType) bool {
	ts, ok := dt.(*arrow.TimestampType)
	return ok && ts.Unit == arrow.Nanosecond && ts.TimeZone == ""
}

// supportedTypes is appended to ErrUnsupportedType messages so that the
// client learns what it can send instead.
const supportedTypes = "integers, floats, bool, utf8, large_utf8, dictionary<utf8>, binary, timestamp, date"

// LogicalType maps an Arrow type sent by a client to the logical type a
// column stores, or reports false if Apron cannot store it. Strings in any
// encoding (utf8, large_utf8, dictionary with integer indices over either)
// become utf8; binary and large_binary become binary; timestamps are
// returned as is, since unit and zone are part of the type.
//
// LogicalType does not allocate: it returns shared instances or dt itself.
func LogicalType(dt arrow.DataType) (arrow.DataType, bool) {
	if dt == nil {
		return nil, false
	}
	switch dt.ID() {
	case arrow.INT8:
		return arrow.PrimitiveTypes.Int8, true
	case arrow.INT16:
		return arrow.PrimitiveTypes.Int16, true
	case arrow.INT32:
		return arrow.PrimitiveTypes.Int32, true
	case arrow.INT64:
		return arrow.PrimitiveTypes.Int64, true
	case arrow.UINT8:
		return arrow.PrimitiveTypes.Uint8, true
	case arrow.UINT16:
		return arrow.PrimitiveTypes.Uint16, true
	case arrow.UINT32:
		return arrow.PrimitiveTypes.Uint32, true
	case arrow.UINT64:
		return arrow.PrimitiveTypes.Uint64, true
	case arrow.FLOAT32:
		return arrow.PrimitiveTypes.Float32, true
	case arrow.FLOAT64:
		return arrow.PrimitiveTypes.Float64, true
	case arrow.BOOL:
		return arrow.FixedWidthTypes.Boolean, true
	case arrow.STRING, arrow.LARGE_STRING:
		return arrow.BinaryTypes.String, true
	case arrow.BINARY, arrow.LARGE_BINARY:
		return arrow.BinaryTypes.Binary, true
	case arrow.DATE32:
		return arrow.FixedWidthTypes.Date32, true
	case arrow.DATE64:
		return arrow.FixedWidthTypes.Date64, true
	case arrow.TIMESTAMP:
		if _, ok := dt.(*arrow.TimestampType); ok {
			return dt, true
		}
	case arrow.DICTIONARY:
		d, ok := dt.(*arrow.DictionaryType)
		if !ok || d.IndexType == nil || d.ValueType == nil || !arrow.IsInteger(d.IndexType.ID()) {
			return nil, false
		}
		switch d.ValueType.ID() {
		case arrow.STRING, arrow.LARGE_STRING:
			return arrow.BinaryTypes.String, true
		}
	}
	return nil, false
}

// storedType returns the instance a column keeps for logical type lt. A
// timestamp sent by a client is copied so that the catalog never shares a
// mutable type value with a request.
func storedType(lt arrow.DataType) arrow.DataType {
	if ts, ok := lt.(*arrow.TimestampType); ok {
		if isTimeType(ts) {
			return timeType
		}
		return &arrow.TimestampType{Unit: ts.Unit, TimeZone: ts.TimeZone}
	}
	return lt
}

// typeName is the name used for a type in error messages.
func typeName(dt arrow.DataType) string {
	if dt == nil {
		return "<nil>"
	}
	return dt.String()
}
