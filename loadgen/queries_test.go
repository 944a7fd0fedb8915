package loadgen

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestParseStatements(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"lines", "SELECT 1\n\nSELECT 2\n", []string{"SELECT 1", "SELECT 2"}},
		{"semicolons_across_lines", "SELECT *\nFROM {table}\nWHERE host = '{host}';\nSELECT 2;", []string{"SELECT *\nFROM {table}\nWHERE host = '{host}'", "SELECT 2"}},
		{"comments_and_blanks", "-- the mix\nSELECT 1\n  -- indented comment\n\nSELECT 2", []string{"SELECT 1", "SELECT 2"}},
		{"trailing_semicolon_and_spaces", "  SELECT 1 ;  ;\n", []string{"SELECT 1"}},
		{"crlf", "SELECT 1\r\nSELECT 2\r\n", []string{"SELECT 1", "SELECT 2"}},
		{"empty", "\n-- nothing\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for i, q := range ParseStatements(tc.text) {
				if want := "sql" + string(rune('1'+i)); q.Kind != want {
					t.Errorf("statement %d kind %q, want %q", i, q.Kind, want)
				}
				got = append(got, q.SQL)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseStatements(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestBuiltinQueries(t *testing.T) {
	all, err := BuiltinQueries(nil)
	if err != nil || len(all) != 5 {
		t.Fatalf("BuiltinQueries(nil) = %d queries, %v", len(all), err)
	}
	if got := BuiltinKinds(); strings.Join(got, ",") != "point,range,aggregate,last,count" {
		t.Errorf("BuiltinKinds() = %q", got)
	}
	two, err := BuiltinQueries([]string{" Last", "point", "last", ""})
	if err != nil || len(two) != 2 || two[0].Kind != "last" || two[1].Kind != "point" {
		t.Errorf("BuiltinQueries(last, point) = %v, %v", two, err)
	}
	if _, err := BuiltinQueries([]string{"point", "nope"}); err == nil || !strings.Contains(err.Error(), "point, range, aggregate, last, count") {
		t.Errorf("unknown query: %v, want an error listing the kinds", err)
	}
	if _, err := BuiltinQueries([]string{" ", ""}); err == nil {
		t.Errorf("no names but blanks: want an error")
	}
}

func TestQueryRender(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	q := Query{SQL: "SELECT * FROM {table} WHERE host = '{host}' OR host = '{host}' -- {db}"}
	seen := map[string]bool{}
	for range 200 {
		sql := q.render(`my"db`, "cpu", 3, rng)
		head := `SELECT * FROM "my""db"."cpu" WHERE host = '`
		if !strings.HasPrefix(sql, head) || !strings.HasSuffix(sql, `' -- "my""db"`) {
			t.Fatalf("rendered %q", sql)
		}
		h, _, _ := strings.Cut(strings.TrimPrefix(sql, head), "'")
		seen[h] = true
	}
	if len(seen) != 3 || !seen["host-0"] || !seen["host-2"] {
		t.Errorf("hosts drawn %v, want host-0 … host-2", seen)
	}
	for _, b := range builtinQueries {
		if sql := b.render("bench", "cpu", 10, rng); strings.Contains(sql, "{") {
			t.Errorf("%s: placeholder left in %q", b.Kind, sql)
		}
	}
}
