package output

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestWriterFails: when the io.Writer fails, after any number of bytes,
// the error comes back (from New, Write or Close) wrapping the writer's,
// and every buffer is released all the same.
func TestWriterFails(t *testing.T) {
	// The batches are the writers' input, not their allocations: built once,
	// from the plain allocator, and each writer gets a checked one.
	schema := allTypesSchema()
	var recs []arrow.RecordBatch
	for range 60 { // enough rows that CSV and JSON flush before Close
		recs = append(recs, buildBatches(t, memory.NewGoAllocator(), schema, allTypesRows())...)
	}
	defer releaseAll(recs)
	for _, f := range Formats {
		size := len(writeAll(t, f, schema, recs, Options{}))
		for _, n := range []int{0, 3, 100, 1000, 5000, 70000} {
			t.Run(string(f)+"/"+itoa(n), func(t *testing.T) {
				mem := checkedMem(t)
				w, err := New(f, &failWriter{n: n}, schema, Options{Mem: mem})
				if err != nil {
					if !errors.Is(err, errDiskFull) {
						t.Fatalf("New: %v", err)
					}
					return
				}
				var errs []error
				for _, r := range recs {
					if err := w.Write(r); err != nil {
						errs = append(errs, err)
					}
				}
				errs = append(errs, w.Close())
				err = errors.Join(errs...)
				if n >= size {
					if err != nil {
						t.Fatalf("%d bytes of output fit in %d, yet: %v", size, n, err)
					}
					return
				}
				if !errors.Is(err, errDiskFull) {
					t.Fatalf("errors %v, want one wrapping %v", err, errDiskFull)
				}
			})
		}
	}
}

func itoa(n int) string { return string(appendPadded(nil, int64(n), 1)) }

// TestBadBatch: a batch whose columns are not the schema's is refused, in
// every format, without a panic and without writing it.
func TestBadBatch(t *testing.T) {
	schema := allTypesSchema()
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	swapped := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String},
	}, nil)
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			mem := checkedMem(t)
			recs := buildBatches(t, mem, other, [][]row{{{int64(1)}}})
			defer releaseAll(recs)
			w, err := New(f, &bytes.Buffer{}, schema, Options{Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(recs[0]); err == nil {
				t.Error("a batch of one int64 column was accepted for the all-types schema")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(recs[0]); !errors.Is(err, ErrClosed) {
				t.Errorf("Write after Close: %v, want ErrClosed", err)
			}
			if err := w.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close: %v, want ErrClosed", err)
			}

			w, err = New(f, &bytes.Buffer{}, swapped, Options{Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			bad := buildBatches(t, mem, arrow.NewSchema([]arrow.Field{
				{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.PrimitiveTypes.Int64},
			}, nil), [][]row{{{"x", int64(1)}}})
			defer releaseAll(bad)
			if err := w.Write(bad[0]); err == nil {
				t.Error("a batch of swapped column types was accepted")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSchemaRelabel: a batch with the schema's column types but other
// field names, nullability or metadata (a Flight stream may announce one
// schema and label its batches another way) is written under the writer's
// schema.
func TestSchemaRelabel(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	label := arrow.NewSchema([]arrow.Field{{Name: "w", Type: arrow.PrimitiveTypes.Int64, Metadata: md}}, nil)
	for _, f := range []Format{Arrow, Parquet} {
		t.Run(string(f), func(t *testing.T) {
			mem := checkedMem(t)
			recs := buildBatches(t, mem, label, [][]row{{{int64(1)}, {int64(2)}}})
			defer releaseAll(recs)
			out := writeAll(t, f, schema, recs, Options{Mem: mem})
			if f == Arrow {
				got, gotSchema := readIPC(t, out, mem)
				defer releaseAll(got)
				if !gotSchema.Equal(schema) || len(got) != 1 || got[0].NumRows() != 2 {
					t.Errorf("read back %s, %d batches", gotSchema, len(got))
				}
				return
			}
			tbl := readParquet(t, out)
			defer tbl.Release()
			if tbl.Schema().Field(0).Name != "v" || tbl.NumRows() != 2 {
				t.Errorf("read back %s, %d rows", tbl.Schema(), tbl.NumRows())
			}
		})
	}
}
