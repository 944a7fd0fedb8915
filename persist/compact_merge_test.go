package persist

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
)

// mergeTable is db.m: time, host, usage, and with later, region (a
// second key) and extra, added after the first files were written.
func mergeTable(later bool) *catalog.Table {
	cols := []catalog.Column{
		{Name: "time", Type: catalog.TimeType(), ID: 0},
		{Name: "host", Type: arrow.BinaryTypes.String, ID: 1},
		{Name: "usage", Type: arrow.PrimitiveTypes.Float64, ID: 2},
	}
	if later {
		cols = append(cols,
			catalog.Column{Name: "region", Type: arrow.BinaryTypes.String, ID: 3},
			catalog.Column{Name: "extra", Type: arrow.PrimitiveTypes.Int64, ID: 4})
	}
	return &catalog.Table{Database: "db", Name: "m", ID: 1, Columns: cols}
}

// mergeChunk is n random rows of db.m as the buffer holds them: strings
// dictionary-encoded, few hosts and regions, some null, times from a
// narrow range so that rows of one series tie on time within and across
// files.
func mergeChunk(r *rand.Rand, mem memory.Allocator, n int, later bool) Chunk {
	tbl := mergeTable(later)
	fields := make([]arrow.Field, 0, len(tbl.Columns))
	for _, c := range tbl.Columns {
		t := c.Type
		if t.ID() == arrow.STRING {
			t = dictType
		}
		fields = append(fields, arrow.Field{Name: c.Name, Type: t, Nullable: c.Name != "time"})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	day := t0.Truncate(24 * 3600e9).UnixNano()
	c := Chunk{MinTime: math.MaxInt64, MaxTime: math.MinInt64}
	str := func(fb array.Builder, prefix string, values int) {
		db := fb.(*array.BinaryDictionaryBuilder)
		if r.IntN(10) == 0 {
			db.AppendNull()
			return
		}
		if err := db.AppendString(fmt.Sprintf("%s-%d", prefix, r.IntN(values))); err != nil {
			panic(err)
		}
	}
	for range n {
		ts := day + r.Int64N(500)*1e9
		c.MinTime, c.MaxTime = min(c.MinTime, ts), max(c.MaxTime, ts)
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		str(b.Field(1), "host", 7)
		if r.IntN(8) == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(r.Float64())
		}
		if later {
			str(b.Field(3), "region", 3)
			b.Field(4).(*array.Int64Builder).Append(r.Int64())
		}
	}
	c.Rec = b.NewRecordBatch()
	return c
}

// putPart writes p's file into s's store, releases its chunks, and
// returns the file's entry.
func putPart(t *testing.T, s *Store, p Part, mem memory.Allocator) File {
	t.Helper()
	tmp, err := s.WriteTemp(context.Background(), p, mem)
	releaseChunks(p.Chunks)
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Remove()
	if err := s.UploadParquet(context.Background(), tmp); err != nil {
		t.Fatal(err)
	}
	return tmp.File()
}

// tempBytes is the contents of t.
func tempBytes(t *testing.T, f *TempFile) []byte {
	t.Helper()
	data, err := io.ReadAll(io.NewSectionReader(f.f, 0, f.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMergedAsSorted: the streaming merge of a compaction's inputs gives
// the rows, in order, that reading them all and sorting them gives (the
// way segments are persisted): over inputs of two keys, one of which the
// earlier files predate, nulls, ties on every key and time within and
// across files, inputs of several batches and row groups, and rows
// expired by a cutoff.
func TestMergedAsSorted(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			r := rand.New(rand.NewPCG(seed, 7))
			ctx := context.Background()
			objects := objstore.NewMemory()
			defer objects.Close()
			s := openStore(t, objects, t.TempDir())
			day, _ := parseDay(t0.Format("2006-01-02"))
			var files []File
			anyLater := false
			for i := range 2 + r.IntN(4) {
				later := i >= 1 && r.IntN(2) == 0 || i >= 3
				anyLater = anyLater || later
				var chunks []Chunk
				// Some inputs span several of the merge's batches, and
				// row groups.
				n := []int{1, 50, 3000, mergeBatchRows + 500, 3 * mergeBatchRows, 45000}[r.IntN(6)]
				if i == 0 {
					n = 45000 // several row groups of 20,000
				}
				for done := 0; done < n; done += 4096 {
					chunks = append(chunks, mergeChunk(r, mem, min(4096, n-done), later))
				}
				files = append(files, putPart(t, s, Part{Segment: uint64(i + 1), Database: "db", Table: "m", Day: day,
					Schema: mergeTable(later), Chunks: chunks, RowGroupRows: 20000}, mem))
			}
			for _, tc := range []struct {
				cutoff     int64
				dictValues int
			}{{math.MinInt64, maxDictValues}, {t0.Truncate(24*3600e9).UnixNano() + 250e9, maxDictValues}, {math.MinInt64, 4}} {
				cutoff := tc.cutoff
				// With 4, hosts (7 values) are merged as strings, regions
				// (3) in the file's dictionary.
				mergeDictValues = tc.dictValues
				defer func() { mergeDictValues = maxDictValues }()
				in := CompactInput{Generation: 1, Database: "db", Table: "m", Partition: t0.Format("2006-01-02"), Schema: mergeTable(true),
					Files: files, Cutoff: cutoff, Mem: mem}
				var inputs []*compactFile
				for _, f := range files {
					cf, err := s.openForCompaction(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					defer cf.close()
					inputs = append(inputs, cf)
				}
				if !mergeable(inputs, in.Schema) {
					t.Fatal("Apron's own files are not mergeable")
				}
				dicts, err := mergeDictionaries(ctx, inputs, in, parquetSchema(in.Schema.ArrowSchema()), []int{1, 3})
				if err != nil {
					t.Fatal(err)
				}
				if (dicts[0] == nil) != (tc.dictValues < 7) || (dicts[1] != nil) != anyLater {
					t.Fatalf("dictionaries of host and region: %q", dicts)
				}
				merged, err := s.writeTemp(ctx, "merged", "db", "m", day, func(w io.Writer) (partFile, error) {
					return s.writeMerged(ctx, w, inputs, in)
				})
				if err != nil {
					t.Fatal(err)
				}
				defer merged.Remove()
				whole, err := s.writeSortedWhole(ctx, "whole", day, inputs, in)
				if err != nil {
					t.Fatal(err)
				}
				defer whole.Remove()
				got := readParquetBytes(t, tempBytes(t, merged), mem)
				defer got.Release()
				want := readParquetBytes(t, tempBytes(t, whole), mem)
				defer want.Release()
				if !array.RecordEqual(got, want) {
					t.Fatalf("cutoff %d: merged %d rows differ from sorted %d rows:\n%v\nwant\n%v", cutoff, got.NumRows(), want.NumRows(),
						head(got), head(want))
				}
				g, w := merged.File(), whole.File()
				if g.Rows != w.Rows || g.MinTime != w.MinTime || g.MaxTime != w.MaxTime {
					t.Fatalf("merged file rows %d time [%d, %d], sorted %d [%d, %d]", g.Rows, g.MinTime, g.MaxTime, w.Rows, w.MinTime, w.MaxTime)
				}
			}
		})
	}
}

func head(rec arrow.RecordBatch) arrow.RecordBatch {
	return rec.NewSlice(0, min(rec.NumRows(), 20))
}

// TestMergeableNeedsDeclaredOrder: a file whose row groups do not declare
// the order (not written by Apron) is not merged but read whole and
// sorted; its rows are compacted all the same. One that declares the
// order and breaks it is merged, and loses no row.
func TestMergeableNeedsDeclaredOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	objects := objstore.NewMemory()
	defer objects.Close()
	s := openStore(t, objects, t.TempDir())
	r := rand.New(rand.NewPCG(1, 2))
	day, _ := parseDay(t0.Format("2006-01-02"))
	var files []File
	for i := range 2 {
		files = append(files, putPart(t, s, Part{Segment: uint64(i + 1), Database: "db", Table: "m", Day: day,
			Schema: mergeTable(false), Chunks: []Chunk{mergeChunk(r, mem, 1000, false)}}, mem))
	}
	// The second file again, rewritten by pqarrow without the sorting
	// columns.
	rec := readParquetBytes(t, readObject(t, objects, files[1].Path), mem)
	foreign := putForeign(t, objects, files[1], 3, rec, nil, mem)
	rec.Release()
	// Rows in no order, in a file that declares Apron's (host, then
	// time): merged as declared, it must neither stop nor lose a row.
	c := mergeChunk(r, mem, 1000, false)
	lying := putForeign(t, objects, files[1], 4, c.Rec, []parquet.SortingColumn{{ColumnIdx: 1}, {ColumnIdx: 0}}, mem)
	c.Rec.Release()
	for i, tc := range []struct {
		files     []File
		mergeable bool
	}{{files, true}, {[]File{files[0], foreign}, false}, {[]File{files[0], lying}, true}} {
		var inputs []*compactFile
		for _, f := range tc.files {
			cf, err := s.openForCompaction(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			defer cf.close()
			inputs = append(inputs, cf)
		}
		if got := mergeable(inputs, mergeTable(false)); got != tc.mergeable {
			t.Fatalf("mergeable %v, want %v", got, tc.mergeable)
		}
		c, err := s.Compact(ctx, CompactInput{Generation: uint64(2 + i), Database: "db", Table: "m", Partition: t0.Format("2006-01-02"),
			Schema: mergeTable(false), Files: tc.files, Cutoff: math.MinInt64, Mem: mem})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Files) != 1 || c.Files[0].Rows != 2000 {
			t.Fatalf("compaction wrote %+v, want one file of 2000 rows", c.Files)
		}
	}
}

// putForeign stores rec as a file pqarrow writes, declaring sorting, in
// place of segment seg's file like f, and returns its entry.
func putForeign(t *testing.T, objects objstore.Store, f File, seg uint64, rec arrow.RecordBatch, sorting []parquet.SortingColumn, mem memory.Allocator) File {
	t.Helper()
	var buf bytes.Buffer
	props, arrProps := WriterProperties(mem, sorting, nil)
	fw, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, arrProps)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	day, _ := parseDay(f.Partition)
	f.Path, f.Size = ParquetObject(f.Database, f.Table, day, seg), int64(buf.Len())
	if err := objects.Put(context.Background(), f.Path, bytes.NewReader(buf.Bytes()), f.Size, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func readObject(t *testing.T, objects objstore.Store, name string) []byte {
	t.Helper()
	rd, err := objects.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
