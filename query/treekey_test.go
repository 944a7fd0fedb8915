//go:build duckdb_arrow

package query

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// oldTreeKey is what treeKey replaced: the tree as encoding/json writes
// it (keys sorted), query_location taken out by a regexp, and "FUNCTION"
// looked for in the text.
func oldTreeKey(x any) (string, bool) {
	b, _ := json.Marshal(x)
	return oldQueryLocation.ReplaceAllString(string(b), ""), strings.Contains(string(b), `"FUNCTION"`)
}

var oldQueryLocation = regexp.MustCompile(`"query_location":\d+,?`)

// parsedWhere parses SELECT 1 FROM t WHERE where with DuckDB and returns the
// WHERE clause's tree.
func parsedWhere(tb testing.TB, v *env, where string) any {
	tb.Helper()
	pc, err := v.e.parser()
	if err != nil {
		tb.Fatal(err)
	}
	defer v.e.putParser(pc)
	tree, ok, err := v.e.serializeSelect(pc, "SELECT 1 FROM t WHERE "+where)
	if err != nil || !ok {
		tb.Fatalf("%s: %v %v", where, ok, err)
	}
	w, ok := whereOf(tree)
	if !ok {
		tb.Fatalf("%s: no WHERE", where)
	}
	return w
}

// TestTreeKey parses WHERE clauses with DuckDB and wants treeKey to tell
// their expressions apart exactly where the JSON text without positions
// does, and to find the same function calls: the same expression at
// another place in the text is one key, any other change of the
// expression another.
func TestTreeKey(t *testing.T) {
	v := newEnv(t, Config{})
	exprs := []string{
		"time >= '2026-01-01'",
		"time >= '2026-01-01'::TIMESTAMP",
		"time >= '2026-01-02'::TIMESTAMP",
		"time >= TIMESTAMP '2026-01-01'",
		"time >= now() - INTERVAL 10 MINUTE",
		"time >= now() - INTERVAL 10 MINUTES",
		"time >= now() - INTERVAL 11 MINUTE",
		"time >= now() - INTERVAL '10 minutes'",
		"time >= current_timestamp - INTERVAL 1 HOUR",
		"time >= 1700000000000000000",
		"time >= 1700000000000000001",
		"time >= 1.5",
		"time >= -1",
		"time >= NULL",
		"time >= true",
		"time >= 'say \"FUNCTION\"'",
		"time >= 'FUNCTION'",
		"time >= make_timestamp(2026, 1, 1, 0, 0, 0)",
		"time >= [1, 2]",
		"time >= {'a': 1}",
		"time >= '2026-01-01' AND host = 'a'",
		"time >= '2026-01-01' AND host = 'b'",
		"time >= '2026-01-01' AND host = 'a' ",
		"  time >= '2026-01-01' AND host = 'a'",
	}
	type keyed struct {
		expr       string
		old, new   string
		oldF, newF bool
	}
	var all []keyed
	for _, pad := range []string{"", "   "} {
		for _, x := range exprs {
			where := parsedWhere(t, v, pad+x)
			k := keyed{expr: x}
			k.old, k.oldF = oldTreeKey(where)
			k.new, k.newF = treeKey(where)
			if k.oldF != k.newF {
				t.Errorf("%s: function call %v, was %v", x, k.newF, k.oldF)
			}
			all = append(all, k)
		}
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if (a.old == b.old) != (a.new == b.new) {
				t.Errorf("%q and %q: same key %v, was %v", a.expr, b.expr, a.new == b.new, a.old == b.old)
			}
		}
	}
	// The two paddings of one text are the same key, and every expression
	// its own but the one with a trailing blank.
	if n := len(exprs); all[0].new != all[n].new || all[0].new == all[1].new {
		t.Errorf("keys: %q %q %q", all[0].new, all[n].new, all[1].new)
	}
}

// BenchmarkTreeKey keys the bound of a one-series query's WHERE clause,
// as treeKey does and as the JSON text did before it.
func BenchmarkTreeKey(b *testing.B) {
	where := parsedWhere(b, newEnv(b, Config{}), "host = 'host-7' AND time >= now() - INTERVAL 10 MINUTE")
	b.Run("treeKey", func(b *testing.B) {
		for b.Loop() {
			treeKey(where)
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			oldTreeKey(where)
		}
	})
}
