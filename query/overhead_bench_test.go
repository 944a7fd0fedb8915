//go:build duckdb_arrow

package query

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// BenchmarkQueryOverhead measures what a trivial query costs in the
// engine (issue 14's per-query overhead), and the DuckDB steps of it.
func BenchmarkQueryOverhead(b *testing.B) {
	v := newEnv(b, Config{})
	ctx := context.Background()
	v.write("db", "cpu", batch(v.mem, col{"time", tsNs, []any{base, base + 1e9}}, col{"host", arrow.BinaryTypes.String, []any{"a", "b"}}))
	for name, sql := range map[string]string{
		"engine-select1": "SELECT 1",
		// A bound using now(), evaluated on every run (evalTimes).
		"engine-now-bound": "SELECT host FROM db.cpu WHERE host = 'a' AND time >= now() - INTERVAL 10 MINUTE",
		"engine-count":     "SELECT count(*) FROM db.cpu",
		"engine-point":     "SELECT * FROM db.cpu WHERE host = 'a' AND time >= '2026-01-01 00:00:00'::TIMESTAMP_NS",
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r, err := v.e.Query(ctx, sql, "")
				if err != nil {
					b.Fatal(err)
				}
				for r.Next() {
				}
				r.Release()
			}
		})
	}
	c, err := v.e.acquire(ctx, false, "")
	if err != nil {
		b.Fatal(err)
	}
	defer v.e.release(c)
	b.Run("begin-rollback", func(b *testing.B) {
		for b.Loop() {
			if err := c.begin(); err != nil {
				b.Fatal(err)
			}
			if err := c.end(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prepare-select1", func(b *testing.B) {
		for b.Loop() {
			var stmt duck.PreparedStatement
			if duck.Prepare(c.c, "SELECT 1", &stmt) == duck.StateError {
				b.Fatal(duck.PrepareError(stmt))
			}
			duck.DestroyPrepare(&stmt)
		}
	})
	b.Run("prepare-select1-in-tx", func(b *testing.B) {
		if err := c.begin(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			var stmt duck.PreparedStatement
			if duck.Prepare(c.c, "SELECT 1", &stmt) == duck.StateError {
				b.Fatal(duck.PrepareError(stmt))
			}
			duck.DestroyPrepare(&stmt)
		}
		c.end()
	})
}
