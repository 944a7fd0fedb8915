package buffer

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
)

// TestWholeBatches: a large batch within one day is buffered as it came,
// in sealed slices of at most ChunkRows rows sharing its memory; a large
// batch across midnight and a small one are dictionary-encoded into open
// chunks; every row comes back once, also after replay.
func TestWholeBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig(t, mem) // ChunkRows 100
	b := openBuffer(t, cfg)

	whole := genRows(t0.UnixNano(), 250, 1000)
	acrossMidnight := genRows(t0.Truncate(24*time.Hour).Add(24*time.Hour).UnixNano()-100, 200, 1)
	small := genRows(t0.UnixNano()+1, 99, 1000)

	rec := makeRecord(mem, cpuSchema, whole)
	if _, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	usage := rec.Column(2).Data().Buffers()[1].Bytes()
	write(t, b, "cpu", cpuSchema, acrossMidnight)
	write(t, b, "cpu", cpuSchema, small)
	want := append(append(append([]row(nil), whole...), acrossMidnight...), small...)

	check := func(t *testing.T, b *WriteBuffer, live bool) {
		t.Helper()
		var plain, plainRows, dict int
		for _, s := range b.Segments() {
			for _, c := range s.Snapshot("db", "cpu") {
				host := c.Rec.Column(c.Rec.Schema().FieldIndices("host")[0])
				switch host.DataType().ID() {
				case arrow.STRING:
					plain++
					plainRows += int(c.Rec.NumRows())
					if c.Rec.NumRows() > int64(cfg.ChunkRows) {
						t.Errorf("a whole batch's chunk has %d rows, more than ChunkRows %d", c.Rec.NumRows(), cfg.ChunkRows)
					}
					if live {
						// Zero copy: the chunk's values are the written batch's.
						u := c.Rec.Column(c.Rec.Schema().FieldIndices("usage")[0]).(*array.Float64)
						p := unsafe.Pointer(unsafe.SliceData(u.Data().Buffers()[1].Bytes()))
						if p != unsafe.Pointer(unsafe.SliceData(usage)) {
							t.Errorf("a whole batch's chunk copied its values")
						}
					}
				case arrow.DICTIONARY:
					dict++
				}
				c.Rec.Release()
			}
		}
		if plain != 3 || plainRows != len(whole) || dict == 0 {
			t.Errorf("%d plain chunks of %d rows and %d dictionary chunks; want 3 of %d, and some", plain, plainRows, dict, len(whole))
		}
		assertRows(t, readRows(t, b, "cpu"), want)
	}
	check(t, b, true)
	rec.Release() // the buffer holds its own references
	check(t, b, false)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBuffer(t, cfg)
	check(t, b, false)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
