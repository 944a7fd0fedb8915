//go:build duckdb_arrow

package query

/*
void apron_last_value_bind(void *);
typedef void (*apron_lv_bind_t)(void *);
typedef void (*apron_lv_init_t)(void *);
typedef void (*apron_lv_func_t)(void *, void *);
void apron_scan_init(void *);
void apron_scan_local_init(void *);
void apron_scan_func(void *, void *);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
)

// Last-value caches (buffer/lastvalue.go holds the rows, catalog the
// definitions, lastvalue_ddl.go the DDL). The engine fills them, reads
// them, and uses them for the queries they answer:
//
// Fill: a cache that is not ready (made by CREATE, at startup, or after
// its table was replaced) is filled by one goroutine of the engine with
// the query
//
//	SELECT * FROM db.t QUALIFY row_number() OVER (PARTITION BY keys ORDER BY time DESC) <= count
//
// over a View taken after the cache was made; writes meanwhile are merged
// by the write path, and the merge is commutative. It is ready only if
// its table is the same table (id) before and after.
//
// Read: SELECT … FROM last_value('db.table'): the cache's rows, in the
// table's columns (a table function on the admission allow-list, for
// tables of the databases the statement was admitted for; an error while
// the cache fills).
//
// Automatic use: a query over one table with a ready cache whose answer
// depends only on the latest rows per key runs as it is, its scan of the
// table fed with the cache's rows instead of the table's (decided on
// DuckDB's parse tree, lastValueShape). Stats.LastValueUses counts them.

// lastValueFunction is the table function that reads a cache.
const lastValueFunction = "last_value"

func init() {
	systemTables["last_value_caches"] = systemTable{
		schema: arrow.NewSchema(fields("database_name", str, "table_name", str, "cache_name", str, "key_columns", str,
			"count", i64, "state", str, "rows", i64, "bytes", i64, "uses", i64), nil),
		build: func(e *Engine, who *auth.Principal, b *array.RecordBuilder) {
			for _, c := range e.wb.LastValueCaches() {
				def := c.Definition()
				if !who.CanRead(def.Database) {
					continue
				}
				state, rows, bytes := c.Info()
				b.Field(0).(*array.StringBuilder).Append(def.Database)
				b.Field(1).(*array.StringBuilder).Append(def.Table)
				b.Field(2).(*array.StringBuilder).Append(def.Name)
				b.Field(3).(*array.StringBuilder).Append(strings.Join(def.Keys, ","))
				b.Field(4).(*array.Int64Builder).Append(int64(def.Count))
				b.Field(5).(*array.StringBuilder).Append(string(state))
				b.Field(6).(*array.Int64Builder).Append(int64(rows))
				b.Field(7).(*array.Int64Builder).Append(bytes)
				b.Field(8).(*array.Int64Builder).Append(c.Uses())
			}
		},
	}
}

// registerLastValue registers last_value(name VARCHAR), 'db.table'.
func (e *Engine) registerLastValue() error {
	f := duck.CreateTableFunction()
	defer duck.DestroyTableFunction(&f)
	duck.TableFunctionSetName(f, lastValueFunction)
	varchar := duck.CreateLogicalType(duck.TypeVarchar)
	duck.TableFunctionAddParameter(f, varchar)
	duck.DestroyLogicalType(&varchar)
	duck.TableFunctionSetExtraInfo(f, newHandle(e), deleteHandlePtr)
	duck.TableFunctionSupportsProjectionPushdown(f, true)
	duck.TableFunctionSetBind(f, unsafe.Pointer(C.apron_lv_bind_t(C.apron_last_value_bind)))
	duck.TableFunctionSetInit(f, unsafe.Pointer(C.apron_lv_init_t(C.apron_scan_init)))
	duck.TableFunctionSetLocalInit(f, unsafe.Pointer(C.apron_lv_init_t(C.apron_scan_local_init)))
	duck.TableFunctionSetFunction(f, unsafe.Pointer(C.apron_lv_func_t(C.apron_scan_func)))
	if duck.RegisterTableFunction(e.conv, f) == duck.StateError {
		return errors.New("query: registering the last_value table function failed")
	}
	return nil
}

//export apron_last_value_bind
func apron_last_value_bind(p unsafe.Pointer) {
	info := duck.BindInfo{Ptr: p}
	defer recoverMessage(func(msg string) { duck.BindSetError(info, msg) })
	e := handleValue(duck.BindGetExtraInfo(info)).(*Engine)
	v := duck.BindGetParameter(info, 0)
	name := duck.GetVarchar(v)
	duck.DestroyValue(&v)
	db, table, ok := strings.Cut(name, ".")
	if !ok {
		duck.BindSetError(info, fmt.Sprintf("last_value(%q): name the table as 'database.table'", name))
		return
	}
	if err := e.bindTable(info, db, table, 0, true); err != nil {
		duck.BindSetError(info, err.Error())
	}
}

// lastValueUse is a query's use of its table's cache (queryState).
type lastValueUse struct {
	// nonNull are the columns arg_max reads: arg_max skips rows whose
	// value is NULL, so the cache answers only if no row it holds has a
	// NULL there.
	nonNull []string
	// def is the definition the shape was checked against: the cache
	// that answers must still have it.
	def catalog.LastValueCache
	// project, when set, says the answer is the cache's rows themselves,
	// each output column the table column at its index in table: a
	// cache of one row per key whose query groups by exactly its keys
	// (no WHERE, no ORDER BY or LIMIT) and selects keys, max(time) and
	// arg_max(col, time) (a group's one row gives them). Such a query is
	// streamed from the cache without DuckDB (direct.go).
	project []int
	table   *catalog.Table
}

// lastValueChunks returns the chunk a scan of bd, in the query qs, reads
// instead of the table when it is fed from a cache: explicitly (last_value) or because
// the query's shape allows it. ok false: read the table.
func (e *Engine) lastValueChunks(view *buffer.View, bd *bindData, qs *queryState) (chunks []buffer.Chunk, ok bool, err error) {
	var use *lastValueUse
	if !bd.lastValue {
		if qs == nil || qs.lastValue == nil {
			return nil, false, nil
		}
		if use = qs.lastValue[lowerKey(bd.key.Database, bd.key.Table)]; use == nil {
			return nil, false, nil
		}
	}
	return e.cacheChunks(view, bd, use)
}

// cacheChunks returns the rows of the cache of bd's table for a read of
// last_value (bd.lastValue: errors are the query's) or for use, a query
// whose shape it answers (ok false: read the table).
func (e *Engine) cacheChunks(view *buffer.View, bd *bindData, use *lastValueUse) (chunks []buffer.Chunk, ok bool, err error) {
	c, ok := e.wb.LastValueCache(bd.key.Database, bd.key.Table)
	t, tok := view.Catalog().Table(bd.key.Database, bd.key.Table)
	switch {
	case !ok && bd.lastValue:
		return nil, false, newError(ErrNotFound, "table %q.%q has no last-value cache (CREATE LAST VALUE CACHE ON %s.%s)", bd.key.Database, bd.key.Table, bd.key.Database, bd.key.Table)
	case !ok:
		return nil, false, nil
	case use != nil && (c.Definition().Count != use.def.Count || !slices.Equal(c.Definition().Keys, use.def.Keys)):
		return nil, false, nil
	case !tok || t.ID != c.TableID() || !c.Ready():
		if bd.lastValue {
			return nil, false, fmt.Errorf("the last-value cache of %q.%q is filling (see system.last_value_caches); query the table meanwhile", bd.key.Database, bd.key.Table)
		}
		return nil, false, nil
	}
	chunks, err = c.Chunks(bd.fields, withCutoff(view, bd.key, allTime).min, e.wb.Allocator())
	if err != nil {
		if bd.lastValue {
			return nil, false, err
		}
		e.log.Debug("last-value cache not used", "err", err)
		return nil, false, nil
	}
	if use != nil {
		for _, name := range use.nonNull {
			for _, ch := range chunks {
				if idx := ch.Rec.Schema().FieldIndices(name); len(idx) == 0 || ch.Rec.Column(idx[0]).NullN() > 0 {
					for _, ch := range chunks {
						ch.Rec.Release()
					}
					return nil, false, nil
				}
			}
		}
	}
	c.NoteUse()
	e.lastValueUses.Add(1)
	return chunks, true, nil
}

// lastValueRetry is how long a failed fill waits before the next try.
const lastValueRetry = time.Second

// runLastValueFills fills the caches that need it, until ctx ends.
func (e *Engine) runLastValueFills(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		var retry <-chan time.Time
		for _, c := range e.wb.LastValueCaches() {
			if ctx.Err() != nil {
				return
			}
			if c.Ready() {
				continue
			}
			if err := e.guarded("filling a last-value cache", func() error { return e.fillLastValue(ctx, c) }); err != nil { // panics.go
				if ctx.Err() != nil {
					return
				}
				e.log.Warn("filling a last-value cache failed; retrying", "database", c.Definition().Database, "table", c.Definition().Table, "err", err)
				retry = time.After(lastValueRetry)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wb.LastValueFills():
		case <-retry:
		}
	}
}

// fillLastValue merges the latest rows per key of a View of the table
// into c, and marks it ready if the table did not change meanwhile.
func (e *Engine) fillLastValue(ctx context.Context, c *buffer.LastValueCache) error {
	if h := panicTestHooks.Load(); h != nil && h.fill != nil {
		h.fill()
	}
	def := c.Definition()
	if t, ok := e.wb.Catalog().Table(def.Database, def.Table); !ok || t.ID != c.TableID() {
		return nil // a newer cache replaces it
	}
	keys := make([]string, len(def.Keys))
	for i, k := range def.Keys {
		keys[i] = quoteIdent(k)
	}
	over := `ORDER BY "time" DESC`
	if len(keys) > 0 {
		over = "PARTITION BY " + strings.Join(keys, ", ") + " " + over
	}
	sql := fmt.Sprintf("SELECT * FROM %s.%s QUALIFY row_number() OVER (%s) <= %d", quoteIdent(def.Database), quoteIdent(def.Table), over, def.Count)
	start := time.Now()
	r, err := e.Query(ctx, sql, "")
	if err != nil {
		return err
	}
	defer r.Release()
	for r.Next() {
		if err := c.MergeRecord(r.RecordBatch()); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	if t, ok := e.wb.Catalog().Table(def.Database, def.Table); !ok || t.ID != c.TableID() {
		return nil
	}
	c.FillDone()
	_, rows, bytes := c.Info()
	e.log.Info("last-value cache filled", "database", def.Database, "table", def.Table, "rows", rows, "bytes", bytes, "took", time.Since(start))
	return nil
}

// admitLastValue checks a call of last_value in FROM: one string constant
// naming a table, of a database the statement may read, that has a cache.
func (w *admitWalker) admitLastValue(f map[string]any) error {
	children, _ := f["children"].([]any)
	var name string
	if len(children) == 1 {
		if c, ok := children[0].(map[string]any); ok && c["class"] == "CONSTANT" {
			if v, ok := c["value"].(map[string]any); ok {
				if t, ok := v["type"].(map[string]any); ok && t["id"] == "VARCHAR" && v["is_null"] == false {
					name, _ = v["value"].(string)
				}
			}
		}
	}
	schema, _ := f["schema"].(string)
	catalogName, _ := f["catalog"].(string)
	db, table, ok := strings.Cut(name, ".")
	if !ok || schema != "" || catalogName != "" {
		return newError(ErrUnsupportedStatement, "last_value takes one string constant, 'database.table', naming a table that has a last-value cache")
	}
	if err := w.who.Read(db); err != nil {
		return err
	}
	dbName, ok := w.lookupDB(db)
	if !ok {
		return newError(ErrNotFound, "last_value(%q): database %q not found", name, db)
	}
	t, ok := w.lookup(dbName, table)
	if !ok {
		return newError(ErrNotFound, "last_value(%q): table %q not found in database %q", name, table, dbName)
	}
	if _, ok := w.cat.LastValueCache(dbName, t.Name); !ok {
		return newError(ErrNotFound, "last_value(%q): table %q.%q has no last-value cache (CREATE LAST VALUE CACHE ON %s.%s)", name, dbName, t.Name, dbName, t.Name)
	}
	w.addDB(dbName)
	return nil
}

// oneTableSelect is the SELECT node of a statement that is one SELECT of
// one of Apron's tables (no CTE, join, subquery in FROM, HAVING, QUALIFY,
// SAMPLE, time travel or column aliases on the table), the table, and a
// shapeCheck of its expressions (no keys); ok false for anything else.
func oneTableSelect(tree map[string]any, db string, snap *catalog.Snapshot) (node map[string]any, t *catalog.Table, sh *shapeCheck, ok bool) {
	stmts, _ := tree["statements"].([]any)
	if len(stmts) != 1 {
		return nil, nil, nil, false
	}
	st, _ := stmts[0].(map[string]any)
	node, _ = st["node"].(map[string]any)
	if node == nil || node["type"] != "SELECT_NODE" || node["having"] != nil || node["qualify"] != nil || node["sample"] != nil ||
		node["aggregate_handling"] != "STANDARD_HANDLING" {
		return nil, nil, nil, false
	}
	if m, _ := node["cte_map"].(map[string]any); m != nil {
		if entries, _ := m["map"].([]any); len(entries) > 0 {
			return nil, nil, nil, false
		}
	}
	from, _ := node["from_table"].(map[string]any)
	if from == nil || from["type"] != "BASE_TABLE" || from["at_clause"] != nil || from["sample"] != nil {
		return nil, nil, nil, false
	}
	if a, _ := from["column_name_alias"].([]any); len(a) > 0 {
		return nil, nil, nil, false
	}
	cat, _ := from["catalog_name"].(string)
	schema, _ := from["schema_name"].(string)
	name, _ := from["table_name"].(string)
	if cat != "" && !strings.EqualFold(cat, Catalog) {
		return nil, nil, nil, false
	}
	if schema == "" {
		schema = db
	}
	if t, ok = findTableFold(snap, schema, name); !ok {
		return nil, nil, nil, false
	}
	alias, _ := from["alias"].(string)
	return node, t, &shapeCheck{alias: alias, table: name}, true
}

// lastValueShape says whether the statement's answer depends only on the
// latest rows per key of its one table, which has a ready cache (checked
// when the scan starts); any doubt is no. The shapes:
//
//   - SELECT of key columns grouped by, constants, and the aggregates
//     arg_max(col, time), max_by(col, time), arg_max_null(col, time),
//     max(time), FROM one table, GROUP BY a subset of the key columns (or
//     none); ORDER BY and LIMIT of the groups allowed;
//   - SELECT of columns (or *) FROM one table ORDER BY time DESC LIMIT k,
//     k at most the cache's count;
//
// each with a WHERE that is an AND of conditions on key columns only and
// lower bounds on time (time > or >= a constant).
func lastValueShape(tree map[string]any, db string, snap *catalog.Snapshot) (buffer.TableKey, *lastValueUse, bool) {
	var none buffer.TableKey
	node, t, sh, ok := oneTableSelect(tree, db, snap)
	if !ok {
		return none, nil, false
	}
	def, ok := snap.LastValueCache(t.Database, t.Name)
	if !ok {
		return none, nil, false
	}
	sh.keys = map[string]bool{}
	for _, k := range def.Keys {
		sh.keys[strings.ToLower(k)] = true
	}
	if !sh.where(node["where_clause"]) {
		return none, nil, false
	}
	groups, _ := node["group_expressions"].([]any)
	sets, _ := node["group_sets"].([]any)
	if len(sets) > 1 {
		return none, nil, false
	}
	grouped := map[string]bool{}
	for _, g := range groups {
		n, ok := sh.colRef(g)
		if !ok || !sh.keys[n] {
			return none, nil, false
		}
		grouped[n] = true
	}
	list, _ := node["select_list"].([]any)
	mods, _ := node["modifiers"].([]any)
	use := &lastValueUse{def: *def}
	aggregates := len(groups) > 0
	for _, x := range list {
		if m, _ := x.(map[string]any); m != nil && m["class"] == "FUNCTION" {
			aggregates = true
		}
	}
	if aggregates {
		for _, x := range list {
			m, _ := x.(map[string]any)
			if m == nil {
				return none, nil, false
			}
			switch m["class"] {
			case "CONSTANT":
			case "COLUMN_REF":
				n, ok := sh.colRef(m)
				if !ok || !grouped[n] {
					return none, nil, false
				}
			case "FUNCTION":
				col, ok := sh.lastAggregate(m)
				if !ok {
					return none, nil, false
				}
				if col != "" {
					use.nonNull = append(use.nonNull, col)
				}
			default:
				return none, nil, false
			}
		}
		for _, x := range mods {
			if !groupModifier(x) {
				return none, nil, false
			}
		}
	} else {
		for _, x := range list {
			m, _ := x.(map[string]any)
			if m == nil {
				return none, nil, false
			}
			switch m["class"] {
			case "CONSTANT":
			case "COLUMN_REF":
				if _, ok := sh.colRef(m); !ok {
					return none, nil, false
				}
			case "STAR":
				if !rowwiseStar(m) {
					return none, nil, false
				}
			default:
				return none, nil, false
			}
		}
		if !sh.latestModifiers(mods, def.Count) {
			return none, nil, false
		}
	}
	// The column names arg_max reads, as the table has them.
	for i, n := range use.nonNull {
		c, ok := findColumn(t, n)
		if !ok {
			return none, nil, false
		}
		use.nonNull[i] = c
	}
	// (With no GROUP BY, DuckDB answers one row even over no row: not the
	// cache's rows.)
	if aggregates && len(groups) > 0 && node["where_clause"] == nil && len(mods) == 0 && def.Count == 1 && len(grouped) == len(sh.keys) {
		use.project, use.table = projection(sh, t, list), t
	}
	return buffer.TableKey{Database: t.Database, Table: t.Name}, use, true
}

// projection is the table column each select-list item of a query
// grouped by every key of a one-row-per-key cache returns (see
// lastValueUse.project), or nil if an item is not a key, max(time) or
// arg_max(col, time) (and its kin).
func projection(sh *shapeCheck, t *catalog.Table, list []any) []int {
	cols := make([]int, 0, len(list))
	for _, x := range list {
		m, _ := x.(map[string]any)
		var name string
		switch m["class"] {
		case "COLUMN_REF":
			name, _ = sh.colRef(m)
		case "FUNCTION":
			children, _ := m["children"].([]any)
			if len(children) == 0 {
				return nil
			}
			name, _ = sh.colRef(children[0]) // max(time), arg_max(col, time)
		default:
			return nil
		}
		idx, ok := columnIndex(t, name)
		if !ok {
			return nil
		}
		cols = append(cols, idx)
	}
	return cols
}

// rowwiseStar says whether a STAR expression names only columns as they
// are: not COLUMNS(…) and no REPLACE, whose expressions may be aggregates
// or windows reading every row (* EXCLUDE and RENAME are fine).
func rowwiseStar(m map[string]any) bool {
	return m["columns"] == false && m["expr"] == nil && empty(m["replace_list"])
}

// shapeCheck checks the expressions of a statement over one table.
type shapeCheck struct {
	alias, table string
	keys         map[string]bool // lower-cased
}

// colRef is the lower-cased column an expression names, if it is a
// column of the table.
func (sh *shapeCheck) colRef(e any) (string, bool) {
	m, _ := e.(map[string]any)
	if m == nil || m["class"] != "COLUMN_REF" {
		return "", false
	}
	names, _ := m["column_names"].([]any)
	switch len(names) {
	case 1:
		n, _ := names[0].(string)
		return strings.ToLower(n), true
	case 2:
		q, _ := names[0].(string)
		n, _ := names[1].(string)
		if sh.alias != "" && strings.EqualFold(q, sh.alias) || sh.alias == "" && strings.EqualFold(q, sh.table) {
			return strings.ToLower(n), true
		}
	}
	return "", false
}

func (sh *shapeCheck) isTime(e any) bool {
	n, ok := sh.colRef(e)
	return ok && n == buffer.TimeColumn
}

// where: nil, or an AND of conditions on key columns and lower bounds on
// time.
func (sh *shapeCheck) where(e any) bool {
	if e == nil {
		return true
	}
	m, _ := e.(map[string]any)
	if m == nil {
		return false
	}
	if m["type"] == "CONJUNCTION_AND" {
		children, _ := m["children"].([]any)
		for _, c := range children {
			if !sh.where(c) {
				return false
			}
		}
		return true
	}
	if m["class"] == "COMPARISON" {
		switch m["type"] {
		case "COMPARE_GREATERTHAN", "COMPARE_GREATERTHANOREQUALTO":
			if sh.isTime(m["left"]) && isConstant(m["right"]) {
				return true
			}
		case "COMPARE_LESSTHAN", "COMPARE_LESSTHANOREQUALTO":
			if sh.isTime(m["right"]) && isConstant(m["left"]) {
				return true
			}
		}
	}
	return sh.keyOnly(m)
}

// keyFunctions are the functions a condition on key columns may call:
// deterministic, of their arguments only.
var keyFunctions = map[string]bool{
	"~~": true, "!~~": true, "~~*": true, "!~~*": true, "like": true, "ilike": true, "lower": true, "upper": true,
	"prefix": true, "suffix": true, "contains": true, "starts_with": true, "ends_with": true, "regexp_matches": true,
	"length": true, "concat": true, "||": true, "coalesce": true, "trim": true, "substring": true, "substr": true,
}

// keyOnly says whether an expression reads key columns and constants only.
func (sh *shapeCheck) keyOnly(e any) bool {
	m, _ := e.(map[string]any)
	if m == nil {
		return false
	}
	kids := func(names ...string) bool {
		for _, n := range names {
			if !sh.keyOnly(m[n]) {
				return false
			}
		}
		return true
	}
	list := func() bool {
		children, _ := m["children"].([]any)
		for _, c := range children {
			if !sh.keyOnly(c) {
				return false
			}
		}
		return true
	}
	switch m["class"] {
	case "CONSTANT":
		return true
	case "COLUMN_REF":
		n, ok := sh.colRef(m)
		return ok && sh.keys[n]
	case "CAST":
		return kids("child")
	case "COMPARISON":
		return kids("left", "right")
	case "BETWEEN":
		return kids("input", "lower", "upper")
	case "CONJUNCTION", "OPERATOR":
		return list()
	case "FUNCTION":
		name, _ := m["function_name"].(string)
		if !keyFunctions[strings.ToLower(name)] || m["filter"] != nil || m["distinct"] != false {
			return false
		}
		if ob, _ := m["order_bys"].(map[string]any); ob != nil {
			if o, _ := ob["orders"].([]any); len(o) > 0 {
				return false
			}
		}
		return list()
	}
	return false
}

// lastAggregate checks an aggregate of the latest row: arg_max(col,
// time) and its kin (col returned: it must not be NULL in the cache's
// rows) or max(time) (col "").
func (sh *shapeCheck) lastAggregate(m map[string]any) (col string, ok bool) {
	if m["filter"] != nil || m["distinct"] != false || m["export_state"] != false {
		return "", false
	}
	if ob, _ := m["order_bys"].(map[string]any); ob != nil {
		if o, _ := ob["orders"].([]any); len(o) > 0 {
			return "", false
		}
	}
	if s, _ := m["schema"].(string); s != "" {
		return "", false
	}
	name, _ := m["function_name"].(string)
	children, _ := m["children"].([]any)
	switch strings.ToLower(name) {
	case "max":
		return "", len(children) == 1 && sh.isTime(children[0])
	case "arg_max", "max_by", "arg_max_null":
		if len(children) != 2 || !sh.isTime(children[1]) {
			return "", false
		}
		n, ok := sh.colRef(children[0])
		if !ok {
			return "", false
		}
		if strings.EqualFold(name, "arg_max_null") || n == buffer.TimeColumn {
			return "", true
		}
		return n, true
	}
	return "", false
}

// groupModifier: ORDER BY columns or constants, LIMIT / OFFSET of
// constants (over the groups, which are the same either way).
func groupModifier(x any) bool {
	m, _ := x.(map[string]any)
	if m == nil {
		return false
	}
	switch m["type"] {
	case "ORDER_MODIFIER":
		orders, _ := m["orders"].([]any)
		for _, o := range orders {
			om, _ := o.(map[string]any)
			if om == nil {
				return false
			}
			e, _ := om["expression"].(map[string]any)
			if e == nil || e["class"] != "COLUMN_REF" && e["class"] != "CONSTANT" {
				return false
			}
		}
		return true
	case "LIMIT_MODIFIER":
		return constantOrNil(m["limit"]) && constantOrNil(m["offset"])
	}
	return false
}

func constantOrNil(e any) bool {
	if e == nil {
		return true
	}
	m, _ := e.(map[string]any)
	return m != nil && m["class"] == "CONSTANT"
}

// latestModifiers: exactly ORDER BY time DESC LIMIT k, 0 < k <= count.
func (sh *shapeCheck) latestModifiers(mods []any, count int) bool {
	k, ok := sh.newestLimit(mods)
	return ok && k <= int64(count)
}

// newestLimit is k of exactly ORDER BY time DESC LIMIT k, k > 0 a
// constant integer, with no OFFSET.
func (sh *shapeCheck) newestLimit(mods []any) (int64, bool) {
	if len(mods) != 2 {
		return 0, false
	}
	o, _ := mods[0].(map[string]any)
	l, _ := mods[1].(map[string]any)
	if o == nil || l == nil || o["type"] != "ORDER_MODIFIER" || l["type"] != "LIMIT_MODIFIER" || l["offset"] != nil {
		return 0, false
	}
	orders, _ := o["orders"].([]any)
	if len(orders) != 1 {
		return 0, false
	}
	om, _ := orders[0].(map[string]any)
	if om == nil || om["type"] != "DESCENDING" || !sh.isTime(om["expression"]) {
		return 0, false
	}
	k, ok := constantCount(l["limit"]) // latest_order.go
	return k, ok && k > 0
}

// findTableFold finds db.table as DuckDB would: exactly, or without case.
func findTableFold(snap *catalog.Snapshot, db, table string) (*catalog.Table, bool) {
	if t, ok := snap.Table(db, table); ok {
		return t, true
	}
	for _, d := range snap.Databases() {
		if !strings.EqualFold(d.Name, db) {
			continue
		}
		for _, t := range d.TableList() {
			if strings.EqualFold(t.Name, table) {
				return t, true
			}
		}
	}
	return nil, false
}

// findColumn is the name t gives a column named n without case.
func findColumn(t *catalog.Table, n string) (string, bool) {
	if i, ok := columnIndex(t, n); ok {
		return t.Columns[i].Name, true
	}
	return "", false
}

// columnIndex is the index in t's columns of the one n names, as
// findColumn finds it.
func columnIndex(t *catalog.Table, n string) (int, bool) {
	i := slices.IndexFunc(t.Columns, func(c catalog.Column) bool { return strings.EqualFold(c.Name, n) })
	return i, i >= 0
}
