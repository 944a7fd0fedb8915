package output

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// This file is the one value-rendering layer of the text formats (table,
// csv, json, jsonl): a column turns the values of one array into bytes in
// one style. The formats differ only where doc.go says they do (timestamp
// spelling, blobs, NaN, quoting), and that difference is the style.

// style selects how a value is spelled where the text formats differ.
type style uint8

const (
	// styleTable is for people: "2026-01-05 12:00:00", blobs as duckdb
	// shows them (\x00 escapes), nested values as JSON.
	styleTable style = iota
	// styleCSV is for programs reading text: RFC 3339 timestamps in UTC,
	// base64 blobs, nested values as JSON.
	styleCSV
	// styleJSON appends complete JSON values: strings quoted and escaped,
	// NaN and ±Inf as null, nested values as JSON.
	styleJSON
)

// appendFunc appends the rendering of the value at row i, which is not null.
type appendFunc func(dst []byte, i int) []byte

// column renders the values of one array in one style. Build it once per
// batch (newColumn), then call isNull and appendValue per row.
type column struct {
	nullFn      func(i int) bool // nil: no value is null
	appendValue appendFunc
	// plain values never contain a byte CSV must quote (, " CR LF) and
	// are never empty: CSV skips its scan of them.
	plain bool
}

func (c *column) isNull(i int) bool { return c.nullFn != nil && c.nullFn(i) }

// appendCell appends value i, or null (which may be empty) if it is null.
func (c *column) appendCell(dst []byte, i int, null string) []byte {
	if c.isNull(i) {
		return append(dst, null...)
	}
	return c.appendValue(dst, i)
}

// newColumn returns the renderer of arr's values in style st. Every Arrow
// type renders: one without a rendering of its own here falls back to the
// array's ValueStr (a JSON string in styleJSON).
func newColumn(arr arrow.Array, st style) *column {
	c := &column{}
	if arr.NullN() > 0 {
		c.nullFn = arr.IsNull
	}
	switch a := arr.(type) {
	case *array.Int8:
		c.appendValue, c.plain = intFunc(a.Int8Values()), true
	case *array.Int16:
		c.appendValue, c.plain = intFunc(a.Int16Values()), true
	case *array.Int32:
		c.appendValue, c.plain = intFunc(a.Int32Values()), true
	case *array.Int64:
		c.appendValue, c.plain = intFunc(a.Int64Values()), true
	case *array.Uint8:
		c.appendValue, c.plain = uintFunc(a.Uint8Values()), true
	case *array.Uint16:
		c.appendValue, c.plain = uintFunc(a.Uint16Values()), true
	case *array.Uint32:
		c.appendValue, c.plain = uintFunc(a.Uint32Values()), true
	case *array.Uint64:
		c.appendValue, c.plain = uintFunc(a.Uint64Values()), true
	case *array.Float16:
		vals := a.Values()
		c.appendValue = func(dst []byte, i int) []byte { return appendFloat(dst, float64(vals[i].Float32()), 32, st) }
		c.plain = true
	case *array.Float32:
		vals := a.Float32Values()
		c.appendValue = func(dst []byte, i int) []byte { return appendFloat(dst, float64(vals[i]), 32, st) }
		c.plain = true
	case *array.Float64:
		vals := a.Float64Values()
		c.appendValue = func(dst []byte, i int) []byte { return appendFloat(dst, vals[i], 64, st) }
		c.plain = true
	case *array.Boolean:
		c.appendValue = func(dst []byte, i int) []byte { return strconv.AppendBool(dst, a.Value(i)) }
		c.plain = true
	case *array.String:
		c.appendValue = stringFunc(a.Value, st)
	case *array.LargeString:
		c.appendValue = stringFunc(a.Value, st)
	case *array.StringView:
		c.appendValue = stringFunc(a.Value, st)
	case *array.Binary:
		c.appendValue, c.plain = binaryFunc(a.Value, st), st != styleTable
	case *array.LargeBinary:
		c.appendValue, c.plain = binaryFunc(a.Value, st), st != styleTable
	case *array.BinaryView:
		c.appendValue, c.plain = binaryFunc(a.Value, st), st != styleTable
	case *array.FixedSizeBinary:
		c.appendValue, c.plain = binaryFunc(a.Value, st), st != styleTable
	case *array.Timestamp:
		c.appendValue, c.plain = timestampFunc(a, st), true
	case *array.Date32:
		vals := a.Values()
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte { return appendDate(dst, int64(vals[i])) })
		c.plain = true
	case *array.Date64:
		vals := a.Values()
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte {
			return appendDate(dst, floorDiv(int64(vals[i]), 86_400_000))
		})
		c.plain = true
	case *array.Time32:
		vals, unit := a.Values(), a.DataType().(*arrow.Time32Type).Unit
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte { return appendTimeOfDay(dst, int64(vals[i]), unit) })
		c.plain = true
	case *array.Time64:
		vals, unit := a.Values(), a.DataType().(*arrow.Time64Type).Unit
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte { return appendTimeOfDay(dst, int64(vals[i]), unit) })
		c.plain = true
	case *array.Duration:
		vals, unit := a.Values(), a.DataType().(*arrow.DurationType).Unit
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte { return appendDuration(dst, int64(vals[i]), unit) })
		c.plain = true
	case *array.MonthInterval:
		vals := a.MonthIntervalValues()
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte { return appendInterval(dst, int32(vals[i]), 0, 0) })
		c.plain = true
	case *array.DayTimeInterval:
		vals := a.DayTimeIntervalValues()
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte {
			return appendInterval(dst, 0, vals[i].Days, int64(vals[i].Milliseconds)*1e6)
		})
		c.plain = true
	case *array.MonthDayNanoInterval:
		vals := a.MonthDayNanoIntervalValues()
		c.appendValue = quotedIf(st, func(dst []byte, i int) []byte {
			return appendInterval(dst, vals[i].Months, vals[i].Days, vals[i].Nanoseconds)
		})
		c.plain = true
	case *array.Decimal32:
		c.appendValue, c.plain = decimalFunc(a.Values(), a.DataType()), true
	case *array.Decimal64:
		c.appendValue, c.plain = decimalFunc(a.Values(), a.DataType()), true
	case *array.Decimal128:
		c.appendValue, c.plain = decimalFunc(a.Values(), a.DataType()), true
	case *array.Decimal256:
		c.appendValue, c.plain = decimalFunc(a.Values(), a.DataType()), true
	case *array.Null:
		c.nullFn = func(int) bool { return true }
		c.appendValue = func(dst []byte, _ int) []byte { return dst }
	case *array.Dictionary:
		values := newColumn(a.Dictionary(), st)
		idx := a.GetValueIndex
		if a.NullN() > 0 || values.nullFn != nil {
			c.nullFn = func(i int) bool { return a.IsNull(i) || values.isNull(idx(i)) }
		}
		c.appendValue = func(dst []byte, i int) []byte { return values.appendValue(dst, idx(i)) }
		c.plain = values.plain
	case *array.RunEndEncoded:
		values := newColumn(a.Values(), st)
		phys := a.GetPhysicalIndex
		c.nullFn = nil // a run-end encoded array has no validity bitmap of its own
		if values.nullFn != nil {
			c.nullFn = func(i int) bool { return values.isNull(phys(i)) }
		}
		c.appendValue = func(dst []byte, i int) []byte { return values.appendValue(dst, phys(i)) }
		c.plain = values.plain
	// Nested values are JSON in every style: a JSON value in JSON, its
	// text in the table and CSV (which quote or escape it like a string).
	case *array.Map:
		c.appendValue = mapFunc(a)
	case array.ListLike:
		c.appendValue = listFunc(a)
	case *array.Struct:
		c.appendValue = structFunc(a)
	case array.Union:
		c.nullFn, c.appendValue = unionFuncs(a, st)
	default:
		// Extension types and whatever Arrow adds next: their own
		// text, so a new type degrades to readable output, never an error.
		c.appendValue = stringFunc(arr.ValueStr, st)
	}
	return c
}

func intFunc[T int8 | int16 | int32 | int64](vals []T) appendFunc {
	return func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(vals[i]), 10) }
}

func uintFunc[T uint8 | uint16 | uint32 | uint64](vals []T) appendFunc {
	return func(dst []byte, i int) []byte { return strconv.AppendUint(dst, uint64(vals[i]), 10) }
}

// appendFloat appends f in its shortest round-trip form, without exponent
// for 1e-6 <= |f| < 1e21 (JavaScript's rule: 0.1, 1234567.5, 100 rather
// than 1e+02), with one outside that range (1e+21, 1e-07). NaN and ±Inf are
// nan, inf and -inf (duckdb's spelling), or null in JSON, which has no such
// numbers.
func appendFloat(dst []byte, f float64, bits int, st style) []byte {
	switch {
	case math.IsNaN(f):
		if st == styleJSON {
			return append(dst, "null"...)
		}
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		if st == styleJSON {
			return append(dst, "null"...)
		}
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		if st == styleJSON {
			return append(dst, "null"...)
		}
		return append(dst, "-inf"...)
	}
	if abs := math.Abs(f); abs == 0 || (abs >= 1e-6 && abs < 1e21) {
		return strconv.AppendFloat(dst, f, 'f', -1, bits)
	}
	return strconv.AppendFloat(dst, f, 'e', -1, bits)
}

// decimalFunc renders decimals exactly, at their scale ("-12.340", as
// duckdb shows them): a JSON number too.
func decimalFunc[T interface{ ToString(int32) string }](vals []T, dt arrow.DataType) appendFunc {
	scale := dt.(arrow.DecimalType).GetScale()
	return func(dst []byte, i int) []byte { return append(dst, vals[i].ToString(scale)...) }
}

// stringFunc renders text: raw bytes in table and CSV (the table escapes
// them for the terminal, CSV quotes them), a JSON string in JSON.
func stringFunc(value func(int) string, st style) appendFunc {
	if st == styleJSON {
		return func(dst []byte, i int) []byte { return appendJSONString(dst, value(i)) }
	}
	return func(dst []byte, i int) []byte { return append(dst, value(i)...) }
}

// binaryFunc renders blobs: duckdb's escaped form in the table (printable
// ASCII as is, other bytes \xNN), standard base64 in CSV and JSON.
func binaryFunc(value func(int) []byte, st style) appendFunc {
	switch st {
	case styleTable:
		return func(dst []byte, i int) []byte { return appendBlob(dst, value(i)) }
	case styleJSON:
		return func(dst []byte, i int) []byte {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, value(i))
			return append(dst, '"')
		}
	}
	return func(dst []byte, i int) []byte { return base64.StdEncoding.AppendEncode(dst, value(i)) }
}

const hexDigits = "0123456789abcdef"

func appendBlob(dst, b []byte) []byte {
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '\\' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// timestampFunc renders timestamps in UTC (see appendTimestamp).
func timestampFunc(a *array.Timestamp, st style) appendFunc {
	vals := a.Values()
	typ := a.DataType().(*arrow.TimestampType)
	unit, zoned := typ.Unit, typ.TimeZone != ""
	switch st {
	case styleTable:
		return func(dst []byte, i int) []byte {
			dst = appendTimestamp(dst, int64(vals[i]), unit, ' ')
			if zoned {
				// The instant is shown in UTC; say so, as duckdb does.
				dst = append(dst, "+00"...)
			}
			return dst
		}
	case styleJSON:
		return func(dst []byte, i int) []byte {
			dst = append(dst, '"')
			dst = appendTimestamp(dst, int64(vals[i]), unit, 'T')
			return append(dst, 'Z', '"')
		}
	}
	return func(dst []byte, i int) []byte {
		return append(appendTimestamp(dst, int64(vals[i]), unit, 'T'), 'Z')
	}
}

// quotedIf wraps f's text in JSON quotes in styleJSON. It is for values
// whose text needs no JSON escaping (dates, times, intervals).
func quotedIf(st style, f appendFunc) appendFunc {
	if st != styleJSON {
		return f
	}
	return func(dst []byte, i int) []byte {
		dst = append(dst, '"')
		dst = f(dst, i)
		return append(dst, '"')
	}
}

// appendJSONValue appends value i of c (built in styleJSON), or null.
func (c *column) appendJSONValue(dst []byte, i int) []byte {
	if c.isNull(i) {
		return append(dst, "null"...)
	}
	return c.appendValue(dst, i)
}

// listFunc renders a list-like value as a JSON array.
func listFunc(a array.ListLike) appendFunc {
	values := newColumn(a.ListValues(), styleJSON)
	return func(dst []byte, i int) []byte {
		start, end := a.ValueOffsets(i)
		dst = append(dst, '[')
		for j := start; j < end; j++ {
			if j > start {
				dst = append(dst, ',')
			}
			dst = values.appendJSONValue(dst, int(j))
		}
		return append(dst, ']')
	}
}

// mapFunc renders a map value as a JSON object, keys in their CSV text
// (JSON keys are strings), entries in stored order.
func mapFunc(a *array.Map) appendFunc {
	keys := newColumn(a.Keys(), styleCSV)
	items := newColumn(a.Items(), styleJSON)
	return func(dst []byte, i int) []byte {
		var key []byte // not shared: rows are rendered concurrently (sink.writeRows)
		start, end := a.ValueOffsets(i)
		dst = append(dst, '{')
		for j := start; j < end; j++ {
			if j > start {
				dst = append(dst, ',')
			}
			key = keys.appendCell(key[:0], int(j), "null")
			dst = appendJSONString(dst, string(key))
			dst = append(dst, ':')
			dst = items.appendJSONValue(dst, int(j))
		}
		return append(dst, '}')
	}
}

// structFunc renders a struct value as a JSON object in field order.
func structFunc(a *array.Struct) appendFunc {
	typ := a.DataType().(*arrow.StructType)
	fields := make([]*column, a.NumField())
	keys := make([][]byte, a.NumField())
	for f := range fields {
		fields[f] = newColumn(a.Field(f), styleJSON)
		keys[f] = append(appendJSONString(nil, typ.Field(f).Name), ':')
	}
	return func(dst []byte, i int) []byte {
		dst = append(dst, '{')
		for f, c := range fields {
			if f > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, keys[f]...)
			dst = c.appendJSONValue(dst, i)
		}
		return append(dst, '}')
	}
}

// unionFuncs render a union's values as the value of the child each row
// selects: a union of int64 and varchar shows 5 and "x", not [0,5].
func unionFuncs(a array.Union, st style) (func(int) bool, appendFunc) {
	children := make([]*column, a.NumFields())
	for j := range children {
		children[j] = newColumn(a.Field(j), st)
	}
	var offsets []int32
	if d, ok := a.(*array.DenseUnion); ok {
		offsets = d.RawValueOffsets()
	}
	at := func(i int) (*column, int) {
		c := children[a.ChildID(i)]
		if offsets != nil {
			return c, int(offsets[i])
		}
		return c, i // sparse: children are as long as the union
	}
	isNull := func(i int) bool {
		c, j := at(i)
		return c.isNull(j)
	}
	appendValue := func(dst []byte, i int) []byte {
		c, j := at(i)
		return c.appendValue(dst, j)
	}
	return isNull, appendValue
}

// columns builds the renderers of every column of rec.
func columns(rec arrow.RecordBatch, st style) []*column {
	cols := make([]*column, rec.NumCols())
	for i := range cols {
		cols[i] = newColumn(rec.Column(i), st)
	}
	return cols
}
