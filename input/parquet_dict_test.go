package input

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestParquetDictColumns: a string column the file dictionary-encodes in
// every row group (tags, with nulls) comes as dictionary<int32, utf8>,
// with the file's values; one that falls back to plain pages (unique
// ids), a binary column and a string time column stay as they are.
func TestParquetDictColumns(t *testing.T) {
	gen := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: arrow.BinaryTypes.String},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "raw", Type: arrow.BinaryTypes.Binary},
	}, nil)
	const n = 30_000
	b := array.NewRecordBuilder(gen, schema)
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("2026-01-05T12:00:%02dZ", i%60))
		if i%9 == 4 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host-%d", i%7))
		}
		// 80 bytes each: past the 1 MiB dictionary page limit in a row
		// group, so the writer falls back to plain pages.
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%080d", i))
		b.Field(3).(*array.BinaryBuilder).Append([]byte{byte(i % 3)})
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(n/2))
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	bs, err := readAll(t, "f.parquet", bytes.NewReader(buf.Bytes()), Options{Format: Parquet, Table: "t", BatchRows: 4000})
	if err != nil {
		t.Fatal(err)
	}
	want := "time:timestamp[ns, tz=UTC],host:dictionary<values=utf8, indices=int32, ordered=false>,id:utf8,raw:binary"
	rows := 0
	for _, bt := range bs {
		if bt.Schema != want {
			t.Fatalf("schema %s, want %s", bt.Schema, want)
		}
		for _, r := range bt.Rows {
			i := rows
			host := fmt.Sprintf("host-%d", i%7) // a dictionary's ValueStr
			if i%9 == 4 {
				host = "null"
			}
			if got := fmt.Sprintf("%d %s %q", t0ns+int64(i%60)*1e9, host, fmt.Sprintf("%080d", i)); r[:len(got)] != got {
				t.Fatalf("row %d: %s, want %s…", i, r, got)
			}
			rows++
		}
	}
	if rows != n {
		t.Fatalf("%d rows, want %d", rows, n)
	}
}

// t0ns is 2026-01-05T12:00:00Z in nanoseconds.
const t0ns = int64(1767614400) * 1e9
