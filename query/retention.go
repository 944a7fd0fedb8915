//go:build duckdb_arrow

package query

import (
	"fmt"
	"math"
	"time"

	"github.com/apron-db/apron/buffer"
)

// Retention (buffer/retention.go): a table of a database with a retention
// is the view
//
//	SELECT * FROM apron_scan(…) WHERE time >= now() - INTERVAL <retention>
//
// so DuckDB drops the expired rows of every chunk and file it reads, and
// the scans skip chunks and files whose rows are all older than the
// View's cutoff (taken when the query is prepared, so never later than
// DuckDB's now()). A direct scan (direct.go) is used only when no chunk
// or file of the table holds both expired and live rows; otherwise DuckDB
// runs the query, with the view's filter.

// retentionFilter is the WHERE clause of a view of a table of a database
// kept for r (nothing when r is 0).
func retentionFilter(r time.Duration) string {
	if r <= 0 {
		return ""
	}
	return fmt.Sprintf(" WHERE time >= apron.main.now() - to_microseconds(CAST(%d AS BIGINT))", r.Microseconds())
}

// withCutoff narrows b to the rows of k the View keeps.
func withCutoff(v *buffer.View, k buffer.TableKey, b timeBounds) timeBounds {
	if c := v.Cutoff(k.Database); c > b.min {
		b.min = c
	}
	return b
}

// straddlesCutoff says whether a chunk or file of k in v holds rows on
// both sides of the View's cutoff: a direct scan, which filters no row,
// cannot serve it.
func straddlesCutoff(v *buffer.View, k buffer.TableKey) bool {
	c := v.Cutoff(k.Database)
	if c == math.MinInt64 {
		return false
	}
	for _, s := range v.Buffered {
		chunks := v.Chunks(s, k.Database, k.Table)
		hit := false
		for _, ch := range chunks {
			if ch.Rec.NumRows() > 0 && ch.MinTime < c && ch.MaxTime >= c {
				hit = true
			}
			ch.Rec.Release()
		}
		if hit {
			return true
		}
	}
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database == k.Database && f.Table == k.Table && f.Rows > 0 && f.MinTime < c && f.MaxTime >= c {
				return true
			}
		}
	}
	return false
}
