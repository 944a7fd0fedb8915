//go:build duckdb_arrow

package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// DELETE FROM [db.]table [WHERE condition] is not run by DuckDB either.
// A table with persisted files and a condition without a subquery is
// deleted from by a rewrite of its files (delete_rewrite.go). Otherwise
// it is a replace (buffer/replace.go) of the table by the rows that stay,
//
//	SELECT * FROM table WHERE NOT coalesce((condition), false)
//
// run as a query (admitted as any query: the condition may read what the
// caller may read) and written back through the write path. So readers
// see the table before the delete or after it, never a part of it, the
// rows are gone for good once it answers (and not before: a crash in
// between leaves the table as it was), and the answer is the count of
// rows deleted. The condition is checked to be one expression by DuckDB's
// parser: the WHERE of "SELECT * FROM table WHERE condition" must be
// exactly the expression inside the NOT coalesce(…) of the query that
// runs. While it runs, writes to the table are refused (ABORTED, as
// during any replace). It rewrites the whole table through memory: a
// table larger than what --buffer-mem-limit leaves cannot be deleted from
// this way (RESOURCE_EXHAUSTED, nothing deleted).

type deletePlan struct {
	db, table string
	keep      string // the query of the rows that stay
	check     string // SELECT * FROM table WHERE condition ("" without one)
	probe     string // SELECT true FROM table WHERE condition LIMIT 1 (likewise)
}

var (
	deleteHead = regexp.MustCompile(`(?is)^\s*delete\s+from\s+`)
	whereHead  = regexp.MustCompile(`(?is)^where\b`)
)

// parseDelete recognizes DELETE FROM <table> [WHERE <condition>]. ok is
// false for any other statement.
func parseDelete(sql, database string) (p *deletePlan, ok bool, err error) {
	m := deleteHead.FindStringIndex(sql)
	if m == nil {
		return nil, false, nil
	}
	bad := func(why string) (*deletePlan, bool, error) {
		return nil, true, newError(ErrSyntax, "DELETE: %s; the form supported is DELETE FROM [db.]table [WHERE condition]", why)
	}
	p = &deletePlan{}
	var rest, why string
	if p.db, p.table, rest, why = leadingTable(sql[m[1]:], database, "DELETE FROM"); why != "" {
		return bad(why)
	}
	if strings.EqualFold(p.db, SystemSchema) {
		return nil, true, newError(ErrSyntax, "DELETE: the %s tables are Apron's own and cannot be changed", SystemSchema)
	}
	target := quoteIdent(p.db) + "." + quoteIdent(p.table)
	rest = strings.TrimRight(strings.TrimSpace(rest), "; \t\r\n")
	if rest == "" {
		p.keep = "SELECT * FROM " + target + " WHERE false"
		return p, true, nil
	}
	w := whereHead.FindStringIndex(rest)
	if w == nil {
		return bad("expected WHERE and a condition after the table")
	}
	cond := rest[w[1]:]
	// The newline ends a -- comment the condition may end with.
	p.keep = "SELECT * FROM " + target + " WHERE NOT coalesce((" + cond + "\n), false)"
	p.check = "SELECT * FROM " + target + " WHERE " + cond
	p.probe = "SELECT true FROM " + target + " WHERE " + cond + "\nLIMIT 1"
	return p, true, nil
}

// prepareDelete admits the delete's query, and checks that its condition
// is one expression (see above). who must be able to write the table.
// It returns the admitted query of the rows that stay, and that of the
// rows deleted (nil without a condition).
func (e *Engine) prepareDelete(ctx context.Context, p *deletePlan, database string) (keep, check *admitted, err error) {
	if err := auth.FromContext(ctx).Write(p.db); err != nil {
		return nil, nil, err
	}
	if _, ok := e.wb.Catalog().Table(p.db, p.table); !ok {
		return nil, nil, newError(ErrNotFound, "DELETE from table %q of database %q: the table does not exist", p.table, p.db)
	}
	keep, err = e.admit(ctx, p.keep, database)
	if err != nil {
		return nil, nil, err
	}
	if p.check == "" {
		return keep, nil, nil
	}
	check, err = e.admit(ctx, p.check, database)
	if err != nil {
		return nil, nil, err
	}
	cond, ok := whereOf(check.tree)
	if !ok {
		return nil, nil, errConditionNotOne()
	}
	kept, _ := whereOf(keep.tree)
	if !reflect.DeepEqual(withoutLocations(cond), withoutLocations(negatedCoalesce(kept))) {
		return nil, nil, errConditionNotOne()
	}
	return keep, check, nil
}

// errConditionNotOne refuses a DELETE whose condition, put into the
// queries built around it, is not read back as that one expression.
func errConditionNotOne() error {
	return newError(ErrSyntax, "DELETE: the WHERE condition reaches past itself (a closing parenthesis, LIMIT, OFFSET, a second statement or an open comment); write it as one expression")
}

// whereOf is the WHERE of a plain SELECT's tree (nothing but FROM and
// WHERE).
func whereOf(tree map[string]any) (any, bool) {
	node, ok := selectNode(tree)
	if !ok || !empty(node["modifiers"]) {
		return nil, false
	}
	return node["where_clause"], true
}

// selectNode is the one SELECT of tree, if it has a WHERE and no GROUP
// BY, HAVING or QUALIFY.
func selectNode(tree map[string]any) (map[string]any, bool) {
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 {
		return nil, false
	}
	st, _ := stmts[0].(map[string]any)
	node, _ := st["node"].(map[string]any)
	if node["type"] != "SELECT_NODE" || !empty(node["group_expressions"]) ||
		node["having"] != nil || node["qualify"] != nil || node["where_clause"] == nil {
		return nil, false
	}
	return node, true
}

// admitProbe admits the delete's probe (p.probe), the query of whether a
// file holds a row the condition matches, and checks that its condition
// is check's.
func (e *Engine) admitProbe(ctx context.Context, p *deletePlan, check *admitted, database string) (*admitted, error) {
	probe, err := e.admit(ctx, p.probe, database)
	if err != nil {
		return nil, err
	}
	node, ok := selectNode(probe.tree)
	cond, _ := whereOf(check.tree)
	if !ok || !reflect.DeepEqual(withoutLocations(node["where_clause"]), withoutLocations(cond)) {
		return nil, errConditionNotOne()
	}
	return probe, nil
}

// negatedCoalesce is X of NOT coalesce(X, false), nil for anything else.
func negatedCoalesce(w any) any {
	not, _ := w.(map[string]any)
	if not["class"] != "OPERATOR" || not["type"] != "OPERATOR_NOT" {
		return nil
	}
	children, _ := not["children"].([]any)
	if len(children) != 1 {
		return nil
	}
	co, _ := children[0].(map[string]any)
	// DuckDB's parser makes COALESCE an operator.
	isCoalesce := co["class"] == "OPERATOR" && co["type"] == "OPERATOR_COALESCE" ||
		co["class"] == "FUNCTION" && strings.EqualFold(fmt.Sprint(co["function_name"]), "coalesce")
	if !isCoalesce {
		return nil
	}
	args, _ := co["children"].([]any)
	if len(args) != 2 {
		return nil
	}
	return args[0]
}

// withoutLocations is a copy of a parse tree without its query_location
// fields (offsets in the text, which differ between the two statements).
func withoutLocations(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return nil
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "query_location")
			for _, c := range x {
				strip(c)
			}
		case []any:
			for _, c := range x {
				strip(c)
			}
		}
	}
	strip(out)
	return out
}

// execDelete runs a prepared DELETE and returns the rows deleted.
func (e *Engine) execDelete(ctx context.Context, st *Statement) (_ int64, err error) {
	p := st.del
	keep, check, err := e.prepareDelete(ctx, p, st.Database)
	if err != nil {
		return 0, err
	}
	if rowLocal(keep.tree) && e.hasPersistedFiles(p.db, p.table) {
		n, err := e.deleteByRewrite(ctx, p, keep, check, st.Database)
		if !errors.Is(err, buffer.ErrNoRewrite) {
			if err != nil {
				err = fmt.Errorf("DELETE from %q.%q: %w", p.db, p.table, err)
			}
			return n, err
		}
	}
	rep, err := e.wb.BeginReplace(p.db, p.table, catalog.FailIfNotExists)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			rep.Abort()
			err = fmt.Errorf("DELETE from %q.%q: nothing deleted: %w", p.db, p.table, err)
		}
	}()
	tbl, ok := e.wb.Catalog().Snapshot().Table(p.db, p.table)
	if !ok {
		return 0, newError(ErrNotFound, "DELETE from table %q of database %q: the table does not exist", p.table, p.db)
	}
	before, err := e.countRows(ctx, p, st.Database)
	if err != nil {
		return 0, err
	}
	rdr, err := e.run(ctx, p.keep, st.Database, 0, nil)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var kept int64
	submitted := false
	write := func(rec arrow.RecordBatch) error {
		conv, err := asTableTypes(ctx, rec, tbl, e.wb.Allocator())
		if err != nil {
			return err
		}
		defer conv.Release()
		pw, err := rep.Submit(ctx, conv)
		if err != nil {
			return err
		}
		res, err := pw.Wait()
		if err != nil {
			return err
		}
		kept += res.Rows
		submitted = true
		return nil
	}
	for rdr.Next() {
		if err := write(rdr.RecordBatch()); err != nil {
			return 0, err
		}
	}
	if err := rdr.Err(); err != nil {
		return 0, err
	}
	if !submitted {
		// Every row goes: the new content is the table's columns, empty.
		empty := emptyBatch(tbl, e.wb.Allocator())
		defer empty.Release()
		if err := write(empty); err != nil {
			return 0, err
		}
	}
	if err := rep.Commit(); err != nil {
		return 0, err
	}
	return before - kept, nil
}

// hasPersistedFiles says whether db.table has persisted files now.
func (e *Engine) hasPersistedFiles(db, table string) bool {
	v := e.wb.View()
	defer v.Release()
	for _, s := range v.Persisted {
		for _, f := range s.Files {
			if f.Database == db && f.Table == table {
				return true
			}
		}
	}
	return false
}

// countRows counts the table's rows, as the delete's query sees them.
func (e *Engine) countRows(ctx context.Context, p *deletePlan, database string) (int64, error) {
	rdr, err := e.run(ctx, "SELECT count(*) FROM "+quoteIdent(p.db)+"."+quoteIdent(p.table), database, 0, nil)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() > 0 {
			n = rec.Column(0).(*array.Int64).Value(0)
		}
	}
	return n, rdr.Err()
}

// asTableTypes is rec (rows of the table as DuckDB returns them) in the
// table's stored types, where DuckDB's differ (a timestamp's unit or
// zone, a view string).
func asTableTypes(ctx context.Context, rec arrow.RecordBatch, tbl *catalog.Table, mem memory.Allocator) (arrow.RecordBatch, error) {
	cctx := compute.WithAllocator(ctx, mem)
	n := int(rec.NumCols())
	if n > len(tbl.Columns) {
		return nil, fmt.Errorf("the query returned %d columns, the table has %d", n, len(tbl.Columns))
	}
	fields := make([]arrow.Field, n)
	cols := make([]arrow.Array, n)
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range n {
		want := tbl.Columns[i]
		a := rec.Column(i)
		if arrow.TypeEqual(a.DataType(), want.Type) || a.DataType().ID() == arrow.DICTIONARY || a.DataType().ID() == arrow.STRING_VIEW || a.DataType().ID() == arrow.BINARY_VIEW {
			a.Retain()
		} else {
			cast, err := compute.CastArray(cctx, a, compute.SafeCastOptions(want.Type))
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", want.Name, err)
			}
			a = cast
		}
		fields[i] = arrow.Field{Name: want.Name, Type: a.DataType(), Nullable: true}
		cols[i] = a
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

// emptyBatch is a batch of no rows in the table's columns.
func emptyBatch(tbl *catalog.Table, mem memory.Allocator) arrow.RecordBatch {
	schema := tbl.ArrowSchema()
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	rec := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return rec
}
