//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
)

// Word is one of DuckDB's reserved keywords or scalar functions, roughly
// classified as JDBC's DatabaseMetaData wants them (GetSqlInfo).
type Word struct {
	Kind WordKind
	Name string
}

// WordKind classifies a Word.
type WordKind string

const (
	WordKeyword  WordKind = "keyword"
	WordNumeric  WordKind = "numeric"
	WordString   WordKind = "string"
	WordSystem   WordKind = "system"
	WordDatetime WordKind = "datetime"
	WordOther    WordKind = "other"
)

// Vocabulary lists DuckDB's reserved keywords and scalar functions. It
// reads DuckDB's own catalog functions, which clients' statements may not
// call (admit.go): it runs on a pool connection, outside admission.
func (e *Engine) Vocabulary(ctx context.Context) ([]Word, error) {
	c, err := e.acquire(ctx, true, "")
	if err != nil {
		return nil, err
	}
	defer e.release(c)
	rows, err := queryStrings(c.c, vocabularySQL)
	if err != nil {
		return nil, fmt.Errorf("query: listing DuckDB's keywords and functions: %w", err)
	}
	out := make([]Word, 0, len(rows))
	for _, r := range rows {
		out = append(out, Word{Kind: WordKind(r[0]), Name: r[1]})
	}
	return out, nil
}

// vocabularySQL lists DuckDB's reserved keywords and classifies its scalar
// functions by the types they take and return.
const vocabularySQL = `
SELECT 'keyword' AS kind, upper(keyword_name) AS name FROM duckdb_keywords() WHERE keyword_category = 'reserved'
UNION
SELECT CASE
    WHEN function_name IN ('current_database', 'current_schema', 'current_schemas', 'current_user', 'user', 'version', 'current_setting', 'typeof', 'current_catalog', 'pg_typeof') THEN 'system'
    WHEN list_has_any(parameter_types, ['DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_NS', 'TIMESTAMP WITH TIME ZONE', 'INTERVAL'])
      OR return_type IN ('DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_NS', 'TIMESTAMP WITH TIME ZONE', 'INTERVAL') THEN 'datetime'
    WHEN list_has_any(parameter_types, ['VARCHAR']) OR return_type = 'VARCHAR' THEN 'string'
    WHEN return_type IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'FLOAT', 'DOUBLE')
      OR return_type LIKE 'DECIMAL%' THEN 'numeric'
    ELSE 'other' END AS kind,
  function_name AS name
FROM duckdb_functions()
WHERE function_type = 'scalar' AND regexp_matches(function_name, '^[a-z][a-z0-9_]*$')
ORDER BY kind, name`
