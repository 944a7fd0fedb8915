//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseDDL(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want *ddlPlan // nil: not DDL
	}{
		{"CREATE SCHEMA s", &ddlPlan{op: ddlCreateSchema, db: "s"}},
		{"create schema if not exists apron.s;", &ddlPlan{op: ddlCreateSchema, db: "s", ifFlag: true}},
		{"DROP SCHEMA IF EXISTS s CASCADE", &ddlPlan{op: ddlDropSchema, db: "s", ifFlag: true, cascade: true}},
		{"DROP SCHEMA s RESTRICT", &ddlPlan{op: ddlDropSchema, db: "s"}},
		{"DROP TABLE t", &ddlPlan{op: ddlDropTable, db: "cur", table: "t"}},
		{`drop table if exists apron."my db"."a ""b"""`, &ddlPlan{op: ddlDropTable, db: "my db", table: `a "b"`, ifFlag: true}},
		{"-- c\nCREATE /* x */ TABLE d.t (time TIMESTAMP NOT NULL, v DECIMAL(10, 2), s CHARACTER VARYING (20) NULL)",
			&ddlPlan{op: ddlCreateTable, db: "d", table: "t", columns: []ddlColumn{
				{name: "time", typ: "TIMESTAMP", notNull: true}, {name: "v", typ: "DECIMAL(10, 2)"}, {name: "s", typ: "CHARACTER VARYING(20)"}}}},
		{"SELECT 1", nil},
		{"INSERT INTO t VALUES (1)", nil},
		{"CREATE TABLE t (x VARCHAR DEFAULT 'a')", nil}, // a string literal: not lexed as DDL, so DuckDB's admission refuses it
	} {
		got, ok, err := parseDDL(tc.sql, "cur")
		if err != nil {
			t.Errorf("%q: %v", tc.sql, err)
			continue
		}
		if tc.want == nil {
			if ok {
				t.Errorf("%q: taken as DDL: %+v", tc.sql, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v (ok %v), want %+v", tc.sql, got, ok, tc.want)
		}
	}
	for _, sql := range []string{
		"CREATE VIEW v AS SELECT 1",
		"CREATE TABLE t AS SELECT 1",
		"CREATE TABLE t (time TIMESTAMP",
		"CREATE TABLE t (time TIMESTAMP,)",
		"CREATE TABLE t ()",
		"CREATE TABLE t (time TIMESTAMP) extra",
		"CREATE TABLE t (time TIMESTAMP, PRIMARY KEY (time))",
		"CREATE TABLE t (time TIMESTAMP PRIMARY KEY)",
		"CREATE TABLE t (time TIMESTAMP); DROP TABLE u",
		"CREATE TABLE a.b.c.d (time TIMESTAMP)",
		"CREATE TABLE other.b.c (time TIMESTAMP)",
		"CREATE TABLE system.x (time TIMESTAMP)",
		"DROP TABLE t CASCADE",
		"DROP SCHEMA system",
		"DROP TABLE",
		"DROP INDEX i",
		"CREATE OR REPLACE TABLE t (time TIMESTAMP)",
		"CREATE TEMP TABLE t (time TIMESTAMP)",
		"CREATE TABLE IF EXISTS t (time TIMESTAMP)",
	} {
		if p, ok, err := parseDDL(sql, "cur"); !ok || !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: ok %v, err %v, plan %+v; want refused", sql, ok, err, p)
		}
	}
	if _, ok, err := parseDDL("DROP TABLE t", ""); !ok || !errors.Is(err, ErrSyntax) {
		t.Errorf("a table without a database and no current one: %v %v", ok, err)
	}
	// A CREATE TABLE over the statement size limit is refused before it is
	// tokenized.
	huge := "CREATE TABLE d.t (time TIMESTAMP" + strings.Repeat(", c INTEGER", maxSQLBytes/10) + ")"
	v := cpuEnv(t)
	if _, err := v.e.Prepare(context.Background(), huge, ""); !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a %d-byte CREATE TABLE: %v", len(huge), err)
	}
	if _, ok, err := parseDDL("DROP TABLE t", ""); !ok || !errors.Is(err, ErrSyntax) {
		t.Errorf("a table without a database and no current one: %v %v", ok, err)
	}
}

// FuzzParseDDL: whatever the text, parseDDL does not panic, and what it
// accepts has a name and an operation.
func FuzzParseDDL(f *testing.F) {
	for _, s := range []string{"CREATE SCHEMA s", "DROP TABLE IF EXISTS a.b", `CREATE TABLE "x"."y" (time TIMESTAMP NOT NULL, v DECIMAL(10,2))`, "DROP SCHEMA s CASCADE;", "create table t (a b(c(d)))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		p, ok, err := parseDDL(sql, "cur")
		if !ok || err != nil {
			return
		}
		if p.op == 0 || p.db == "" || (p.op == ddlCreateTable || p.op == ddlDropTable) && p.table == "" {
			t.Fatalf("%q: accepted as %+v", sql, p)
		}
		for _, c := range p.columns {
			if c.name == "" || c.typ == "" {
				t.Fatalf("%q: column %+v", sql, c)
			}
		}
	})
}
