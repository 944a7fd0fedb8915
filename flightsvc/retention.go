package flightsvc

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// writeLive writes the rows of c at or after cutoff (ns; retention,
// buffer/retention.go) to w in schema, and returns how many it wrote. A
// chunk known to be all live (MinTime at or after cutoff) is written as
// it is; otherwise its time column decides row by row.
func writeLive(w *flight.Writer, c buffer.Chunk, schema *arrow.Schema, mem memory.Allocator, cutoff int64) (int64, error) {
	rec, err := buffer.Project(c, schema, mem)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	if cutoff != math.MinInt64 && (c.MinTime < cutoff || c.MinTime == math.MinInt64) {
		live, err := keepSince(rec, cutoff, mem)
		if err != nil {
			return 0, err
		}
		defer live.Release()
		rec = live
	}
	if rec.NumRows() == 0 {
		return 0, nil
	}
	return rec.NumRows(), w.Write(rec)
}

// keepSince returns the rows of rec whose time is at or after cutoff.
func keepSince(rec arrow.RecordBatch, cutoff int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	idx := rec.Schema().FieldIndices(catalog.TimeColumn)
	if len(idx) != 1 {
		return nil, fmt.Errorf("flightsvc: a batch without its time column")
	}
	times, ok := rec.Column(idx[0]).(*array.Timestamp)
	if !ok || times.DataType().(*arrow.TimestampType).Unit != arrow.Nanosecond {
		return nil, fmt.Errorf("flightsvc: time column of type %s", rec.Column(idx[0]).DataType())
	}
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.Reserve(times.Len())
	for i := range times.Len() {
		b.UnsafeAppend(times.IsValid(i) && int64(times.Value(i)) >= cutoff)
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	return compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
}
