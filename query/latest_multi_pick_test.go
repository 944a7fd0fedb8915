//go:build duckdb_arrow

package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// TestMultiPicker: a file's latest row of each combination of key values
// (multiPicker) is the row of the greatest time, NULL a value of its own
// in each column, over batches whose rows are in no order of time, each
// with dictionaries of its own (values in another order), the first
// without the region column (NULL in every row), checked against every
// row looked at.
func TestMultiPicker(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 500
	type pick struct {
		batch, row int
		time       int64
	}
	want := map[string]pick{}
	times := rng.Perm(4 * n) // distinct: no ties
	value := func(prefix string, k int) *string {
		if rng.IntN(9) == 0 {
			return nil
		}
		s := fmt.Sprintf("%s%d", prefix, rng.IntN(k))
		return &s
	}
	var recs []arrow.RecordBatch
	for bi := range 3 {
		ts := make([]arrow.Timestamp, n)
		hosts, regions := make([]*string, n), make([]*string, n)
		for r := range n {
			ts[r] = arrow.Timestamp(times[bi*n+r])
			hosts[r], regions[r] = value("h", 20), value("r", 3)
			if bi == 0 {
				regions[r] = nil
			}
			key := fmt.Sprint(deref(hosts[r]), "|", deref(regions[r]))
			if w, ok := want[key]; !ok || int64(ts[r]) > w.time {
				want[key] = pick{bi, r, int64(ts[r])}
			}
		}
		tb := array.NewTimestampBuilder(mem, tsNs)
		tb.AppendValues(ts, nil)
		cols := []arrow.Array{tb.NewArray()}
		tb.Release()
		fields := []arrow.Field{{Name: "time", Type: tsNs}}
		names := []string{"host", "region"}
		for ci, vals := range [][]*string{hosts, regions} {
			if bi == 0 && ci == 1 {
				continue // no region column
			}
			db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
			// Each batch's dictionary in an order of its own.
			sb := array.NewStringBuilder(mem)
			for _, k := range rng.Perm(20) {
				sb.Append(fmt.Sprintf("%s%d", names[ci][:1], k))
			}
			order := sb.NewStringArray()
			sb.Release()
			if err := db.InsertStringDictValues(order); err != nil {
				t.Fatal(err)
			}
			order.Release()
			for _, v := range vals {
				if v == nil {
					db.AppendNull()
				} else if err := db.AppendString(*v); err != nil {
					t.Fatal(err)
				}
			}
			cols = append(cols, db.NewArray())
			db.Release()
			fields = append(fields, arrow.Field{Name: names[ci], Type: cols[len(cols)-1].DataType(), Nullable: true})
		}
		recs = append(recs, array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, n))
		for _, c := range cols {
			c.Release()
		}
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	p := newMultiPicker([]string{"host", "region"})
	for bi, rec := range recs {
		if !p.add(bi, rec) {
			t.Fatalf("batch %d not taken", bi)
		}
	}
	// A picker bounded below the combinations gives up.
	small := newMultiPicker([]string{"host", "region"})
	small.limit = len(want) - 1
	took := true
	for bi, rec := range recs {
		took = took && small.add(bi, rec)
	}
	if took || len(small.picks) > small.limit {
		t.Errorf("a picker of at most %d combinations took all %d (holds %d)", small.limit, len(want), len(small.picks))
	}
	if len(p.picks) != len(want) {
		t.Errorf("%d picks, want %d combinations", len(p.picks), len(want))
	}
	checkPickerLimit(t, recs)
	for _, pk := range p.picks {
		rec := recs[pk.chunk]
		key := fmt.Sprint(stringAt(rec, "host", int(pk.row)), "|", stringAt(rec, "region", int(pk.row)))
		w, ok := want[key]
		if !ok || w.batch != pk.chunk || w.row != int(pk.row) || w.time != pk.time {
			t.Errorf("%s: picked batch %d row %d (time %d), want %+v", key, pk.chunk, pk.row, pk.time, w)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}

// stringAt is rec's column col at row r, "<NULL>" for NULL or no column.
func stringAt(rec arrow.RecordBatch, col string, r int) string {
	ix := rec.Schema().FieldIndices(col)
	if len(ix) == 0 {
		return "<NULL>"
	}
	d := rec.Column(ix[0]).(*array.Dictionary)
	if d.IsNull(r) {
		return "<NULL>"
	}
	return d.Dictionary().(*array.String).Value(d.GetValueIndex(r))
}

// TestKeySpec: key columns named in the read-ahead's hint and wants
// (keySpec) read back as the table names them, one or several; a column
// the table no longer has makes the whole spec unusable.
func TestKeySpec(t *testing.T) {
	tbl := &catalog.Table{Columns: []catalog.Column{{Name: "time"}, {Name: "Host"}, {Name: "region"}}}
	for _, c := range []struct {
		cols []string
		want []string
	}{
		{[]string{"host"}, []string{"Host"}},
		{[]string{"host", "REGION"}, []string{"Host", "region"}},
		{[]string{"host", "az"}, nil},
	} {
		got, ok := keyColumns(tbl, keySpec(c.cols))
		if !slices.Equal(got, c.want) || ok != (c.want != nil) {
			t.Errorf("%q: %q %v, want %q", c.cols, got, ok, c.want)
		}
	}
}

// checkPickerLimit: a latestPicker of the host column of recs (values
// h0…h19 and NULL), by value and by series id, takes every batch when it
// may hold a pick for each value (and NULL), and gives up when it may
// hold one fewer.
func checkPickerLimit(t *testing.T, recs []arrow.RecordBatch) {
	t.Helper()
	hosts := map[string]bool{}
	for _, rec := range recs {
		col := rec.Column(rec.Schema().FieldIndices("host")[0])
		for r := range col.Len() {
			if col.IsValid(r) {
				hosts[stringAt(rec, "host", r)] = true
			}
		}
	}
	space := new(buffer.SeriesSpace)
	values := make([]string, 20)
	for k := range values {
		values[k] = fmt.Sprintf("h%d", k)
	}
	idsOf := func(rec arrow.RecordBatch) *buffer.SeriesIDs {
		dict := rec.Column(rec.Schema().FieldIndices("host")[0]).(*array.Dictionary).Dictionary().(*array.String)
		ids := &buffer.SeriesIDs{Space: space, Values: values, IDs: make([]int32, dict.Len())}
		for i := range dict.Len() {
			ids.IDs[i] = int32(slices.Index(values, dict.Value(i)))
		}
		return ids
	}
	for _, byID := range []bool{false, true} {
		for _, limit := range []int{len(hosts) + 1, len(hosts) - 1} { // + NULL's
			p := newLatestPicker("host", 0, true)
			p.limit = limit
			if byID {
				p.byID = []int32{}
			}
			took := true
			for bi, rec := range recs {
				var ids *buffer.SeriesIDs
				if byID {
					ids = idsOf(rec)
				}
				took = took && p.add(bi, rec, ids)
			}
			if took != (limit > len(hosts)) || len(p.picks) > limit {
				t.Errorf("by id %v: a picker of at most %d values took every batch: %v (holds %d picks of %d values and NULL)", byID, limit, took, len(p.picks), len(hosts))
			}
		}
	}
}
