package flightsvc

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// testSchemas are schemas that encode differently from one another: the
// kept encodings must tell each apart, whatever the hash says.
func testSchemas() map[string]*arrow.Schema {
	md := func(kv ...string) arrow.Metadata {
		var keys, values []string
		for i := 0; i < len(kv); i += 2 {
			keys, values = append(keys, kv[i]), append(values, kv[i+1])
		}
		return arrow.NewMetadata(keys, values)
	}
	labeled := func(table string) arrow.Field {
		return arrow.Field{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true,
			Metadata: md("ARROW:FLIGHT:SQL:TABLE_NAME", table, "ARROW:FLIGHT:SQL:TYPE_NAME", "VARCHAR")}
	}
	ts := arrow.Field{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}}
	return map[string]*arrow.Schema{
		"plain":              arrow.NewSchema([]arrow.Field{ts, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil),
		"not null":           arrow.NewSchema([]arrow.Field{ts, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil),
		"renamed":            arrow.NewSchema([]arrow.Field{ts, {Name: "w", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil),
		"microseconds":       arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond}}, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil),
		"time zone":          arrow.NewSchema([]arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil),
		"table cpu":          arrow.NewSchema([]arrow.Field{ts, labeled("cpu")}, nil),
		"table mem":          arrow.NewSchema([]arrow.Field{ts, labeled("mem")}, nil),
		"schema metadata":    arrow.NewSchema([]arrow.Field{ts, labeled("cpu")}, func() *arrow.Metadata { m := md("k", "v"); return &m }()),
		"metadata reversed":  arrow.NewSchema([]arrow.Field{ts, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("ARROW:FLIGHT:SQL:TYPE_NAME", "VARCHAR", "ARROW:FLIGHT:SQL:TABLE_NAME", "cpu")}}, nil),
		"list":               arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil),
		"list of labeled":    arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int64, Metadata: md("a", "b")})}}, nil),
		"struct":             arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String})}}, nil),
		"dictionary":         arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}}}, nil),
		"list of dictionary": arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String})}}, nil),
		"empty":              arrow.NewSchema(nil, nil),
	}
}

// TestSchemaEncodings: the kept encodings are byte for byte arrow-go's,
// each schema gets its own (even one whose hash is made to collide with
// another's, as a client could try through its aliases), a schema equal
// to one seen gets the kept one, and no more than maxSchemaEncodings are
// kept.
func TestSchemaEncodings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := newSchemaEncodings(mem)
	schemas := testSchemas()
	for round := range 2 {
		for name, sc := range schemas {
			e := c.of(sc)
			if want := flight.SerializeSchema(sc, mem); !bytes.Equal(e.stream, want) || !bytes.Equal(c.serialized(sc), want) {
				t.Fatalf("round %d, %s: kept stream encoding differs from flight.SerializeSchema's", round, name)
			}
			p := ipc.GetSchemaPayload(sc, mem)
			meta := p.Meta()
			if !bytes.Equal(e.message, meta.Bytes()) {
				t.Errorf("round %d, %s: kept message differs from ipc's schema payload", round, name)
			}
			meta.Release()
			p.Release()
			if want := name == "dictionary" || name == "list of dictionary"; e.dictionaries != want {
				t.Errorf("%s: dictionaries %v, want %v", name, e.dictionaries, want)
			}
			// A schema equal to sc but made anew finds sc's encoding.
			again := arrow.NewSchema(sc.Fields(), func() *arrow.Metadata { m := sc.Metadata(); return &m }())
			if c.of(again) != e && round == 1 {
				t.Errorf("%s: an equal schema made anew was encoded again", name)
			}
		}
	}
	// Every pair's hashes collide: each still gets its own encoding.
	for an, a := range schemas {
		for bn, b := range schemas {
			if an == bn {
				continue
			}
			c.mu.Lock()
			h, e := c.hash(b), encodeSchema(a, mem)
			if old := c.m[h]; old != nil {
				c.bytes -= old.size()
			}
			c.m[h] = e
			c.bytes += e.size()
			c.mu.Unlock()
			if got := c.of(b); !bytes.Equal(got.stream, flight.SerializeSchema(b, mem)) {
				t.Fatalf("the encoding of %s kept under the hash of %s was handed out for %s", an, bn, bn)
			}
		}
	}
	for i := range 2 * maxSchemaEncodings {
		c.of(arrow.NewSchema([]arrow.Field{{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int64}}, nil))
	}
	if n := len(c.m); n > maxSchemaEncodings {
		t.Fatalf("%d encodings kept, at most %d wanted", n, maxSchemaEncodings)
	}
	// Wide results: one too large is encoded and not kept; many large
	// ones keep the kept bytes bounded.
	wide := func(cols, seed int) *arrow.Schema {
		fields := make([]arrow.Field, cols)
		for i := range fields {
			fields[i] = arrow.Field{Name: fmt.Sprintf("c%d_%d_%s", seed, i, strings.Repeat("x", 40)), Type: arrow.PrimitiveTypes.Int64}
		}
		return arrow.NewSchema(fields, nil)
	}
	huge := wide(20_000, 0)
	if e := c.of(huge); !bytes.Equal(e.stream, flight.SerializeSchema(huge, mem)) || c.m[c.hash(huge)] != nil {
		t.Fatal("a huge schema's encoding is wrong, or kept")
	}
	for i := range 200 {
		c.of(wide(1_000, i+1))
	}
	total := 0
	for _, e := range c.m {
		total += e.size()
	}
	if total != c.bytes || c.bytes > maxSchemaEncodingBytes {
		t.Fatalf("%d bytes kept (counted %d), at most %d wanted", total, c.bytes, maxSchemaEncodingBytes)
	}
}

// TestRecordStreamWriter: a result stream is, message for message and
// byte for byte, what arrow-go's Flight record writer sends (schema first,
// the schema alone for a result of no batches); and a schema with
// dictionaries, which goes through ipc.Writer, reads back.
func TestRecordStreamWriter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := newSchemaEncodings(mem)
	for _, sizes := range [][]int{{}, {1}, {3, 0, 5000}} {
		var ours, theirs capturedStream
		w := newRecordStreamWriter(&ours, c.of(testBatchSchema), mem)
		fw := flight.NewRecordWriter(&theirs, ipc.WithSchema(testBatchSchema), ipc.WithAllocator(mem))
		for i, n := range sizes {
			rec := testBatch(mem, n, i)
			meta := []byte(fmt.Sprintf("m%d", i))
			if err := w.writeWithAppMetadata(rec, meta); err != nil {
				t.Fatal(err)
			}
			if err := fw.WriteWithAppMetadata(rec, meta); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		if err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		if len(ours.sent) != len(theirs.sent) || len(ours.sent) != len(sizes)+1 {
			t.Fatalf("batches %v: %d messages sent, arrow-go's writer sends %d", sizes, len(ours.sent), len(theirs.sent))
		}
		for i := range ours.sent {
			a, b := ours.sent[i], theirs.sent[i]
			if !bytes.Equal(a.DataHeader, b.DataHeader) || !bytes.Equal(a.DataBody, b.DataBody) || !bytes.Equal(a.AppMetadata, b.AppMetadata) {
				t.Fatalf("batches %v: message %d differs from arrow-go's", sizes, i)
			}
		}
	}

	dictSchema := testSchemas()["dictionary"]
	db := array.NewDictionaryBuilder(mem, dictSchema.Field(0).Type.(*arrow.DictionaryType)).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	for _, v := range []string{"a", "b", "a", "c"} {
		if err := db.AppendString(v); err != nil {
			t.Fatal(err)
		}
	}
	col := db.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(dictSchema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	var out capturedStream
	w := newRecordStreamWriter(&out, c.of(dictSchema), mem)
	if w.ipc == nil {
		t.Fatal("a schema with a dictionary is not written through ipc.Writer")
	}
	if err := w.writeWithAppMetadata(rec, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(&out, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if !rd.Next() || !array.RecordEqual(rd.RecordBatch(), rec) {
		t.Fatalf("the dictionary batch read back differs: %v", rd.Err())
	}
}

// TestWriteChunksNoBatches: a query of no rows still streams its schema.
func TestWriteChunksNoBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cc := make(chan flight.StreamChunk)
	close(cc)
	var out capturedStream
	if err := writeChunks(context.Background(), &out, newSchemaEncodings(mem).of(testBatchSchema), cc, mem); err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(&out, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if !rd.Schema().Equal(testBatchSchema) || rd.Next() {
		t.Fatalf("read back schema %s and a batch %v, want %s and none", rd.Schema(), rd.Next(), testBatchSchema)
	}
}
