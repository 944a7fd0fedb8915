//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// bindShapes are expressions of the shapes DuckDB's binder is slow on:
// deep chains (its cost grows with the cube of the depth), many chains,
// wide flat expressions. Each is near maxBindCost.
func bindShapes() map[string]string {
	chain := func(n int) string { return strings.Repeat("abs(", n) + "x" + strings.Repeat(")", n) }
	plus := func(n int) string { return strings.Repeat("(", n) + "x" + strings.Repeat("+1)", n) }
	var bal func(d int) string
	bal = func(d int) string {
		if d == 0 {
			return "x"
		}
		return "(" + bal(d-1) + "+" + bal(d-1) + ")"
	}
	in := make([]string, 45000)
	for i := range in {
		in[i] = fmt.Sprint(i)
	}
	return map[string]string{
		"chain-100":    chain(100),
		"chain-200":    chain(200),
		"chain-240":    chain(240),
		"plus-240":     plus(240),
		"chains-3x200": strings.Join([]string{chain(200), chain(200), chain(200)}, ", "),
		"chains-70x70": strings.Repeat(chain(70)+", ", 69) + chain(70),
		"balanced-13":  bal(13),
		"in-45000":     "x IN (" + strings.Join(in, ",") + ")",
		"plus-3x240":   strings.Join([]string{plus(240), plus(240), plus(240)}, ", "),
	}
}

// BenchmarkBind prepares each shape through the engine (admission and
// DuckDB's bind), reporting the admission's cost estimate beside the
// time, which calibrates maxBindCost: a shape admitted must bind in about
// a second at most.
func BenchmarkBind(b *testing.B) {
	v := newEnv(b, Config{})
	ctx := context.Background()
	for name, expr := range bindShapes() {
		sql := "SELECT " + expr + " FROM (SELECT 1 AS x)"
		b.Run(name, func(b *testing.B) {
			pc, err := v.e.parser()
			if err != nil {
				b.Fatal(err)
			}
			a, err := v.e.admitOn(pc, sql, "", nil)
			cost := int64(-1)
			if a != nil {
				cost = a.cost
			}
			v.e.putParser(pc)
			if err != nil {
				b.Skipf("cost %d: refused: %v", cost, err)
			}
			for b.Loop() {
				if _, err := v.e.Prepare(ctx, sql, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cost), "cost")
		})
	}
}

// BenchmarkAdmitNew admits statements never seen before (the parse cache
// misses every time), as a client that puts its constants into the text
// sends them: the cost of parsing a statement with json_serialize_sql.
func BenchmarkAdmitNew(b *testing.B) {
	v := newEnv(b, Config{})
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		sql := fmt.Sprintf("SELECT * FROM (SELECT 'host-%d' AS host, %d AS n) WHERE host = 'host-%d' AND n > 3", i, i, i)
		if _, err := v.e.admit(ctx, sql, ""); err != nil {
			b.Fatal(err)
		}
	}
}
