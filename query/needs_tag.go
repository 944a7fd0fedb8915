//go:build !duckdb_arrow

package query

// The query engine uses DuckDB's Arrow interface, which duckdb-go-bindings
// compiles only with the build tag duckdb_arrow. Without it, this file
// makes the build stop with one line that says what to do, instead of
// a page of undefined names in the packages that import this one:
//
//	go build -tags duckdb_arrow ./cmd/apron
//	go install -tags duckdb_arrow github.com/apron-db/apron/cmd/apron@latest
var _ = build_apron_with__go_build_tags_duckdb_arrow
