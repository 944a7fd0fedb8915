//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// TestResultColumnMetadata: a result column that is a table's column as
// stored carries the table's Flight SQL column metadata (catalog, schema,
// table, type name) and the table's nullability; other columns carry none
// (decimals their precision and scale), and neither does any column of a
// query whose columns' origins are not certain. Prepare's schema and the
// schema of the batches of Query and Run are the same, metadata included.
func TestResultColumnMetadata(t *testing.T) {
	v := newEnv(t, Config{})
	v.cpu("db", 10, 2, base)
	// origin: per result column, "table.column" or "" (no metadata).
	cases := []struct {
		name, sql, db string
		origin        []string
	}{
		{"star", "SELECT * FROM db.cpu", "", []string{"cpu.time", "cpu.host", "cpu.usage"}},
		{"star_where", "SELECT * FROM db.cpu WHERE host = 'h1' ORDER BY time LIMIT 3", "", []string{"cpu.time", "cpu.host", "cpu.usage"}},
		{"columns_and_expressions", "SELECT host AS h, c.usage, usage * 2 AS u2, TIME, count(*) OVER () AS n FROM apron.db.cpu c", "",
			[]string{"cpu.host", "cpu.usage", "", "cpu.time", ""}},
		{"current_database", "SELECT host, count(*) AS n FROM cpu GROUP BY host", "db", []string{"cpu.host", ""}},
		{"table_column_before_alias", "SELECT 1 AS host, host FROM db.cpu", "", []string{"", "cpu.host"}},
		{"alias_reference", "SELECT usage * 2 AS u2, u2 FROM db.cpu", "", []string{"", ""}},
		{"cast", "SELECT host::VARCHAR AS host, CAST(time AS TIMESTAMP) AS t FROM db.cpu", "", []string{"", ""}},
		{"rollup", "SELECT host, count(*) AS n FROM db.cpu GROUP BY ROLLUP (host)", "", []string{"", ""}},
		{"cte_of_the_name", "WITH cpu AS (SELECT 'x' AS host) SELECT host FROM cpu", "db", []string{""}},
		{"join", "SELECT a.host FROM db.cpu a JOIN db.cpu b USING (time)", "", []string{""}},
		{"union", "SELECT host FROM db.cpu UNION ALL SELECT host FROM db.cpu", "", []string{""}},
		{"subquery", "SELECT host FROM (SELECT host FROM db.cpu)", "", []string{""}},
		{"exclude", "SELECT * EXCLUDE (usage) FROM db.cpu", "", []string{"", ""}},
		{"renamed_columns", "SELECT a FROM db.cpu AS c(a)", "", []string{""}},
		{"system_table", "SELECT database_name FROM system.databases", "", []string{""}},
		{"no_table", "SELECT 42 AS answer", "", []string{""}},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := v.e.Prepare(ctx, c.sql, c.db)
			if err != nil {
				t.Fatal(err)
			}
			checkOrigins(t, "Prepare", st.Schema, c.origin)
			_, got, err := collect(v.e.Query(ctx, c.sql, c.db))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(st.Schema) {
				t.Errorf("Query's schema differs from Prepare's:\n%s\n%s", got, st.Schema)
			}
			_, got, err = collect(v.e.Run(ctx, st, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(st.Schema) {
				t.Errorf("Run's schema differs from Prepare's:\n%s\n%s", got, st.Schema)
			}
		})
	}

	t.Run("batches", func(t *testing.T) {
		// Each batch has the schema the reader announces, rows intact.
		r, err := v.e.Query(ctx, "SELECT time, host FROM db.cpu WHERE usage >= 5 ORDER BY time", "")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		var rows int64
		for r.Next() {
			rec := r.RecordBatch()
			if !rec.Schema().Equal(r.Schema()) {
				t.Fatalf("batch schema %s, reader's %s", rec.Schema(), r.Schema())
			}
			rows += rec.NumRows()
		}
		if err := r.Err(); err != nil || rows != 5 {
			t.Fatalf("%d rows, %v; want 5", rows, err)
		}
	})

	t.Run("parameters", func(t *testing.T) {
		// Several parameter rows: one execution each, one schema.
		st, err := v.e.Prepare(ctx, "SELECT host, usage FROM db.cpu WHERE usage = $1", "")
		if err != nil {
			t.Fatal(err)
		}
		checkOrigins(t, "Prepare", st.Schema, []string{"cpu.host", "cpu.usage"})
		b := array.NewFloat64Builder(v.mem)
		b.AppendValues([]float64{1, 2, 3}, nil)
		col := b.NewArray()
		b.Release()
		params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.PrimitiveTypes.Float64}}, nil), []arrow.Array{col}, 3)
		col.Release()
		defer params.Release()
		rows, got, err := collect(v.e.Run(ctx, st, params))
		if err != nil || len(rows) != 3 {
			t.Fatalf("%v, %v; want 3 rows", rows, err)
		}
		if !got.Equal(st.Schema) {
			t.Errorf("Run's schema differs from Prepare's:\n%s\n%s", got, st.Schema)
		}
	})

	t.Run("decimal", func(t *testing.T) {
		st, err := v.e.Prepare(ctx, "SELECT 1.25::DECIMAL(10, 2) AS d", "")
		if err != nil {
			t.Fatal(err)
		}
		md := flightsql.ColumnMetadata{Data: &st.Schema.Fields()[0].Metadata}
		p, okP := md.Precision()
		s, okS := md.Scale()
		if !okP || !okS || p != 10 || s != 2 {
			t.Errorf("precision %d (%v), scale %d (%v); want 10, 2", p, okP, s, okS)
		}
	})

	t.Run("explain", func(t *testing.T) {
		st, err := v.e.Prepare(ctx, "EXPLAIN SELECT host FROM db.cpu", "")
		if err != nil {
			t.Fatal(err)
		}
		checkOrigins(t, "Prepare", st.Schema, make([]string, st.Schema.NumFields()))
	})
}

// checkOrigins checks that each field of schema carries the column
// metadata of the table column origin names ("table.column", all in
// database db), or no Flight SQL metadata for "".
func checkOrigins(t *testing.T, what string, schema *arrow.Schema, origin []string) {
	t.Helper()
	if schema.NumFields() != len(origin) {
		t.Fatalf("%s: %d columns (%s), want %d", what, schema.NumFields(), schema, len(origin))
	}
	for i, f := range schema.Fields() {
		md := flightsql.ColumnMetadata{Data: &f.Metadata}
		table, hasTable := md.TableName()
		if origin[i] == "" {
			if hasTable || f.Metadata.Len() > 0 {
				t.Errorf("%s: column %d %q has metadata %s, want none", what, i, f.Name, f.Metadata)
			}
			continue
		}
		want := strings.SplitN(origin[i], ".", 2)
		catalogName, _ := md.CatalogName()
		schemaName, _ := md.SchemaName()
		typeName, _ := md.TypeName()
		got := fmt.Sprintf("%s.%s.%s", catalogName, schemaName, table)
		if got != "apron.db."+want[0] {
			t.Errorf("%s: column %d %q comes from %q, want apron.db.%s", what, i, f.Name, got, want[0])
		}
		if typeName != SQLTypeName(f.Type) {
			t.Errorf("%s: column %d %q: type name %q, want %q", what, i, f.Name, typeName, SQLTypeName(f.Type))
		}
		if wantNullable := want[1] != "time"; f.Nullable != wantNullable {
			t.Errorf("%s: column %d %q: nullable %v, want %v", what, i, f.Name, f.Nullable, wantNullable)
		}
	}
}
