//go:build duckdb_arrow

package query

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apron-db/apron/catalog"
)

// The last-value cache DDL, read by the same strict grammar as the rest
// (ddl.go) and carried out on the catalog:
//
//	CREATE LAST VALUE CACHE [IF NOT EXISTS] [name] ON [[apron.]db.]table [(key, …)] [COUNT n]
//	DROP LAST VALUE CACHE [IF EXISTS] [name] ON [[apron.]db.]table
//
// Without a key list the keys are the table's string columns; () makes
// the whole table one series. COUNT is the rows kept per key (1 to
// catalog.MaxLastValueCount, default 1). A DROP that names the cache
// must name the table's.

const lastValueForms = "CREATE LAST VALUE CACHE [IF NOT EXISTS] [name] ON [db.]table [(key, …)] [COUNT n]; DROP LAST VALUE CACHE [IF EXISTS] [name] ON [db.]table"

// lastValueDDL is a parsed last-value cache statement.
type lastValueDDL struct {
	name  string
	keys  []string // nil: the default
	count int
}

// parseLastValueDDL reads the rest of CREATE / DROP LAST, LAST read.
func parseLastValueDDL(s *ddlScanner, create bool, database string) (*ddlPlan, bool, error) {
	bad := func(format string, args ...any) (*ddlPlan, bool, error) {
		return nil, true, newError(ErrSyntax, "%s; the last-value cache DDL: %s", fmt.Sprintf(format, args...), lastValueForms)
	}
	if !s.word("VALUE") || !s.word("CACHE") {
		return bad("expected LAST VALUE CACHE")
	}
	p := &ddlPlan{op: ddlDropLastValue, lvc: &lastValueDDL{}}
	if create {
		p.op = ddlCreateLastValue
	}
	if s.word("IF") {
		if create && !s.word("NOT") {
			return bad("expected IF NOT EXISTS")
		}
		if !s.word("EXISTS") {
			return bad("expected EXISTS after IF")
		}
		p.ifFlag = true
	}
	if t, ok := s.peek(); ok && !t.isWord("ON") {
		n, ok := s.name()
		if !ok {
			return bad("expected a cache name or ON")
		}
		p.lvc.name = n
	}
	if !s.word("ON") {
		return bad("expected ON [db.]table")
	}
	names, ok := s.qualifiedName()
	if !ok {
		return bad("expected a table name after ON")
	}
	var msg string
	if p.db, p.table, msg = tableName(names, database); msg != "" {
		return bad("%s", msg)
	}
	if strings.EqualFold(p.db, SystemSchema) {
		return nil, true, newError(ErrSyntax, "the %s schema's tables have no last-value caches", SystemSchema)
	}
	if create {
		if s.symbol("(") {
			p.lvc.keys = []string{}
			if !s.symbol(")") {
				for {
					n, ok := s.name()
					if !ok {
						return bad("expected a key column name")
					}
					p.lvc.keys = append(p.lvc.keys, n)
					if s.symbol(")") {
						break
					}
					if !s.symbol(",") {
						return bad("expected , or ) in the key columns")
					}
				}
			}
		}
		if s.word("COUNT") {
			t, ok := s.peek()
			if !ok || t.kind != tokNumber {
				return bad("expected a number after COUNT")
			}
			s.i++
			n, err := strconv.Atoi(t.text)
			if err != nil || n < 1 || n > catalog.MaxLastValueCount {
				return bad("COUNT %s is outside 1 to %d", t.text, catalog.MaxLastValueCount)
			}
			p.lvc.count = n
		}
	}
	s.symbol(";")
	if t, ok := s.peek(); ok {
		return bad("unexpected %q", t.text)
	}
	return p, true, nil
}

// execLastValueDDL carries out a parsed last-value cache statement.
func (e *Engine) execLastValueDDL(p *ddlPlan) error {
	if p.op == ddlCreateLastValue {
		_, _, err := e.wb.CreateLastValueCache(catalog.LastValueCache{Database: p.db, Table: p.table, Name: p.lvc.name, Keys: p.lvc.keys, Count: p.lvc.count}, p.ifFlag)
		return err
	}
	if p.lvc.name != "" {
		if c, ok := e.wb.LastValueCache(p.db, p.table); ok && c.Definition().Name != p.lvc.name {
			return newError(ErrNotFound, "table %q.%q has no last-value cache %q (its cache is %q)", p.db, p.table, p.lvc.name, c.Definition().Name)
		}
	}
	_, err := e.wb.DropLastValueCache(p.db, p.table, p.ifFlag)
	return err
}
