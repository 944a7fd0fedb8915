package flightsvc

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
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
	if cutoff != math.MinInt64 && c.MinTime < cutoff {
		live, err := persist.KeepSince(rec, cutoff, mem)
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
