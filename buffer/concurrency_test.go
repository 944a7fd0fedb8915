package buffer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestSnapshotsWhileWriting has writers append rows whose columns agree
// (a == b == row number as a string's length) while readers snapshot: every
// row a reader sees must be whole, and each snapshot must hold every row
// acknowledged before it was taken.
func TestSnapshotsWhileWriting(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	cfg.ChunkRows = 64
	b := openBuffer(t, cfg)
	defer b.Close()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	var acked atomic.Int64
	var wg sync.WaitGroup
	const writers, batches, rows = 4, 40, 37
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				rb := array.NewRecordBuilder(mem, schema)
				for r := range rows {
					v := int64(w*1_000_000 + i*1000 + r)
					rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.UnixNano() + v))
					rb.Field(1).(*array.Int64Builder).Append(v)
					rb.Field(2).(*array.Int64Builder).Append(v)
					rb.Field(3).(*array.StringBuilder).Append(string(make([]byte, v%17)))
				}
				rec := rb.NewRecordBatch()
				rb.Release()
				_, err := b.Write(context.Background(), "db", "t", rec, catalog.WriteOptions{})
				rec.Release()
				if err != nil {
					t.Error(err)
					return
				}
				acked.Add(rows)
			}
		}()
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	for range 2 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				min := acked.Load()
				var seen int64
				for _, seg := range b.Segments() {
					for _, c := range seg.Snapshot("db", "t") {
						seen += c.Rec.NumRows()
						checkWhole(t, c.Rec)
						c.Rec.Release()
					}
				}
				if seen < min {
					t.Errorf("snapshot holds %d rows, but %d were acknowledged before it", seen, min)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	if got := int64(len(readRows(t, b, "t"))); got != writers*batches*rows {
		t.Fatalf("%d rows, want %d", got, writers*batches*rows)
	}
}

func checkWhole(t *testing.T, rec arrow.RecordBatch) {
	idx := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
	a, bb, s := idx("a").(*array.Int64), idx("b").(*array.Int64), idx("s").(*array.Dictionary)
	strs := s.Dictionary().(*array.String)
	for i := 0; i < int(rec.NumRows()); i++ {
		if a.Value(i) != bb.Value(i) || int64(len(strs.Value(s.GetValueIndex(i)))) != a.Value(i)%17 {
			t.Errorf("torn row %d: a=%d b=%d len(s)=%d", i, a.Value(i), bb.Value(i), len(strs.Value(s.GetValueIndex(i))))
			return
		}
	}
}
