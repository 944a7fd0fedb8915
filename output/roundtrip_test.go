package output

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// readIPC reads an Arrow IPC stream back: its batches and schema.
func readIPC(t *testing.T, data []byte, mem memory.Allocator) ([]arrow.RecordBatch, *arrow.Schema) {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return recs, r.Schema()
}

// readParquet reads a Parquet file back as an Arrow table. It reads with
// an allocator of its own, not the test's checked one: arrow-go v18.8.0's
// DELTA_BINARY_PACKED decoder never releases its buffer of miniblock bit
// widths (delta_bit_packing.go, initBlock), a leak of the reader's that
// the Go allocator's garbage collection makes harmless.
func readParquet(t *testing.T, data []byte) arrow.Table {
	t.Helper()
	mem := memory.NewGoAllocator()
	pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// sameValues compares column want (all batches' slices of one column) to
// got value by value: with array.Equal where the types are the same,
// else by their rendering (a type the reader maps to another one).
func sameValues(t *testing.T, name string, want []arrow.Array, got *arrow.Chunked) {
	t.Helper()
	wantText := renderText(want)
	gotText := renderText(got.Chunks())
	if len(wantText) != len(gotText) {
		t.Errorf("%s: %d values read back, want %d", name, len(gotText), len(wantText))
		return
	}
	for i := range wantText {
		if wantText[i] != gotText[i] {
			t.Errorf("%s[%d] read back %q, want %q", name, i, gotText[i], wantText[i])
		}
	}
	if arrow.TypeEqual(got.DataType(), want[0].DataType()) {
		wantChunked := arrow.NewChunked(want[0].DataType(), want)
		defer wantChunked.Release()
		if !array.ChunkedEqual(wantChunked, got) {
			t.Errorf("%s: arrays differ", name)
		}
	}
}

// renderText renders the values of arrs in styleJSON (null as "null").
func renderText(arrs []arrow.Array) []string {
	var out []string
	for _, a := range arrs {
		c := newColumn(a, styleJSON)
		for i := range a.Len() {
			out = append(out, string(c.appendJSONValue(nil, i)))
		}
	}
	return out
}

func column0(recs []arrow.RecordBatch, i int) []arrow.Array {
	var out []arrow.Array
	for _, r := range recs {
		out = append(out, r.Column(i))
	}
	return out
}

// describe is the golden text of what a reader sees: schema and values.
func describe(schema *arrow.Schema, cols []*arrow.Chunked) []byte {
	var b strings.Builder
	fmt.Fprintln(&b, schema)
	for i, c := range cols {
		fmt.Fprintf(&b, "%s: %s\n", schema.Field(i).Name, strings.Join(renderText(c.Chunks()), " | "))
	}
	return []byte(b.String())
}

// TestArrowRoundTrip reads the IPC stream back with ipc.NewReader: the
// schema and every value as written, in the same batches.
func TestArrowRoundTrip(t *testing.T) {
	mem := checkedMem(t)
	sch := allTypesSchema()
	recs := buildBatches(t, mem, sch, allTypesRows())
	defer releaseAll(recs)
	out := writeAll(t, Arrow, sch, recs, Options{Mem: mem})
	got, gotSchema := readIPC(t, out, mem)
	defer releaseAll(got)
	if !gotSchema.Equal(sch) {
		t.Fatalf("schema read back\n%s\nwant\n%s", gotSchema, sch)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d batches read back, want %d", len(got), len(recs))
	}
	var cols []*arrow.Chunked
	for i, f := range sch.Fields() {
		c := arrow.NewChunked(f.Type, column0(got, i))
		defer c.Release()
		cols = append(cols, c)
		sameValues(t, f.Name, column0(recs, i), c)
	}
	checkGolden(t, "arrow_readback.golden", describe(gotSchema, cols))
}

// TestParquetRoundTrip reads the Parquet file back with pqarrow: the
// Parquet schema (golden), the Arrow types (timestamp[ns] stays ns) and
// every value.
func TestParquetRoundTrip(t *testing.T) {
	mem := checkedMem(t)
	sch := allTypesSchema()
	recs := buildBatches(t, mem, sch, allTypesRows())
	defer releaseAll(recs)
	out := writeAll(t, Parquet, sch, recs, Options{Mem: mem})

	tbl := readParquet(t, out)
	defer tbl.Release()
	if tbl.NumRows() != 5 {
		t.Fatalf("%d rows read back, want 5", tbl.NumRows())
	}
	var cols []*arrow.Chunked
	for i, f := range sch.Fields() {
		c := tbl.Column(i).Data()
		cols = append(cols, c)
		sameValues(t, f.Name, column0(recs, i), c)
	}
	if got := tbl.Schema().Field(0).Type; !arrow.TypeEqual(got, &arrow.TimestampType{Unit: arrow.Nanosecond}) {
		t.Errorf("time reads back as %s, want timestamp[ns]", got)
	}

	pf, err := file.NewParquetReader(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var b bytes.Buffer
	schema.PrintSchema(pf.MetaData().Schema.Root(), &b, 2)
	fmt.Fprintf(&b, "row groups: %d\n", pf.NumRowGroups())
	b.Write(describe(tbl.Schema(), cols))
	checkGolden(t, "parquet_readback.golden", b.Bytes())
}
