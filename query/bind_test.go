//go:build duckdb_arrow

package query

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestNullTypedParam: a parameter column of Arrow type null (what
// Python's ADBC driver sends for None) binds NULL.
func TestNullTypedParam(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 4, 2, base)
	ctx := context.Background()
	st, err := v.e.Prepare(ctx, "SELECT count(*) FROM db.cpu WHERE host = $1 OR $2 IS NULL", "")
	if err != nil {
		t.Fatal(err)
	}
	host := array.NewStringBuilder(v.mem)
	host.Append("none")
	cols := []arrow.Array{host.NewArray(), array.NewNull(1)}
	host.Release()
	params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.BinaryTypes.String}, {Name: "2", Type: arrow.Null, Nullable: true}}, nil), cols, 1)
	for _, c := range cols {
		c.Release()
	}
	defer params.Release()
	rows, _, err := collect(v.e.Run(ctx, st, params))
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, "count", rows, []string{"4"})
}

// TestBoundSchema: a result DuckDB types only once the parameters are
// bound (SELECT ? AS v, … OR ? IS NULL) has, with them bound, the schema
// Run's result has; a typed one keeps Prepare's.
func TestBoundSchema(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 4, 2, base)
	ctx := context.Background()
	for _, c := range []struct {
		sql  string
		want string
	}{
		{"SELECT ? AS v", "v:int64"},
		{"SELECT count(*) AS n FROM db.cpu WHERE usage > ? OR ? IS NULL", "n:int64"},
		{"SELECT host FROM db.cpu WHERE usage > ? AND ? IS NOT NULL", "host:utf8"},
	} {
		st, err := v.e.Prepare(ctx, c.sql, "")
		if err != nil {
			t.Fatal(err)
		}
		n := st.Params.NumFields()
		fields, cols := make([]arrow.Field, n), make([]arrow.Array, n)
		for i := range n {
			b := array.NewInt64Builder(v.mem)
			b.AppendValues([]int64{1, 2}, nil)
			fields[i], cols[i] = arrow.Field{Name: "p", Type: arrow.PrimitiveTypes.Int64}, b.NewArray()
			b.Release()
		}
		params := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, 2)
		for _, c := range cols {
			c.Release()
		}
		bound, err := v.e.BoundSchema(ctx, st, params)
		if err != nil {
			t.Fatal(err)
		}
		_, ran, err := collect(v.e.Run(ctx, st, params))
		params.Release()
		if err != nil {
			t.Fatal(err)
		}
		if got := bound.Field(0).Name + ":" + bound.Field(0).Type.String(); got != c.want || !bound.Equal(ran) {
			t.Errorf("%s: bound schema %s, Run's %s; want %s", c.sql, bound, ran, c.want)
		}
	}
}

// TestTimeParams: time32 and time64 parameters (JDBC's setTime sends
// one) bind, in every unit.
func TestTimeParams(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 120, 2, base) // 12:00:00 to 12:01:59
	ctx := context.Background()
	st, err := v.e.Prepare(ctx, "SELECT count(*) FROM db.cpu WHERE CAST(time AS TIME) >= $1", "")
	if err != nil {
		t.Fatal(err)
	}
	at := int64(12*3600 + 90) // 12:01:30
	for _, c := range []struct {
		typ arrow.DataType
		v   int64
	}{
		{arrow.FixedWidthTypes.Time32s, at}, {arrow.FixedWidthTypes.Time32ms, at * 1e3},
		{arrow.FixedWidthTypes.Time64us, at * 1e6}, {arrow.FixedWidthTypes.Time64ns, at * 1e9},
	} {
		b := array.NewBuilder(v.mem, c.typ)
		switch b := b.(type) {
		case *array.Time32Builder:
			b.Append(arrow.Time32(c.v))
		case *array.Time64Builder:
			b.Append(arrow.Time64(c.v))
		}
		col := b.NewArray()
		b.Release()
		params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "1", Type: c.typ}}, nil), []arrow.Array{col}, 1)
		col.Release()
		rows, _, err := collect(v.e.Run(ctx, st, params))
		params.Release()
		if err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		equalRows(t, c.typ.String(), rows, []string{"30"})
	}
}
