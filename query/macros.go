//go:build duckdb_arrow

package query

import (
	"fmt"

	duck "github.com/duckdb/duckdb-go-bindings"
)

// macros are the SQL functions Apron adds to DuckDB's, for the SQL that
// clients write for other Flight SQL servers (InfluxDB 3's DataFusion
// dialect, which Grafana's Flight SQL data source generates). They live in
// apron.main, which every query's search path holds. (now() is made
// with the views: views.go.)
//
//   - date_bin(stride, source[, origin]): the start of the stride-wide bin
//     that source falls in, bins aligned to origin (default 1970-01-01),
//     as DataFusion's date_bin; Grafana's $__dateBin and $__timeGroup
//     expand to it. It is DuckDB's time_bucket, as a TIMESTAMP_NS: Apron's
//     times are nanoseconds, and Grafana reads every timestamp column as
//     nanoseconds whatever its unit (a TIMESTAMP, microseconds, would show
//     1000 times too early).
var macros = []string{
	`CREATE MACRO apron.main.date_bin(stride, source) AS CAST(time_bucket(stride, source, TIMESTAMP '1970-01-01') AS TIMESTAMP_NS),
		(stride, source, origin) AS CAST(time_bucket(stride, source, origin) AS TIMESTAMP_NS)`,
}

// createMacros makes the macros on c, once the apron catalog is attached.
func createMacros(c duck.Connection) error {
	for _, m := range macros {
		if err := exec(c, m); err != nil {
			return fmt.Errorf("query: creating macro: %w", err)
		}
	}
	return nil
}
