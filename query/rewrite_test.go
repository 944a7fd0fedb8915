//go:build duckdb_arrow

package query

import "testing"

func TestQualifySystem(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT * FROM system.tables":                               "SELECT * FROM apron.system.tables",
		`SELECT * FROM "system"."tables"`:                           `SELECT * FROM apron."system"."tables"`,
		"SELECT * FROM SYSTEM . tables":                             "SELECT * FROM apron.SYSTEM . tables",
		"SELECT * FROM apron.system.tables":                         "SELECT * FROM apron.system.tables",
		"SELECT 'system.tables', system FROM t":                     "SELECT 'system.tables', system FROM t",
		"SELECT 1 -- system.tables\nFROM system.segments":           "SELECT 1 -- system.tables\nFROM apron.system.segments",
		"SELECT /* system.x */ 1":                                   "SELECT /* system.x */ 1",
		"SELECT t.system.x FROM t":                                  "SELECT t.system.x FROM t",
		"SELECT mysystem.x, system_x.y FROM a":                      "SELECT mysystem.x, system_x.y FROM a",
		"SELECT * FROM system.tables JOIN system.columns c ON true": "SELECT * FROM apron.system.tables JOIN apron.system.columns c ON true",
	} {
		if got := qualifySystem(in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}
