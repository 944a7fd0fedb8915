//go:build duckdb_arrow

package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
)

// queryState is what the scans of one query learn from its statement:
// bounds on the time of the rows each table's scans may need, by
// lower-cased database and table name (DuckDB names are case-insensitive).
//
// It also holds the query's View of the buffer, taken once when the query
// is prepared: every scan of the query reads its buffered segments and
// persisted files, so that all scans (a self-join reads a table twice) see
// the same rows, each row once, even while segments are persisted and
// dropped. The View is released, and ctx cancelled, when the query's
// connection goes back to the pool (Engine.release), on every path.
type queryState struct {
	bounds map[buffer.TableKey]timeBounds
	// boundsErr is why the time bounds could not be found (nil: they
	// were); the query then reads all times.
	boundsErr error
	view      *buffer.View
	ctx       context.Context
	cancel    context.CancelFunc
	// databases are the databases the statement was admitted to read,
	// lower-cased: apron_scan refuses to bind a table of any other.
	databases map[string]bool
	// direct is set when the statement is a direct scan (direct.go).
	direct *directScan
	// meta is set when the statement's answer is completed from the
	// metadata of chunks and files (metacount.go).
	meta *metaAgg
	// newest is set when the statement is a top-n of the newest rows
	// (newest.go).
	newest *newestPrune
	// latest is set when the statement is the latest row per value of a
	// string column (latest.go).
	latest *latestPrune
	// equals are, per table, the string values its columns must equal
	// (tableRef.equals): row groups of persisted files whose statistics
	// exclude them are skipped.
	equals map[buffer.TableKey]map[string][]string
	// who runs the query (admitted.who): the system tables show it only
	// what it may see.
	who *auth.Principal
	// lastValue are the tables whose scans read their last-value cache
	// instead, when it is ready (lastvalue.go), by lowerKey.
	lastValue map[buffer.TableKey]*lastValueUse
	// only, if set, restricts the scans of one table to one of its
	// persisted files (admitted.only).
	only *onlySource
}

func (q *queryState) close() {
	q.cancel()
	q.view.Release()
}

// dropState ends the query state of connection id, if any.
func (e *Engine) dropState(id uint64) {
	if qs, ok := e.qstate.LoadAndDelete(id); ok {
		qs.(*queryState).close()
	}
}

func (q *queryState) boundsOf(k buffer.TableKey) timeBounds {
	if b, ok := q.bounds[lowerKey(k.Database, k.Table)]; ok {
		return b
	}
	return allTime
}

func lowerKey(db, table string) buffer.TableKey {
	return buffer.TableKey{Database: strings.ToLower(db), Table: strings.ToLower(table)}
}

// prepareState finds the admitted statement's time bounds and publishes
// them, with the databases it may read, for the scans bound on connection
// c. Pruning is an optimization: whenever anything is not understood, it
// is off for the query.
func (e *Engine) prepareState(c *conn, a *admitted) *queryState {
	e.dropState(c.id)
	qs := &queryState{databases: make(map[string]bool, len(a.databases)), who: a.who}
	for _, d := range a.databases {
		qs.databases[strings.ToLower(d)] = true
	}
	b, exact, exactEq, equals, err := e.scanBounds(c, a.tree)
	snap := e.wb.Catalog().Snapshot()
	qs.equals = equals
	if err == nil {
		qs.bounds = b
	} else {
		e.log.Debug("time pruning off for a query", "err", err)
		qs.boundsErr = err
	}
	if !a.explain {
		qs.direct, _ = directScanOf(a.tree, c.schema, e.wb.Catalog())
		if qs.direct == nil && err == nil {
			qs.meta = metaAggOf(a.tree, c.schema, exact)
			qs.newest = newestOf(a.tree, c.schema, exact, exactEq, equals)
			qs.latest = latestOf(a.tree, c.schema, snap, exact, exactEq, equals)
			if qs.latest != nil {
				qs.latest.combos = e.latestCombos
			}
		}
	}
	if k, use, ok := lastValueShape(a.tree, c.schema, snap); ok {
		qs.lastValue = map[buffer.TableKey]*lastValueUse{lowerKey(k.Database, k.Table): use}
		if use.project != nil && qs.direct == nil && !a.explain {
			qs.direct = &directScan{table: use.table, cols: use.project, lastValue: true, use: use}
		}
	} else if l := qs.latest; l != nil && l.project != nil && qs.direct == nil {
		qs.direct = &directScan{table: l.table, cols: l.project, latest: l}
	}
	if a.only != nil {
		// Read as the statement says, from one file: no shortcut applies.
		qs.only, qs.direct, qs.meta, qs.newest, qs.latest, qs.lastValue = a.only, nil, nil, nil, nil, nil
	}
	qs.ctx, qs.cancel = context.WithCancel(context.Background())
	if a.view != nil {
		qs.view = a.view.Share()
	} else {
		qs.view = e.wb.View()
	}
	e.qstate.Store(c.id, qs)
	return qs
}

// tableRef is one reference to a table in a statement, with the
// expressions bounding its time from below and above (JSON of DuckDB's
// parsed expressions; nil: none).
type tableRef struct {
	key          buffer.TableKey
	lower, upper []any
	// lowerStrict[i] says lower[i] is compared with > (not >=);
	// upperStrict likewise with <.
	lowerStrict, upperStrict []bool
	// partial says the WHERE clause holds more than bounds on time (or
	// something not understood), so rows within the bounds may still not
	// match: its exact bounds (scanBounds) are then unknown.
	partial bool
	// other says the WHERE clause holds more than bounds on time and the
	// string equalities of equals (partial without other: a row within
	// the bounds matches if its columns hold the values of equals).
	other bool
	// equals are the string constants columns are compared equal with
	// (col = 'v', col IN ('v', 'w')) in the top-level AND, by lower-cased
	// column name: a row whose column holds none of them cannot match.
	equals map[string][]string
}

// scanBounds collects, from a statement parsed by json_serialize_sql,
// what its scans may skip by:
//
//   - bounds: for each table, the hull of the time bounds in the WHERE
//     clauses of its references (of SELECTs over exactly one table),
//     evaluated; only tables with a finite bound appear;
//   - exact: for each table referred to exactly once in a SELECT whose
//     WHERE clause is nothing but bounds on time (or absent), the rows
//     that match for certain: every row whose time lies within
//     exact[table] satisfies that WHERE clause (a conjunction of
//     comparisons of time with constants holds on an interval of times;
//     exact is that interval narrowed by the evaluation's uncertainty,
//     empty when a bound is NULL);
//   - equals: for each table referred to exactly once, the string
//     constants its columns must equal (tableRef.equals);
//   - exactEq: as exact, for the tables whose WHERE clause is bounds on
//     time and string equalities (equals) and nothing else: every row
//     whose time lies within exactEq[table] and whose columns hold the
//     values of equals[table] satisfies it.
func (e *Engine) scanBounds(c *conn, tree map[string]any) (bounds, exact, exactEq map[buffer.TableKey]timeBounds, equals map[buffer.TableKey]map[string][]string, err error) {
	w := &walker{db: c.schema}
	w.walk(tree["statements"])
	refs := make(map[buffer.TableKey]int, len(w.refs))
	for _, r := range w.refs {
		refs[r.key]++
	}
	for _, r := range w.refs {
		if refs[r.key] == 1 && len(r.equals) > 0 {
			if equals == nil {
				equals = map[buffer.TableKey]map[string][]string{}
			}
			equals[r.key] = r.equals
		}
	}
	exact, exactEq = make(map[buffer.TableKey]timeBounds), make(map[buffer.TableKey]timeBounds)
	for _, r := range w.refs {
		if refs[r.key] == 1 && len(r.lower)+len(r.upper) == 0 {
			if !r.partial {
				exact[r.key] = allTime
			} else if r.equalsOnly() {
				exactEq[r.key] = allTime
			}
		}
	}
	// Evaluate every bound expression in one query.
	var exprs []any
	for _, r := range w.refs {
		exprs = append(exprs, r.lower...)
		exprs = append(exprs, r.upper...)
	}
	if len(exprs) == 0 {
		return nil, exact, exactEq, equals, nil
	}
	vals, err := e.evalTimes(c, exprs)
	if err != nil {
		return nil, nil, nil, equals, err
	}
	out := make(map[buffer.TableKey]timeBounds)
	unbounded := make(map[buffer.TableKey]bool)
	i := 0
	for _, r := range w.refs {
		b, sure := allTime, allTime
		for j := range r.lower {
			v := vals[i]
			if v.ok {
				b.min = max(b.min, v.lo)
				lo := v.hi
				if r.lowerStrict[j] {
					lo = satAdd(lo, 1)
				}
				sure.min = max(sure.min, lo)
			} else {
				sure = emptyTime // NULL or not understood: no row is sure
			}
			i++
		}
		for j := range r.upper {
			v := vals[i]
			if v.ok {
				b.max = min(b.max, v.hi)
				hi := v.lo
				if r.upperStrict[j] {
					hi = satSub(hi, 1)
				}
				sure.max = min(sure.max, hi)
			} else {
				sure = emptyTime
			}
			i++
		}
		if refs[r.key] == 1 && !r.partial {
			exact[r.key] = sure
		} else if refs[r.key] == 1 && r.equalsOnly() {
			exactEq[r.key] = sure
		}
		if b == allTime {
			unbounded[r.key] = true
			continue
		}
		if cur, ok := out[r.key]; ok {
			b = timeBounds{min(cur.min, b.min), max(cur.max, b.max)}
		}
		out[r.key] = b
	}
	for k := range unbounded {
		delete(out, k)
	}
	return out, exact, exactEq, equals, nil
}

// equalsOnly says the WHERE clause is bounds on time and string
// equalities, at least one, and nothing else.
func (r *tableRef) equalsOnly() bool { return r.partial && !r.other && len(r.equals) > 0 }

// emptyTime bounds no time at all.
var emptyTime = timeBounds{math.MaxInt64, math.MinInt64}

// parseSQL parses sql with DuckDB's json_serialize_sql. A statement that
// is not a SELECT (json_serialize_sql serializes no other kind) is a
// *notSelect error, one that does not parse DuckDB's parser error.
//
// Parses are kept in the engine's parseCache: the tree returned may be
// shared and must not be modified.
func (e *Engine) parseSQL(c *conn, sql string) (map[string]any, error) {
	if p, ok := e.parses.get(sql); ok {
		return p.tree, p.err
	}
	js, err := c.serializeSQL(sql)
	if err != nil {
		// Not kept: the failure may be the connection's, not the text's.
		return nil, fmt.Errorf("serializing: %w", err)
	}
	var tree map[string]any
	if err := decodeJSON(js, &tree); err != nil {
		return nil, err
	}
	p := &parsed{tree: tree}
	if tree["error"] != false {
		msg, _ := tree["error_message"].(string)
		p.tree = nil
		if tree["error_type"] == "not implemented" {
			p.err = &notSelect{msg: msg}
		} else {
			p.err = newError(ErrSyntax, "%s", msg)
		}
	}
	e.parses.put(sql, p, int64(len(sql)+len(js)))
	return p.tree, p.err
}

// serializeSQL returns json_serialize_sql(sql), through a statement
// prepared once per connection with sql as its parameter: a query of its
// own (parsed, bound and planned around the text as a literal, its result
// through the Arrow conversion) took ~300 µs of every new statement's
// admission on 2 cores.
func (c *conn) serializeSQL(sql string) ([]byte, error) {
	if c.serialize.Ptr == nil {
		if duck.Prepare(c.c, "SELECT json_serialize_sql($1::VARCHAR)", &c.serialize) == duck.StateError {
			err := classify(duck.PrepareError(c.serialize))
			duck.DestroyPrepare(&c.serialize)
			c.serialize = duck.PreparedStatement{}
			return nil, err
		}
	}
	if duck.BindVarcharLength(c.serialize, 1, sql, duck.IdxT(len(sql))) == duck.StateError {
		return nil, errors.New("binding the statement to serialize failed")
	}
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.ExecutePrepared(c.serialize, &res) == duck.StateError {
		return nil, classify(duck.ResultError(&res))
	}
	ch := duck.FetchChunk(res)
	if ch.Ptr == nil {
		return nil, errors.New("json_serialize_sql returned no row")
	}
	defer duck.DestroyDataChunk(&ch)
	if duck.DataChunkGetSize(ch) != 1 || duck.DataChunkGetColumnCount(ch) != 1 {
		return nil, fmt.Errorf("json_serialize_sql returned %d rows of %d columns", duck.DataChunkGetSize(ch), duck.DataChunkGetColumnCount(ch))
	}
	vec := duck.DataChunkGetVector(ch, 0)
	if mask := duck.VectorGetValidity(vec); mask != nil && !duck.ValidityRowIsValid(mask, 0) {
		return nil, errors.New("json_serialize_sql returned NULL")
	}
	str := (*duck.StringT)(duck.VectorGetData(vec))
	return []byte(duck.StringTData(str)), nil
}

// walker collects the table references of a parsed statement.
type walker struct {
	db   string // the current database
	refs []tableRef
}

func (w *walker) walk(v any) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			w.walk(x)
		}
	case map[string]any:
		switch v["type"] {
		case "SELECT_NODE":
			if from, ok := v["from_table"].(map[string]any); ok && from["type"] == "BASE_TABLE" {
				if k, ok := w.key(from); ok {
					r := tableRef{key: k}
					alias, _ := from["alias"].(string)
					name, _ := from["table_name"].(string)
					w.bounds(v["where_clause"], alias, name, &r)
					w.refs = append(w.refs, r)
				}
				for f, x := range v {
					if f != "from_table" {
						w.walk(x)
					}
				}
				return
			}
		case "BASE_TABLE":
			if k, ok := w.key(v); ok {
				w.refs = append(w.refs, tableRef{key: k})
			}
			return
		}
		for _, x := range v {
			w.walk(x)
		}
	}
}

// key names the table a BASE_TABLE refers to, if it can be an Apron
// table.
func (w *walker) key(ref map[string]any) (buffer.TableKey, bool) {
	cat, _ := ref["catalog_name"].(string)
	schema, _ := ref["schema_name"].(string)
	table, _ := ref["table_name"].(string)
	if cat != "" && !strings.EqualFold(cat, "memory") {
		return buffer.TableKey{}, false
	}
	if schema == "" {
		if w.db == "" {
			return buffer.TableKey{}, false
		}
		schema = w.db
	}
	return lowerKey(schema, table), true
}

// bounds adds the bounds on time found in the top-level AND of where.
func (w *walker) bounds(where any, alias, table string, r *tableRef) {
	x, ok := where.(map[string]any)
	if !ok {
		return
	}
	isTime := func(e any) bool { return isTimeColumn(e, alias, table) }
	switch x["type"] {
	case "CONJUNCTION_AND":
		children, _ := x["children"].([]any)
		for _, c := range children {
			w.bounds(c, alias, table, r)
		}
	case "COMPARE_BETWEEN":
		if isTime(x["input"]) && isConstant(x["lower"]) && isConstant(x["upper"]) {
			r.lower, r.lowerStrict = append(r.lower, x["lower"]), append(r.lowerStrict, false)
			r.upper, r.upperStrict = append(r.upper, x["upper"]), append(r.upperStrict, false)
		} else {
			r.partial, r.other = true, true
		}
	case "COMPARE_EQUAL", "COMPARE_GREATERTHAN", "COMPARE_GREATERTHANOREQUALTO", "COMPARE_LESSTHAN", "COMPARE_LESSTHANOREQUALTO":
		op, left, right := x["type"].(string), x["left"], x["right"]
		if !isTime(left) {
			if !isTime(right) {
				r.partial = true
				if op != "COMPARE_EQUAL" || !r.addEqual(left, right, alias, table) {
					r.other = true
				}
				return
			}
			left, right = right, left
			op = strings.NewReplacer("GREATER", "LESS", "LESS", "GREATER").Replace(op)
		}
		if !isConstant(right) {
			r.partial, r.other = true, true
			return
		}
		if op == "COMPARE_EQUAL" || strings.HasPrefix(op, "COMPARE_GREATER") {
			r.lower, r.lowerStrict = append(r.lower, right), append(r.lowerStrict, op == "COMPARE_GREATERTHAN")
		}
		if op == "COMPARE_EQUAL" || strings.HasPrefix(op, "COMPARE_LESS") {
			r.upper, r.upperStrict = append(r.upper, right), append(r.upperStrict, op == "COMPARE_LESSTHAN")
		}
	case "COMPARE_IN":
		// col IN ('a', 'b'): a row matches if its col holds one of them,
		// as equals says.
		children, _ := x["children"].([]any)
		r.partial = true
		if len(children) < 2 || isTime(children[0]) || !r.addIn(children[0], children[1:], alias, table) {
			r.other = true
		}
	default:
		r.partial, r.other = true, true
	}
}

// addIn records col IN (values) where col is a column of the table and
// values are VARCHAR constants; it says whether it was.
func (r *tableRef) addIn(col any, values []any, alias, table string) bool {
	name, ok := columnOf(col, alias, table)
	if !ok {
		return false
	}
	vals := make([]string, len(values))
	for i, x := range values {
		v, ok := varcharConstant(x)
		if !ok {
			return false
		}
		vals[i] = v
	}
	r.addValues(name, vals)
	return true
}

// addEqual records x = y where one is a column of the table (named by
// itself, or qualified by the table's name or alias) and the other a
// VARCHAR constant; it says whether it was.
func (r *tableRef) addEqual(x, y any, alias, table string) bool {
	col, ok := columnOf(x, alias, table)
	v, isConst := varcharConstant(y)
	if !ok || !isConst {
		if col, ok = columnOf(y, alias, table); !ok {
			return false
		}
		if v, isConst = varcharConstant(x); !isConst {
			return false
		}
	}
	r.addValues(col, []string{v})
	return true
}

// addValues records that col must hold one of vals (sorted here).
//
// The values of equals are kept sorted and without duplicates, and
// looked up by hasValue: an IN list may hold a hundred thousand of them
// (a statement of up to maxSQLBytes), and a scan looks up every value of
// a dictionary, or every row of plain strings.
func (r *tableRef) addValues(col string, vals []string) {
	if r.equals == nil {
		r.equals = map[string][]string{}
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	col = strings.ToLower(col)
	if cur, ok := r.equals[col]; ok {
		// Two conditions on one column: a row matches both only if its
		// value is among the values of each; keeping the values in
		// common keeps pruning sound.
		var both []string
		for _, c := range cur {
			if hasValue(vals, c) {
				both = append(both, c)
			}
		}
		r.equals[col] = both
		return
	}
	r.equals[col] = vals
}

// hasValue says whether v is among vals, sorted (tableRef.equals).
func hasValue(vals []string, v string) bool {
	_, ok := slices.BinarySearch(vals, v)
	return ok
}

func columnOf(e any, alias, table string) (string, bool) {
	m, ok := e.(map[string]any)
	if !ok || m["class"] != "COLUMN_REF" {
		return "", false
	}
	names, _ := m["column_names"].([]any)
	switch len(names) {
	case 1:
		n, ok := names[0].(string)
		return n, ok
	case 2:
		q, _ := names[0].(string)
		n, ok := names[1].(string)
		if ok && (alias != "" && strings.EqualFold(q, alias) || alias == "" && strings.EqualFold(q, table)) {
			return n, true
		}
	}
	return "", false
}

// varcharConstant returns the value of a non-NULL VARCHAR constant (no
// cast: a cast to another type compares differently).
func varcharConstant(e any) (string, bool) {
	m, ok := e.(map[string]any)
	if !ok || m["class"] != "CONSTANT" {
		return "", false
	}
	val, _ := m["value"].(map[string]any)
	typ, _ := val["type"].(map[string]any)
	if val == nil || val["is_null"] != false || typ == nil || typ["id"] != "VARCHAR" {
		return "", false
	}
	s, ok := val["value"].(string)
	return s, ok
}

// isConstant says whether an expression is built of constants, casts and
// functions that give the same value within a query only: no columns, no
// subqueries, nothing random.
func isConstant(e any) bool {
	m, ok := e.(map[string]any)
	if !ok {
		return false
	}
	switch m["class"] {
	case "CONSTANT":
		return true
	case "CAST":
		return isConstant(m["child"])
	case "FUNCTION":
		name, _ := m["function_name"].(string)
		if !constantFunctions[name] || m["filter"] != nil {
			return false
		}
		children, _ := m["children"].([]any)
		for _, c := range children {
			if !isConstant(c) {
				return false
			}
		}
		return true
	}
	return false
}

// constantFunctions are the functions bounds may use. now() and its kin
// are evaluated by a statement of their own, in the query's transaction
// (so at the same instant as the query's): bounds that use them are
// still widened by clockSlack, a margin that costs little pruning.
var constantFunctions = map[string]bool{
	"+": true, "-": true, "now": true, "current_timestamp": true, "get_current_timestamp": true, "transaction_timestamp": true,
	"to_microseconds": true, "to_milliseconds": true, "to_seconds": true, "to_minutes": true, "to_hours": true, "to_days": true,
	"to_weeks": true, "to_months": true, "to_years": true, "trunc": true, "make_timestamp": true, "make_timestamp_ns": true,
	"to_timestamp": true, "date_trunc": true, "time_bucket": true, "epoch_ms": true, "strptime": true,
}

const clockSlack = int64(60e9)

// evaluated is a bound's value widened to the ns range it may stand for.
// exact says the bound compares with the time column as the value at,
// in ns, exactly: a constant without a function of a type DuckDB compares
// with a TIMESTAMP_NS at ns (TIMESTAMP_NS, a string cast to it, or a
// TIMESTAMP cast up to it); a filtered direct scan (direct_where.go)
// needs no more.
type evaluated struct {
	lo, hi int64
	ok     bool
	at     int64
	exact  bool
}

// evalTimes evaluates expressions as DuckDB would compare them with a
// timestamp_ns column: each becomes the range of ns it can stand for
// given its type (a TIMESTAMP is compared at µs precision, a DATE at days).
func (e *Engine) evalTimes(c *conn, exprs []any) ([]evaluated, error) {
	// Expressions without a function (constants and casts: the same value
	// on every evaluation, DuckDB's settings being locked) are evaluated
	// once and kept; the others (now() and kin) every time.
	out := make([]evaluated, len(exprs))
	hasFunc := make([]bool, len(exprs))
	keys := make([]string, len(exprs))
	var miss []int
	now := time.Now()
	for i, x := range exprs {
		keys[i], hasFunc[i] = boundKey(x)
		if !hasFunc[i] {
			if v, ok := e.boundValues.get(keys[i]); ok {
				out[i] = v
				continue
			}
		} else if ns, typ, ok := nowBound(x, now); ok {
			out[i] = evaluatedOf(typ, strconv.FormatInt(ns, 10), true) // nowbounds.go
			e.boundsInGo.Add(1)
			continue
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return out, nil
	}
	var key strings.Builder
	key.WriteString(c.schema)
	for _, i := range miss {
		key.WriteByte(0)
		key.WriteString(keys[i])
	}
	if err := c.begin(); err != nil { // the query's now() (engine.go)
		return nil, err
	}
	stmt, err := c.evaluation(key.String(), func() (string, error) { return e.evalSQL(c, exprs, miss) })
	if err != nil {
		return nil, err
	}
	rows, err := preparedStrings(stmt)
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 2*len(miss) {
		return nil, fmt.Errorf("evaluating bounds: %d rows", len(rows))
	}
	for k, i := range miss {
		out[i] = evaluatedOf(rows[0][2*k], rows[0][2*k+1], hasFunc[i])
		if !hasFunc[i] {
			e.boundValues.put(keys[i], out[i], int64(len(keys[i])))
		}
	}
	return out, nil
}

// boundKey is the key of a bound expression's value in boundValues, and
// whether it calls a function (its value may then change from one query
// to the next).
func boundKey(x any) (key string, hasFunc bool) {
	return treeKey(x)
}

// evalSQL is the SQL text of the statement that evaluates exprs[i] for
// each i in miss: SELECT typeof(x), epoch_ns(CAST(x AS TIMESTAMP_NS)) for
// each x, built from a serialized template with NULL in place of x, and
// turned back into text by DuckDB (json_deserialize_sql), so that it can
// be prepared on the query's connection and run again there.
// (json_execute_serialized_sql would run it in a context of its own, on
// every call: 1.9 ms of a 5.6 ms query.)
func (e *Engine) evalSQL(c *conn, exprs []any, miss []int) (string, error) {
	var tree map[string]any
	if err := decodeJSON([]byte(e.evalTemplate), &tree); err != nil {
		return "", err
	}
	node := tree["statements"].([]any)[0].(map[string]any)["node"].(map[string]any)
	tmpl, _ := json.Marshal(node["select_list"])
	var list []any
	for k, i := range miss {
		var entries []any
		if err := decodeJSON(tmpl, &entries); err != nil {
			return "", err
		}
		for j, en := range entries {
			if !replaceNull(en, exprs[i]) {
				return "", fmt.Errorf("template has no NULL")
			}
			if m, ok := en.(map[string]any); ok {
				m["alias"] = fmt.Sprintf("c%d_%d", k, j) // names must be unique
			}
		}
		list = append(list, entries...)
	}
	node["select_list"] = list
	stmt, err := json.Marshal(tree)
	if err != nil {
		return "", err
	}
	rows, err := queryStrings(c.c, "SELECT json_deserialize_sql("+quoteLiteral(string(stmt))+")")
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return "", fmt.Errorf("deserializing the bounds' statement: %d rows", len(rows))
	}
	return rows[0][0], nil
}

// evaluatedOf is the range of ns a bound of type typ and value val (ns
// since the epoch as a string; NULL: no bound) can stand for.
func evaluatedOf(typ, val string, hasFunc bool) evaluated {
	ns, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return evaluated{} // NULL: no bound
	}
	var g int64
	switch typ {
	case "TIMESTAMP_NS", "VARCHAR":
		g = 0
	case "TIMESTAMP", "TIMESTAMP WITH TIME ZONE":
		// (A zoned time compares as its UTC instant; the server's
		// TimeZone is UTC, so the cast to TIMESTAMP_NS above is too.)
		g = 1e3
	case "TIMESTAMP_MS":
		g = 1e6
	case "TIMESTAMP_S":
		g = 1e9
	case "DATE":
		g = 24 * 3600 * 1e9
	default:
		return evaluated{}
	}
	exact := !hasFunc && (typ == "TIMESTAMP_NS" || typ == "VARCHAR" || typ == "TIMESTAMP")
	if hasFunc {
		g += clockSlack // now() and kin: a margin (constantFunctions)
	}
	return evaluated{lo: satSub(ns, g), hi: satAdd(ns, g), ok: true, at: ns, exact: exact}
}

// replaceNull replaces, in a parsed expression, the first NULL constant
// with x.
func replaceNull(e any, x any) bool {
	switch e := e.(type) {
	case map[string]any:
		for k, v := range e {
			if m, ok := v.(map[string]any); ok && m["class"] == "CONSTANT" {
				if val, ok := m["value"].(map[string]any); ok && val["is_null"] == true {
					e[k] = x
					return true
				}
			}
			if replaceNull(v, x) {
				return true
			}
		}
	case []any:
		for i, v := range e {
			if m, ok := v.(map[string]any); ok && m["class"] == "CONSTANT" {
				if val, ok := m["value"].(map[string]any); ok && val["is_null"] == true {
					e[i] = x
					return true
				}
			}
			if replaceNull(v, x) {
				return true
			}
		}
	}
	return false
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// decodeJSON decodes keeping numbers as they are: DuckDB's uint64
// query_location does not survive a float64.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// evalTemplateSQL is serialized once at Open: evalTimes puts bound
// expressions in place of its NULLs.
const evalTemplateSQL = `SELECT json_serialize_sql('SELECT typeof(NULL), epoch_ns(CAST(NULL AS TIMESTAMP_NS))')`

// queryStrings runs a small query and returns its rows as strings.
func queryStrings(c duck.Connection, sql string) ([][]string, error) {
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.Query(c, sql, &res) == duck.StateError {
		return nil, classify(duck.ResultError(&res))
	}
	return resultStrings(&res)
}

// preparedStrings runs a prepared small query and returns its rows as
// strings.
func preparedStrings(stmt duck.PreparedStatement) ([][]string, error) {
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.ExecutePrepared(stmt, &res) == duck.StateError {
		return nil, classify(duck.ResultError(&res))
	}
	return resultStrings(&res)
}

// resultStrings reads a small query's result as strings.
func resultStrings(res *duck.Result) ([][]string, error) {
	opts := duck.ResultGetArrowOptions(res)
	defer duck.DestroyArrowOptions(&opts)
	n := duck.ColumnCount(res)
	names := make([]string, n)
	types := make([]duck.LogicalType, n)
	for i := range n {
		names[i] = duck.ColumnName(res, i)
		types[i] = duck.ColumnLogicalType(res, i)
	}
	schema, ed := duck.NewArrowSchema(opts, types, names)
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	if err := errorData(ed); err != nil {
		return nil, err
	}
	var out [][]string
	for {
		ch := duck.FetchChunk(*res)
		if ch.Ptr == nil {
			break
		}
		rec, ed := duck.DataChunkToArrowArray(opts, schema, ch)
		duck.DestroyDataChunk(&ch)
		if err := errorData(ed); err != nil {
			return nil, err
		}
		for row := range int(rec.NumRows()) {
			r := make([]string, rec.NumCols())
			for j, col := range rec.Columns() {
				if col.IsNull(row) {
					r[j] = "NULL"
				} else {
					r[j] = strings.Clone(col.ValueStr(row))
				}
			}
			out = append(out, r)
		}
		rec.Release()
	}
	return out, nil
}
