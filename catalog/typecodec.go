package catalog

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// fileTypes maps the type names of the catalog file to logical types.
// Timestamps are handled apart because they carry a unit and a zone.
var fileTypes = map[string]arrow.DataType{
	"int8":    arrow.PrimitiveTypes.Int8,
	"int16":   arrow.PrimitiveTypes.Int16,
	"int32":   arrow.PrimitiveTypes.Int32,
	"int64":   arrow.PrimitiveTypes.Int64,
	"uint8":   arrow.PrimitiveTypes.Uint8,
	"uint16":  arrow.PrimitiveTypes.Uint16,
	"uint32":  arrow.PrimitiveTypes.Uint32,
	"uint64":  arrow.PrimitiveTypes.Uint64,
	"float32": arrow.PrimitiveTypes.Float32,
	"float64": arrow.PrimitiveTypes.Float64,
	"bool":    arrow.FixedWidthTypes.Boolean,
	"string":  arrow.BinaryTypes.String,
	"binary":  arrow.BinaryTypes.Binary,
	"date32":  arrow.FixedWidthTypes.Date32,
	"date64":  arrow.FixedWidthTypes.Date64,
}

var fileUnits = map[string]arrow.TimeUnit{
	"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond,
}

// encodeType returns the file representation of a logical type.
func encodeType(dt arrow.DataType) (fileColumn, error) {
	if ts, ok := dt.(*arrow.TimestampType); ok {
		return fileColumn{Type: "timestamp", Unit: ts.Unit.String(), TimeZone: ts.TimeZone}, nil
	}
	for name, t := range fileTypes {
		if arrow.TypeEqual(t, dt) {
			return fileColumn{Type: name}, nil
		}
	}
	return fileColumn{}, fmt.Errorf("type %s is not a logical type", typeName(dt))
}

// decodeType is the inverse of encodeType.
func decodeType(c fileColumn) (arrow.DataType, error) {
	if c.Type == "timestamp" {
		u, ok := fileUnits[c.Unit]
		if !ok {
			return nil, fmt.Errorf("timestamp with unknown unit %q", c.Unit)
		}
		return storedType(&arrow.TimestampType{Unit: u, TimeZone: c.TimeZone}), nil
	}
	if c.Unit != "" || c.TimeZone != "" {
		return nil, fmt.Errorf("type %q has a unit or time zone", c.Type)
	}
	t, ok := fileTypes[c.Type]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", c.Type)
	}
	return t, nil
}
