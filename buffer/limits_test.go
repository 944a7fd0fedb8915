package buffer

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestWriteRefusesWhatSQLCannotRead refuses values over MaxValueSize and
// times outside DuckDB's finite range, naming column, row and limit, and
// changes nothing: catalog, WAL, rows. Replay still takes such rows (they
// were accepted once, perhaps under other limits).
func TestWriteRefusesWhatSQLCannotRead(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem)
	cfg.MaxValueSize = 1000
	b := openBuffer(t, cfg)
	defer b.Close()
	write(t, b, "cpu", cpuSchema, genRows(t0.UnixNano(), 10, 1))
	walSize := func() int64 { return walBytes(cfg.DataDir) }
	version, size := b.Catalog().Version(), walSize()
	tsNs := &arrow.TimestampType{Unit: arrow.Nanosecond}
	big := strings.Repeat("x", 1001)

	build := func(typ arrow.DataType, vals ...string) arrow.RecordBatch {
		sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "blob", Type: typ, Nullable: true}}, nil)
		rb := array.NewRecordBuilder(mem, sc)
		defer rb.Release()
		for i, v := range vals {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.UnixNano() + int64(i)))
			switch f := rb.Field(1).(type) {
			case *array.StringBuilder:
				f.Append(v)
			case *array.LargeStringBuilder:
				f.Append(v)
			case *array.BinaryBuilder:
				f.Append([]byte(v))
			case *array.BinaryDictionaryBuilder:
				if err := f.AppendString(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		return rb.NewRecordBatch()
	}
	times := func(unit arrow.TimeUnit, vals ...int64) arrow.RecordBatch {
		sc := arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: unit}}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
		rb := array.NewRecordBuilder(mem, sc)
		defer rb.Release()
		for _, v := range vals {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(v))
			rb.Field(1).(*array.Int64Builder).Append(1)
		}
		return rb.NewRecordBatch()
	}
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	for name, tc := range map[string]struct {
		rec  arrow.RecordBatch
		want []string
	}{
		"string":       {build(arrow.BinaryTypes.String, "a", big), []string{`column "blob"`, "row 1", "1001 bytes", "--max-value-size"}},
		"large string": {build(arrow.BinaryTypes.LargeString, big), []string{"row 0", "--max-value-size"}},
		"binary":       {build(arrow.BinaryTypes.Binary, "a", "b", big), []string{"row 2", "--max-value-size"}},
		"dictionary":   {build(dict, "a", big, "a"), []string{"row 1", "--max-value-size"}},
		"time max":     {times(arrow.Nanosecond, 0, math.MaxInt64), []string{`column "time" row 1`, "outside the times SQL can represent"}},
		"time min+1":   {times(arrow.Nanosecond, math.MinInt64+1), []string{"row 0", "1677-09-22T00:00:00Z"}},
		"time before":  {times(arrow.Nanosecond, MinTime-1), []string{"row 0", "outside"}},
		"time seconds": {times(arrow.Second, MinTime/1e9-1), []string{"outside"}},
	} {
		_, err := b.Write(context.Background(), "db", "cpu2", tc.rec, catalog.WriteOptions{})
		tc.rec.Release()
		if !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: %v, want ErrInvalidBatch", name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
		if b.Catalog().Version() != version || walSize() != size {
			t.Fatalf("%s: the refused batch changed the catalog or the WAL", name)
		}
	}
	// At the limits: taken.
	for _, rec := range []arrow.RecordBatch{
		build(arrow.BinaryTypes.String, strings.Repeat("y", 1000)),
		times(arrow.Nanosecond, MinTime, MaxTime),
	} {
		_, err := b.Write(context.Background(), "db", "edge"+rec.Schema().Field(1).Name, rec, catalog.WriteOptions{})
		rec.Release()
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(readRows(t, b, "cpu")); got != 10 {
		t.Fatalf("%d rows after refused batches, want 10", got)
	}
}
