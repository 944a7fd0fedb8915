package input

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// timeFix renames a Parquet or Arrow file's time column to "time" and
// converts it to timestamp[ns, UTC] when it is not a timestamp already:
// integers are epoch values in the --time-format unit (auto: by
// magnitude, as for CSV), strings are parsed with --time-format.
// Timestamps and dates keep their type (the server converts them).
type timeFix struct {
	cfg     *config
	idx     int
	name    string // the column's name in the file
	convert bool
	schema  *arrow.Schema // of the output
}

// newTimeFix returns nil when the batches need no change.
func newTimeFix(c *config, in *arrow.Schema) (*timeFix, error) {
	names := make([]string, in.NumFields())
	for i, f := range in.Fields() {
		names[i] = f.Name
	}
	idx, err := timeColumnIndex(names, c.TimeColumn)
	if err != nil {
		return nil, c.errorAt(0, 0, "", err)
	}
	if idx < 0 {
		return nil, nil
	}
	f := in.Field(idx)
	fix := &timeFix{cfg: c, idx: idx, name: f.Name}
	switch f.Type.ID() {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.STRING, arrow.LARGE_STRING:
		if fix.cfg.time.mode == timeLayout && !isStringType(f.Type) {
			return nil, c.errorAt(0, 0, f.Name, schemaf("the time column holds %s, which a time layout cannot read (use --time-format s, ms, us or ns)", f.Type))
		}
		fix.convert = true
	default:
		return nil, c.errorAt(0, 0, f.Name, schemaf("the time column is a %s; it must be a timestamp, a date, an integer (epoch) or a string", f.Type))
	}
	if !fix.convert && f.Name == TimeColumnName {
		return nil, nil
	}
	fields := append([]arrow.Field(nil), in.Fields()...)
	fields[idx].Name = TimeColumnName
	if fix.convert {
		fields[idx].Type = timestampType
	}
	md := in.Metadata()
	fix.schema = arrow.NewSchema(fields, &md)
	return fix, nil
}

func isStringType(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
}

// apply returns rec with the fixed time column; rec is not consumed.
// firstRow is rec's first row in the file, for errors.
func (f *timeFix) apply(rec arrow.RecordBatch, firstRow int64) (arrow.RecordBatch, error) {
	cols := append([]arrow.Array(nil), rec.Columns()...)
	if f.convert {
		conv, err := f.convertColumn(cols[f.idx], firstRow)
		if err != nil {
			return nil, err
		}
		defer conv.Release()
		cols[f.idx] = conv
	}
	return array.NewRecordBatch(f.schema, cols, rec.NumRows()), nil
}

func (f *timeFix) convertColumn(a arrow.Array, firstRow int64) (arrow.Array, error) {
	b := array.NewTimestampBuilder(f.cfg.Mem, timestampType)
	defer b.Release()
	b.Reserve(a.Len())
	tp := f.cfg.time
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		var ns int64
		var err error
		switch v := a.(type) {
		case *array.String:
			ns, err = tp.parse([]byte(v.Value(i)))
		case *array.LargeString:
			ns, err = tp.parse([]byte(v.Value(i)))
		case *array.Uint64:
			if v.Value(i) > math.MaxInt64 {
				err = errTimeRange
				break
			}
			ns, err = epochInt(tp, int64(v.Value(i)))
		default:
			ns, err = epochInt(tp, intValue(a, i))
		}
		if err != nil {
			return nil, f.cfg.errorAt(0, firstRow+int64(i), f.name, fmt.Errorf("%w: %w", ErrType, err))
		}
		b.Append(arrow.Timestamp(ns))
	}
	return b.NewArray(), nil
}

// epochInt scales an integer epoch value to nanoseconds.
func epochInt(tp timeParser, v int64) (int64, error) {
	scale := tp.scale
	if tp.mode != timeEpoch {
		// auto (and rfc3339, which has no unit): by magnitude.
		switch a := max(v, -v); {
		case a < 1e11:
			scale = 1e9
		case a < 1e14:
			scale = 1e6
		case a < 1e17:
			scale = 1e3
		default:
			scale = 1
		}
	}
	if v > math.MaxInt64/scale || v < math.MinInt64/scale {
		return 0, errTimeRange
	}
	return v * scale, nil
}

func intValue(a arrow.Array, i int) int64 {
	switch v := a.(type) {
	case *array.Int8:
		return int64(v.Value(i))
	case *array.Int16:
		return int64(v.Value(i))
	case *array.Int32:
		return int64(v.Value(i))
	case *array.Int64:
		return v.Value(i)
	case *array.Uint8:
		return int64(v.Value(i))
	case *array.Uint16:
		return int64(v.Value(i))
	case *array.Uint32:
		return int64(v.Value(i))
	}
	return 0
}
