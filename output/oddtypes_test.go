package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// oddBatch is a batch of types the server does not return today but
// Arrow has: each must render (natively or by ValueStr) in every format,
// and Parquet must write what pqarrow cannot (list views, unions, run-end
// encoded) as text.
func oddBatch(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	cols := []struct {
		name string
		dt   arrow.DataType
		json string
	}{
		{"f16", arrow.FixedWidthTypes.Float16, `[1.5, null, -0.25]`},
		{"ree", arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), ""},
		{"lview", arrow.ListViewOf(arrow.PrimitiveTypes.Int64), `[[1, 2], null, []]`},
		{"union", arrow.DenseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, []arrow.UnionTypeCode{0, 1}), `[[0, 5], [1, "x"], [0, null]]`},
		{"nul", arrow.Null, `[null, null, null]`},
		{"dict_int", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int64}, ""},
		{"llist", arrow.LargeListOf(arrow.BinaryTypes.String), `[["a", null], null, []]`},
		{"fslist", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64), `[[1, 2], null, [3.5, null]]`},
		{"dec256", &arrow.Decimal256Type{Precision: 40, Scale: 2}, `["12345678901234567890123456789012345678.90", null, "-0.01"]`},
		{"t32s", arrow.FixedWidthTypes.Time32s, `[3661, null, 0]`},
		{"iv_m", arrow.FixedWidthTypes.MonthInterval, `[{"months": 13}, null, {"months": -1}]`},
		{"iv_dt", arrow.FixedWidthTypes.DayTimeInterval, `[{"days": 1, "milliseconds": 1500}, null, {"days": 0, "milliseconds": 0}]`},
	}
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.dt, Nullable: true}
		switch c.name {
		case "ree":
			b := array.NewRunEndEncodedBuilder(mem, arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String)
			b.Append(2)
			b.ValueBuilder().(*array.StringBuilder).Append("run")
			b.AppendNull()
			arrs[i] = b.NewArray()
			b.Release()
		case "dict_int":
			b := array.NewDictionaryBuilder(mem, c.dt.(*arrow.DictionaryType)).(*array.Int64DictionaryBuilder)
			_ = b.Append(7)
			b.AppendNull()
			_ = b.Append(7)
			arrs[i] = b.NewArray()
			b.Release()
		default:
			a, _, err := array.FromJSON(mem, c.dt, strings.NewReader(c.json))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			arrs[i] = a
		}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, 3)
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

// TestOddTypes writes oddBatch in every format: text formats to a golden
// file, Arrow and Parquet read back.
func TestOddTypes(t *testing.T) {
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			mem := checkedMem(t)
			rec := oddBatch(t, mem)
			defer rec.Release()
			out := writeAll(t, f, rec.Schema(), []arrow.RecordBatch{rec}, Options{Mem: mem})
			switch f {
			case Arrow:
				got, schema := readIPC(t, out, mem)
				defer releaseAll(got)
				if !schema.Equal(rec.Schema()) || len(got) != 1 {
					t.Fatalf("read back %s, %d batches", schema, len(got))
				}
				for i, fl := range schema.Fields() {
					c := arrow.NewChunked(fl.Type, []arrow.Array{got[0].Column(i)})
					sameValues(t, fl.Name, []arrow.Array{rec.Column(i)}, c)
					c.Release()
				}
			case Parquet:
				tbl := readParquet(t, out)
				defer tbl.Release()
				var b bytes.Buffer
				b.Write(describe(tbl.Schema(), chunks(tbl)))
				checkGolden(t, "odd_parquet.golden", b.Bytes())
			default:
				checkGolden(t, "odd_"+string(f)+".golden", out)
			}
		})
	}
}

func chunks(tbl arrow.Table) []*arrow.Chunked {
	out := make([]*arrow.Chunked, tbl.NumCols())
	for i := range out {
		out[i] = tbl.Column(i).Data()
	}
	return out
}
