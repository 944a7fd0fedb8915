//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// Admission: a statement runs only if DuckDB's own parser says it is one
// SELECT (json_serialize_sql serializes SELECT statements only: VALUES,
// FROM-first, TABLE, WITH, set operations, DESCRIBE / SUMMARIZE / SHOW of
// a table or query, PIVOT / UNPIVOT in FROM), or EXPLAIN [ANALYZE] of one,
// and if every table it reads is one of Apron's and every table function
// it calls is on an allow-list. The text is never matched to decide: a
// statement is admitted by its parse tree, and what runs is exactly the
// text that was parsed (or, for EXPLAIN, "EXPLAIN " followed by the text
// parsed as a SELECT).

// maxSQLBytes bounds a statement's text; DuckDB's binder costs time in
// proportion to it (and more: see maxExpressionDepth and maxBindCost).
const maxSQLBytes = 1 << 20

// allowedTableFunctions are the table functions a query may call in FROM.
// Everything else is refused, above all what reads files or runs SQL of
// its own (read_parquet, glob, query, query_table, …), apron_scan
// (Apron's tables are reached through their views), and DuckDB's
// catalog functions (duckdb_tables, duckdb_settings, …: they describe
// every database).
var allowedTableFunctions = map[string]bool{
	"range": true, "generate_series": true, "unnest": true, "repeat": true, "repeat_row": true,
	"json_each": true, "json_tree": true,
}

// admitted is a statement the engine will run.
type admitted struct {
	sql  string         // the text to prepare
	tree map[string]any // json_serialize_sql of the SELECT (the explained one, for EXPLAIN)
	// explain is set for EXPLAIN [ANALYZE]: the query is not a direct
	// scan then.
	explain bool
	// databases are the Apron databases the statement reads (system
	// included), as the catalog names them, sorted.
	databases []string
	// cost is the binder's cost estimate (see bindCost).
	cost int64
	// who runs it: every database it reads was checked readable by it,
	// and the system tables show it only rows of those it can read. nil
	// without authentication.
	who *auth.Principal
	// view, if set, is the View the statement reads instead of a View of
	// its own (shared: prepareState takes its own reference), and only
	// restricts one table's scans to one of its files in it (delete.go).
	view *buffer.View
	only *onlySource
}

// maxIdleParsers bounds the parser connections kept for reuse.
const maxIdleParsers = 8

// admit admits sql on a parser connection, before the statement takes a
// slot.
func (e *Engine) admit(ctx context.Context, sql, database string) (*admitted, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pc, err := e.parser()
	if err != nil {
		return nil, err
	}
	defer e.putParser(pc)
	return e.admitOn(pc, qualifySystem(sql), database, auth.FromContext(ctx))
}

// parser returns an idle parser connection, or a new one. Only its
// DuckDB connection and its prepared json_serialize_sql are used.
func (e *Engine) parser() (*conn, error) {
	e.parsers.Lock()
	if n := len(e.parsers.idle); n > 0 {
		c := e.parsers.idle[n-1]
		e.parsers.idle = e.parsers.idle[:n-1]
		e.parsers.Unlock()
		return c, nil
	}
	e.parsers.Unlock()
	e.mu.Lock()
	closed := e.mu.closed
	e.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	c := &conn{}
	if duck.Connect(e.db, &c.c) == duck.StateError {
		return nil, errors.New("query: connecting to DuckDB failed")
	}
	return c, nil
}

func (e *Engine) putParser(c *conn) {
	e.parsers.Lock()
	defer e.parsers.Unlock()
	if len(e.parsers.idle) >= maxIdleParsers {
		c.close()
		return
	}
	e.parsers.idle = append(e.parsers.idle, c)
}

func (e *Engine) closeParsers() {
	e.parsers.Lock()
	defer e.parsers.Unlock()
	for _, c := range e.parsers.idle {
		c.close()
	}
	e.parsers.idle = nil
}

// admitOn decides whether sql may run with database current, parsing it
// on c (whose search path does not matter: json_serialize_sql resolves no
// name).
func (e *Engine) admitOn(c *conn, sql, database string, who *auth.Principal) (*admitted, error) {
	if len(sql) > maxSQLBytes {
		return nil, newError(ErrSyntax, "the statement is %d bytes; at most %d are accepted", len(sql), maxSQLBytes)
	}
	// json_serialize_sql only parses: DuckDB's statement extraction
	// (duckdb_extract_statements) also runs pragmas, and IMPORT DATABASE
	// reads files there, before anything could be checked.
	a := &admitted{sql: sql, who: who}
	tree, ok, err := e.serializeSelect(c, sql)
	if err != nil {
		return nil, err
	}
	if !ok {
		inner, prefix, isExplain := splitExplain(sql)
		if !isExplain {
			return nil, unsupported(sql)
		}
		if tree, ok, err = e.serializeSelect(c, inner); err != nil {
			return nil, newError(ErrUnsupportedStatement, "EXPLAIN: the forms supported are EXPLAIN [ANALYZE] [(FORMAT text|json|html|graphviz|yaml)] <query> (%v)", err)
		}
		if !ok {
			return nil, newError(ErrUnsupportedStatement, "EXPLAIN of a %s statement: only queries (SELECT …) may be explained, one at a time", statementName(inner))
		}
		a.sql, a.explain = prefix+inner, true
	}
	a.tree = tree
	w := admitWalker{e: e, db: database, cat: e.wb.Catalog().Snapshot(), dbs: map[string]string{}, who: who}
	if err := w.check(tree); err != nil {
		return nil, err
	}
	for _, name := range w.dbs {
		a.databases = append(a.databases, name)
	}
	sort.Strings(a.databases)
	a.cost = w.cost
	if a.cost > maxBindCost {
		return nil, newError(ErrSyntax, "the statement's expressions are too large or too deeply nested to bind in time (estimated cost %d, at most %d: e.g. %d constants, or a few expressions nested %d deep); split the query or simplify its expressions",
			a.cost, maxBindCost, maxBindCost/bindNodeCost, maxExpressionDepth)
	}
	return a, nil
}

// serializeSelect parses sql with json_serialize_sql: the tree if it is
// exactly one SELECT statement, false if it holds some other statement;
// an error if it does not parse, or holds several SELECTs.
func (e *Engine) serializeSelect(c *conn, sql string) (map[string]any, bool, error) {
	tree, err := e.parseSQL(c, sql)
	if err != nil {
		if _, isParse := err.(*notSelect); isParse {
			return nil, false, nil
		}
		return nil, false, err
	}
	stmts, _ := tree["statements"].([]any)
	switch len(stmts) {
	case 0:
		return nil, false, newError(ErrSyntax, "no statement in the query")
	case 1:
		return tree, true, nil
	}
	return nil, false, newError(ErrUnsupportedStatement, "%d statements in one request; send one statement at a time", len(stmts))
}

// notSelect is parseSQL's error for a statement json_serialize_sql does
// not serialize (it parsed, but is no SELECT) or does not parse.
type notSelect struct{ msg string }

func (e *notSelect) Error() string { return e.msg }

// unsupported is the error for a statement that is not a query. The
// statement is named by its first word (for the message only: what was
// refused was refused by DuckDB's parse).
func unsupported(sql string) error {
	const supported = "Apron runs queries (SELECT, WITH, VALUES, FROM, TABLE, DESCRIBE, SUMMARIZE, SHOW TABLES, EXPLAIN [ANALYZE] of a query) and INSERT INTO <table> VALUES … / SELECT …, one statement per request"
	switch kw := statementName(sql); kw {
	case "SELECT", "WITH", "VALUES", "FROM", "TABLE", "DESCRIBE", "SUMMARIZE", "SHOW":
		return newError(ErrUnsupportedStatement, "the request holds a statement other than a query (several statements?); statements other than queries are not supported: %s", supported)
	default:
		return newError(ErrUnsupportedStatement, "%s statements are not supported: %s", kw, supported)
	}
}

// statementName is the first keyword of sql, for messages only.
func statementName(sql string) string {
	kw, _ := firstWord(sql)
	if kw == "" {
		return "such"
	}
	return strings.ToUpper(kw)
}

// skipSpace skips white space and comments (-- to the end of the line,
// /* … */ nested as DuckDB nests them).
func skipSpace(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			depth, i := 0, 0
			for i < len(s) {
				if strings.HasPrefix(s[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(s[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
			if depth != 0 {
				return ""
			}
			s = s[i:]
		default:
			return s
		}
	}
}

// firstWord returns the keyword at the start of s (after white space and
// comments) and the rest after it.
func firstWord(s string) (string, string) {
	s = skipSpace(s)
	end := 0
	for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z' || s[end] == '_') {
		end++
	}
	return s[:end], s[end:]
}

// explainFormats are the EXPLAIN (FORMAT …) values passed on.
var explainFormats = map[string]bool{"text": true, "json": true, "html": true, "graphviz": true, "yaml": true}

// splitExplain splits EXPLAIN [ANALYZE] [(FORMAT f)] <statement> into the
// explained statement and the prefix to run it with. The split only finds
// where the explained statement starts: it must then parse as a SELECT on
// its own, and what runs is the prefix Apron writes followed by exactly
// that text, so a split in the wrong place can only make a statement
// refused.
func splitExplain(sql string) (inner, prefix string, ok bool) {
	kw, rest := firstWord(sql)
	if !strings.EqualFold(kw, "explain") {
		return "", "", false
	}
	prefix = "EXPLAIN "
	kw2, rest2 := firstWord(rest)
	if strings.EqualFold(kw2, "analyze") || strings.EqualFold(kw2, "analyse") {
		prefix += "ANALYZE "
		rest = rest2
	}
	if r := skipSpace(rest); strings.HasPrefix(r, "(") {
		kw3, r3 := firstWord(r[1:])
		f, r4 := firstWord(r3)
		r4 = skipSpace(r4)
		if strings.EqualFold(kw3, "format") && explainFormats[strings.ToLower(f)] && strings.HasPrefix(r4, ")") {
			prefix += "(FORMAT " + strings.ToUpper(f) + ") "
			rest = r4[1:]
		}
	}
	return rest, prefix, true
}

// admitWalker checks a parsed SELECT and collects the databases it reads.
type admitWalker struct {
	e   *Engine
	db  string // the current database ("" = none)
	cat *catalog.Snapshot
	// dbs are the databases read, by lower-cased name.
	dbs  map[string]string
	ctes map[string]bool
	cost int64
	who  *auth.Principal
}

func (w *admitWalker) check(tree map[string]any) error {
	w.ctes = map[string]bool{}
	collectCTEs(tree, w.ctes)
	return w.walk(tree["statements"], 0)
}

// collectCTEs gathers the names of every CTE of the statement.
func collectCTEs(v any, out map[string]bool) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			collectCTEs(x, out)
		}
	case map[string]any:
		if m, ok := v["cte_map"].(map[string]any); ok {
			entries, _ := m["map"].([]any)
			for _, en := range entries {
				if e, ok := en.(map[string]any); ok {
					if k, ok := e["key"].(string); ok {
						out[strings.ToLower(k)] = true
					}
				}
			}
		}
		for _, x := range v {
			collectCTEs(x, out)
		}
	}
}

// walk visits v; depth is its depth within the expression it is part of
// (0: not within an expression).
func (w *admitWalker) walk(v any, depth int64) error {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			if err := w.walk(x, depth); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		child := int64(0)
		if class, isExpr := v["class"].(string); isExpr {
			child = depth + 1
			w.cost += exprCost(class) + child*child
		}
		switch v["type"] {
		case "BASE_TABLE":
			if err := w.table(v); err != nil {
				return err
			}
		case "TABLE_FUNCTION":
			f, _ := v["function"].(map[string]any)
			name, _ := f["function_name"].(string)
			schema, _ := f["schema"].(string)
			catalogName, _ := f["catalog"].(string)
			if strings.EqualFold(name, lastValueFunction) {
				if err := w.admitLastValue(f); err != nil {
					return err
				}
				break
			}
			if !allowedTableFunctions[strings.ToLower(name)] || schema != "" || catalogName != "" {
				return newError(ErrUnsupportedStatement,
					"table function %s is not available: queries read Apron's tables (FROM db.table; the system tables describe the server); the table functions allowed are %s",
					name, strings.Join(sortedKeys(allowedTableFunctions), ", "))
			}
		case "SHOW_REF":
			if err := w.show(v); err != nil {
				return err
			}
		}
		for k, x := range v {
			if k == "query_location" {
				continue
			}
			switch x.(type) {
			case []any, map[string]any:
				if err := w.walk(x, child); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// show checks SHOW TABLES and SHOW ALL TABLES (DESCRIBE and SUMMARIZE
// carry a query, walked as any other).
func (w *admitWalker) show(v map[string]any) error {
	if v["show_type"] != "SHOW_UNQUALIFIED" {
		return nil
	}
	switch name, _ := v["table_name"].(string); name {
	case `"tables"`:
		if w.db == "" {
			return newError(ErrNotFound, "SHOW TABLES lists the current database's tables, and there is none: set one (a database header, or the session's schema), or use SHOW ALL TABLES")
		}
		if err := w.who.Read(w.db); err != nil {
			return err
		}
		w.addDB(w.db)
	case "__show_tables_expanded":
		// DuckDB lists every database's tables: only for a token that
		// may read them all.
		for _, d := range w.cat.Databases() {
			if !w.who.CanRead(d.Name) {
				return fmt.Errorf("%w (SHOW ALL TABLES lists every database; system.tables lists those the token can read)", w.who.Read(d.Name))
			}
			w.addDB(d.Name)
		}
	default:
		return newError(ErrUnsupportedStatement, "SHOW %s is not supported: SHOW TABLES, SHOW ALL TABLES, DESCRIBE <table> and the system tables (system.databases, system.tables, system.columns) describe the server", strings.Trim(name, `"`))
	}
	return nil
}

// table resolves a table reference to an Apron table (or a CTE).
func (w *admitWalker) table(ref map[string]any) error {
	cat, _ := ref["catalog_name"].(string)
	schema, _ := ref["schema_name"].(string)
	name, _ := ref["table_name"].(string)
	if cat != "" && !strings.EqualFold(cat, Catalog) {
		return newError(ErrNotFound, "%s: the only catalog is %s (write %s.<database>.<table>, or <database>.<table>)", qualified(cat, schema, name), Catalog, Catalog)
	}
	if schema == "" {
		if cat == "" && w.ctes[strings.ToLower(name)] {
			// A CTE, unless it is out of scope where it is named; the
			// current database's table of that name, then.
			if w.db != "" {
				if _, ok := w.lookup(w.db, name); ok {
					// Which DuckDB reads is its binder's choice: the
					// table must be readable too.
					if err := w.who.Read(w.db); err != nil {
						return err
					}
					w.addDB(w.db)
				}
			}
			return nil
		}
		if w.db == "" {
			return newError(ErrNotFound, "table %q: there is no current database; write <database>.%s, or set one (a database header, or the session's schema)", name, name)
		}
		schema = w.db
	}
	if strings.EqualFold(schema, SystemSchema) {
		if _, ok := systemTables[strings.ToLower(name)]; !ok {
			return newError(ErrNotFound, "system table %q does not exist; the system tables are %s", name, strings.Join(sortedKeys(systemTables), ", "))
		}
		w.addDB(SystemSchema)
		return nil
	}
	// Permission before existence: a token learns nothing of the
	// tables of a database it may not read.
	if err := w.who.Read(schema); err != nil {
		return err
	}
	dbName, ok := w.lookupDB(schema)
	if !ok {
		return newError(ErrNotFound, "database %q not found (in %s)", schema, qualified(cat, schema, name))
	}
	if _, ok := w.lookup(dbName, name); !ok {
		return newError(ErrNotFound, "table %q not found in database %q", name, dbName)
	}
	w.addDB(dbName)
	return nil
}

func (w *admitWalker) addDB(name string) { w.dbs[strings.ToLower(name)] = name }

// lookupDB finds a database as DuckDB would: by name, case-insensitively.
func (w *admitWalker) lookupDB(name string) (string, bool) {
	if d, ok := w.cat.Database(name); ok {
		return d.Name, true
	}
	for _, d := range w.cat.Databases() {
		if strings.EqualFold(d.Name, name) {
			return d.Name, true
		}
	}
	return "", false
}

func (w *admitWalker) lookup(db, table string) (*catalog.Table, bool) {
	if t, ok := w.cat.Table(db, table); ok {
		return t, true
	}
	d, ok := w.cat.Database(db)
	if !ok {
		return nil, false
	}
	for _, t := range d.TableList() {
		if strings.EqualFold(t.Name, table) {
			return t, true
		}
	}
	return nil, false
}

func qualified(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The binder's cost, estimated from the parse tree: per expression node
// bindCallCost for a function, operator, comparison, conjunction, CASE or
// cast, bindNodeCost for any other (a constant, a column), plus the square
// of its depth in its expression (binding a chain of n nested calls costs
// about n³/3 units). Calibrated with BenchmarkBind on 2 cores, at 30-50 ns
// a unit: a chain of 240 nested calls (5.1M units) binds in 0.16 s, one
// of 240 additions (9.9M) in 0.49 s, an IN list of 60,000 constants (24M)
// in 0.75-0.88 s, a balanced tree of 16,383 additions (34M) in 0.96 s.
// maxBindCost keeps a statement's bind under about a second: DuckDB cannot
// interrupt it (duckdb_interrupt stops execution only).
const (
	bindCallCost = 1500
	bindNodeCost = 400
	maxBindCost  = 20_000_000
)

// exprCost is the bind cost of one expression node of class class.
func exprCost(class string) int64 {
	switch class {
	case "FUNCTION", "OPERATOR", "COMPARISON", "CONJUNCTION", "CASE", "CAST", "BETWEEN", "LAMBDA", "WINDOW", "SUBQUERY":
		return bindCallCost
	}
	return bindNodeCost
}
