//go:build duckdb_arrow

package query

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// untypedResult says whether DuckDB could not type stmt's result before
// its parameters are bound (SELECT ? AS v, … WHERE ? IS NULL: it then
// names the result one column "unknown"; Prepare announces a string).
func untypedResult(stmt duck.PreparedStatement) bool {
	for i := range int(duck.PreparedStatementColumnCount(stmt)) {
		if id := duck.PreparedStatementColumnType(stmt, duck.IdxT(i)); id == duck.TypeInvalid || id == duck.TypeAny {
			return true
		}
	}
	return false
}

// BoundSchema is the schema of st's result with params bound: st.Schema,
// unless DuckDB could not type the result before its parameters were
// bound. Then the statement is started with the first row of params and
// its result's schema taken, and the query interrupted (a blocking part
// of it, an aggregate, may have run): a client that compares the schema of
// a prepared statement's FlightInfo with its DoGet stream's (ADBC does)
// finds them equal.
func (e *Engine) BoundSchema(ctx context.Context, st *Statement, params arrow.RecordBatch) (*arrow.Schema, error) {
	if !st.untypedResult || st.Kind != KindQuery || params == nil || params.NumRows() == 0 {
		return st.Schema, nil
	}
	first := params.NewSlice(0, 1)
	defer first.Release()
	r, err := e.Run(ctx, st, first)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	return r.Schema(), nil
}
