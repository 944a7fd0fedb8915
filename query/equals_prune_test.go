//go:build duckdb_arrow

package query

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestExcludedByEquals: a row group is skipped for an equality only when
// none of its rows can hold the value, and, in a file sorted by the
// column, every row group not holding it is skipped.
func TestExcludedByEquals(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{{Name: "Host", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	const groups, per = 10, 100
	var hosts []string // of each row, sorted
	for i := range groups * per {
		h := fmt.Sprintf("host-%03d", i/37)
		hosts = append(hosts, h)
		if i%11 == 0 {
			b.Field(0).AppendNull()
			hosts[i] = ""
		} else {
			b.Field(0).(*array.StringBuilder).Append(h)
		}
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sch, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(per), parquet.WithAllocator(mem)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	if md.NumRowGroups() != groups {
		t.Fatalf("%d row groups, want %d", md.NumRowGroups(), groups)
	}
	gs := decodeGroupStats(md)
	skipped := 0
	for _, v := range []string{"host-000", "host-013", "host-026", "host-027", "host-005x", "a", "zzz", ""} {
		for g := range groups {
			holds := false
			for _, h := range hosts[g*per : (g+1)*per] {
				holds = holds || h == v && h != ""
			}
			got := gs.excludedByEquals(g, map[string][]string{"host": {v}})
			if got && holds {
				t.Errorf("row group %d skipped for host = %q, which it holds", g, v)
			}
			if !got && !holds && v != "" && v != "host-005x" {
				t.Errorf("row group %d read for host = %q, which it does not hold (sorted: its statistics exclude it)", g, v)
			}
			if got {
				skipped++
			}
		}
	}
	if skipped == 0 {
		t.Error("nothing skipped")
	}
	// Several values: skipped only if it holds none; no value: skipped.
	for g := range groups {
		if gs.excludedByEquals(g, map[string][]string{"host": {"zzz", hosts[g*per+1]}}) {
			t.Errorf("row group %d skipped for a value it holds among others", g)
		}
		if !gs.excludedByEquals(g, map[string][]string{"host": {}}) {
			t.Errorf("row group %d read for a contradiction (host = a AND host = b)", g)
		}
		if gs.excludedByEquals(g, map[string][]string{"n": {"x"}, "missing": {"x"}}) {
			t.Errorf("row group %d skipped by a column that is no string, or missing", g)
		}
	}
}
