package buffer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// ErrInvalidBatch is wrapped by errors about a batch's content that no
// schema rule covers (a null or out-of-range time).
var ErrInvalidBatch = errors.New("invalid batch")

// batch is an incoming record batch with its time column normalized to
// timestamp[ns] without a zone.
type batch struct {
	rec     arrow.RecordBatch
	logical []arrow.DataType // catalog logical type per column; nil if unsupported
	times   []int64          // the time column's values
}

func (b *batch) release() { b.rec.Release() }

func (b *batch) rows() int { return int(b.rec.NumRows()) }

// batchSource says where a batch comes from.
type batchSource int

const (
	// fromClient: a write; every string column is encoded (and checked).
	fromClient batchSource = iota
	// fromWAL: a replayed record, which this server wrote after encoding
	// it and which passed its checksum: its dictionary columns are ours
	// already, and are not encoded again (the buffer still checks their
	// indexes).
	fromWAL
)

// MinTime and MaxTime bound the times a write may carry: DuckDB's finite
// TIMESTAMP_NS values (it reads int64 max as infinity, and cannot print
// times before 1677-09-22).
const (
	MinTime int64 = -9223286400000000000 // 1677-09-22T00:00:00Z
	MaxTime int64 = math.MaxInt64 - 1    // 2262-04-11T23:47:16.854775806Z
)

// normalize returns rec with its time column converted to UTC nanoseconds
// (Arrow timestamps with a zone hold UTC already; those without one are
// taken as UTC), or added with now on every row when rec has none. rec is
// retained, not consumed. A client's batch (src fromClient) is checked
// too: times within [MinTime, MaxTime], no string or binary value over
// maxValue bytes (0: no limit). A replayed one was accepted once and is
// taken as it is.
func normalize(rec arrow.RecordBatch, now time.Time, mem memory.Allocator, src batchSource, maxValue int64) (*batch, error) {
	if src == fromClient {
		plain, err := unviewColumns(rec, mem)
		if err != nil {
			return nil, err
		}
		if plain != nil {
			defer plain.Release()
			rec = plain
		}
	}
	schema := rec.Schema()
	idx := schema.FieldIndices(TimeColumn)
	if len(idx) > 1 {
		return nil, fmt.Errorf("%w: column %q appears %d times", catalog.ErrInvalidSchema, TimeColumn, len(idx))
	}
	fields := schema.Fields()
	cols := rec.Columns()
	var timeArr arrow.Array
	if len(idx) == 0 {
		timeArr = constantTime(now.UnixNano(), int(rec.NumRows()), mem)
		fields = append([]arrow.Field{{Name: TimeColumn, Type: timeType}}, fields...)
		cols = append([]arrow.Array{timeArr}, cols...)
	} else {
		i := idx[0]
		var err error
		if timeArr, err = toNanos(cols[i]); err != nil {
			return nil, err
		}
		fields = append([]arrow.Field(nil), fields...)
		cols = append([]arrow.Array(nil), cols...)
		fields[i] = arrow.Field{Name: TimeColumn, Type: timeType}
		cols[i] = timeArr
	}
	defer timeArr.Release()
	if src == fromClient {
		if err := checkTimes(valuesOf[int64](timeArr)); err != nil {
			return nil, err
		}
	}
	// Binary offsets are checked here, before the WAL: the buffer trusts
	// them (string offsets encodeStrings checks).
	for i, f := range fields {
		var err error
		switch f.Type.ID() {
		case arrow.BINARY:
			err = validateOffsets(offsetsOf[int32](cols[i]), cols[i].Len(), len(rawData(cols[i])))
		case arrow.LARGE_BINARY:
			err = validateOffsets(offsetsOf[int64](cols[i]), cols[i].Len(), len(rawData(cols[i])))
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	if src == fromClient && maxValue > 0 {
		for i, f := range fields {
			if err := checkValueSizes(cols[i], maxValue); err != nil {
				return nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
		}
	}
	// Each string column is hashed on its own goroutine: hashing is most
	// of a write's CPU, and the columns share nothing.
	var strs []int
	for i, f := range fields {
		if isStringType(f.Type) && (src == fromClient || f.Type.ID() != arrow.DICTIONARY) {
			strs = append(strs, i)
		}
	}
	dicts := make([]arrow.Array, len(strs))
	errs := make([]error, len(strs))
	if len(strs) > 1 && rec.NumRows() >= parallelEncodeRows {
		var wg sync.WaitGroup
		for j, i := range strs {
			wg.Go(func() { dicts[j], errs[j] = encodeStrings(cols[i]) })
		}
		wg.Wait()
	} else {
		for j, i := range strs {
			dicts[j], errs[j] = encodeStrings(cols[i])
		}
	}
	for j := range strs {
		if dicts[j] != nil {
			defer dicts[j].Release()
		}
	}
	for j, i := range strs {
		if errs[j] != nil {
			return nil, fmt.Errorf("column %q: %w", fields[i].Name, errs[j])
		}
	}
	for j, i := range strs {
		cols[i] = dicts[j]
		fields[i] = arrow.Field{Name: fields[i].Name, Type: dicts[j].DataType(), Nullable: fields[i].Nullable}
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	b := &batch{rec: out, logical: make([]arrow.DataType, len(fields)), times: valuesOf[int64](timeArr)}
	for i, f := range fields {
		if lt, ok := catalog.LogicalType(f.Type); ok {
			b.logical[i] = lt
		}
	}
	return b, nil
}

// checkTimes refuses times DuckDB cannot represent as finite values.
func checkTimes(times []int64) error {
	for i, t := range times {
		if t < MinTime || t > MaxTime {
			return fmt.Errorf("%w: column %q row %d: %d ns is outside the times SQL can represent (%s to %s)",
				ErrInvalidBatch, TimeColumn, i, t, time.Unix(0, MinTime).UTC().Format(time.RFC3339Nano), time.Unix(0, MaxTime).UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

func constantTime(ns int64, n int, mem memory.Allocator) arrow.Array {
	bld := array.NewTimestampBuilder(mem, timeType)
	defer bld.Release()
	bld.Reserve(n)
	for range n {
		bld.UnsafeAppend(arrow.Timestamp(ns))
	}
	return bld.NewArray()
}

// toNanos returns a timestamp[ns] array of arr's times, retained.
func toNanos(arr arrow.Array) (arrow.Array, error) {
	ts, ok := arr.DataType().(*arrow.TimestampType)
	if !ok {
		return nil, fmt.Errorf("%w: column %q must be a timestamp, got %s", catalog.ErrInvalidSchema, TimeColumn, arr.DataType())
	}
	if n := arr.NullN(); n > 0 {
		return nil, fmt.Errorf("%w: column %q has %d null values; every row needs a time", ErrInvalidBatch, TimeColumn, n)
	}
	var mult int64
	switch ts.Unit {
	case arrow.Nanosecond:
		if ts.TimeZone == "" {
			arr.Retain()
			return arr, nil
		}
		mult = 1
	case arrow.Microsecond:
		mult = 1e3
	case arrow.Millisecond:
		mult = 1e6
	case arrow.Second:
		mult = 1e9
	}
	src := valuesOf[int64](arr)
	out := make([]int64, len(src))
	for i, v := range src {
		if v > math.MaxInt64/mult || v < math.MinInt64/mult {
			return nil, fmt.Errorf("%w: column %q row %d: %d%s is outside the range of nanosecond timestamps (years 1677 to 2262)",
				ErrInvalidBatch, TimeColumn, i, v, ts.Unit)
		}
		out[i] = v * mult
	}
	data := array.NewData(timeType, len(out), []*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(out))}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// isStringType: utf8, large utf8, or a dictionary of either; encodeStrings
// takes them all.
func isStringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return true
	case arrow.DICTIONARY:
		v := t.(*arrow.DictionaryType).ValueType.ID()
		return v == arrow.STRING || v == arrow.LARGE_STRING
	}
	return false
}

// parallelEncodeRows is the batch size from which string columns are
// encoded in parallel: below it, starting goroutines costs more.
const parallelEncodeRows = 16 << 10

// checkValueSizes refuses a string or binary value of a (a dictionary's:
// a value a row uses) over max bytes. Offsets are only compared here:
// encodeStrings and validateOffsets check them, and a malformed array is
// refused there.
func checkValueSizes(a arrow.Array, max int64) error {
	switch a.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		if i, n, ok := oversized(offsetsOf[int32](a), a, max); ok {
			return valueTooLarge(i, n, max)
		}
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		if i, n, ok := oversized(offsetsOf[int64](a), a, max); ok {
			return valueTooLarge(i, n, max)
		}
	case arrow.DICTIONARY:
		d := a.(*array.Dictionary)
		dict := d.Dictionary()
		var big map[int]int64 // made only when a value is over the limit
		for j := 0; ; {
			var i int
			var n int64
			var ok bool
			switch dict.DataType().ID() {
			case arrow.STRING, arrow.BINARY:
				i, n, ok = oversizedFrom(offsetsOf[int32](dict), dict, max, j)
			case arrow.LARGE_STRING, arrow.LARGE_BINARY:
				i, n, ok = oversizedFrom(offsetsOf[int64](dict), dict, max, j)
			}
			if !ok {
				break
			}
			if big == nil {
				big = map[int]int64{}
			}
			big[i] = n
			j = i + 1
		}
		if len(big) == 0 {
			return nil
		}
		for r := range d.Len() {
			if d.IsNull(r) {
				continue
			}
			if n, ok := big[d.GetValueIndex(r)]; ok {
				return valueTooLarge(r, n, max)
			}
		}
	}
	return nil
}

// oversized finds the first non-null row of a over max bytes.
func oversized[O int32 | int64](offsets []O, a arrow.Array, max int64) (row int, size int64, ok bool) {
	return oversizedFrom(offsets, a, max, 0)
}

func oversizedFrom[O int32 | int64](offsets []O, a arrow.Array, max int64, from int) (row int, size int64, ok bool) {
	n := a.Len()
	if len(offsets) < n+1 {
		return 0, 0, false
	}
	for i := from; i < n; i++ {
		if size := int64(offsets[i+1]) - int64(offsets[i]); size > max && !a.IsNull(i) {
			return i, size, true
		}
	}
	return 0, 0, false
}

func valueTooLarge(row int, size, max int64) error {
	return fmt.Errorf("%w: row %d: a value of %d bytes is over the limit of %d bytes (--max-value-size): clients could not read it back, their gRPC messages are 4 to 16 MiB at most",
		ErrInvalidBatch, row, size, max)
}

// unviewColumns is rec with its view columns in the plain layout
// (views.go), or nil if it has none.
func unviewColumns(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		if !isViewType(f.Type) {
			continue
		}
		if fields == nil {
			fields = slices.Clone(rec.Schema().Fields())
			cols = slices.Clone(rec.Columns())
		}
		plain, err := unview(rec.Column(i), mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		defer plain.Release()
		fields[i] = arrow.Field{Name: f.Name, Type: plain.DataType(), Nullable: f.Nullable}
		cols[i] = plain
	}
	if fields == nil {
		return nil, nil
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}
