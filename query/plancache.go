//go:build duckdb_arrow

package query

import (
	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// Plans kept for the next query of the same text.
//
// DuckDB prepares a statement in three steps — bind, optimize, make the
// physical plan — that cost a small query more than running it (0.3 ms of
// a 1.3 ms count(*), 0.4 ms of the last row per host). Dashboards,
// alerting and query tickets send the same text again and again, so each
// pooled connection keeps the statements it prepared, by text, database
// and catalog version, and runs one again rather than preparing it anew.
// DuckDB runs a prepared statement again with fresh operator states (the
// table function's init runs again: the scan takes the new query's View,
// bounds and caller by connection, bindData.queryOf) and binds it again
// itself when it must: when the catalog of its views changed, and for a
// statement that calls now() or another function whose value is fixed per
// query (FunctionStability CONSISTENT_WITHIN_QUERY).
//
// A plan belongs to one query at a time: the query takes it out of the
// cache and gives it back when it ended without error (conn.keepPlan);
// one that failed, was interrupted or cancelled is destroyed. Admission
// (permissions included) and the query's state are done anew for every
// query; only DuckDB's plan is reused.

// planKey is what a plan is kept by: what DuckDB bound it against.
type planKey struct {
	sql      string
	database string // the current database (search path)
	catalog  uint64 // the version of the catalog of the query's View
	views    uint64 // the version the views were synced to
}

// maxConnPlans bounds the plans a connection keeps; past it the least
// recently kept goes. A plan is tens of KiB of DuckDB memory.
const maxConnPlans = 32

// plan is one kept plan.
type plan struct {
	key  planKey
	stmt duck.PreparedStatement
	// schema is its result's Arrow schema once a query asked for it
	// (conn.resultSchemaOf), nil before: two calls into DuckDB and an
	// import of a C schema, ~50 µs, that a query answered without
	// DuckDB (count(*), the last row per host) paid every time.
	schema *arrow.Schema
}

// takePlan returns the plan kept under k, which the caller now owns, if
// there is one.
func (c *conn) takePlan(k planKey) (duck.PreparedStatement, bool) {
	for i, p := range c.plans {
		if p.key == k {
			c.plans = append(c.plans[:i], c.plans[i+1:]...)
			c.planSchema = p.schema
			return p.stmt, true
		}
	}
	return duck.PreparedStatement{}, false
}

// resultSchemaOf is the Arrow schema of the result of stmt, the
// statement of c's current query: its kept plan's when known, else found
// and kept with the plan.
func (c *conn) resultSchemaOf(stmt duck.PreparedStatement) (*arrow.Schema, error) {
	if c.planSchema != nil {
		return c.planSchema, nil
	}
	var opts duck.ArrowOptions
	duck.ConnectionGetArrowOptions(c.c, &opts)
	defer duck.DestroyArrowOptions(&opts)
	schema, err := resultSchema(opts, stmt)
	if err != nil {
		return nil, err
	}
	c.planSchema = schema
	return schema, nil
}

// keepPlan keeps *stmt, the statement prepared for the connection's
// current query (c.plan), for the next query of its key, and zeroes
// *stmt; it destroys *stmt when the query's statement is not one to keep.
func (c *conn) keepPlan(stmt *duck.PreparedStatement) {
	if stmt.Ptr == nil {
		return
	}
	schema := c.planSchema
	c.planSchema = nil
	if c.plan == nil {
		duck.DestroyPrepare(stmt)
		return
	}
	k := *c.plan
	c.plan = nil
	if len(c.plans) >= maxConnPlans {
		old := c.plans[0]
		duck.DestroyPrepare(&old.stmt)
		c.plans = append(c.plans[:0], c.plans[1:]...)
	}
	c.plans = append(c.plans, plan{key: k, stmt: *stmt, schema: schema})
	*stmt = duck.PreparedStatement{}
}

// dropPlans destroys every kept plan.
func (c *conn) dropPlans() {
	for i := range c.plans {
		duck.DestroyPrepare(&c.plans[i].stmt)
	}
	c.plans = nil
	c.plan = nil
}
