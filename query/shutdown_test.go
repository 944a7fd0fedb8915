//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDrain: Drain interrupts running queries and refuses new ones, and
// returns once every query has given its connection back; a reader still
// held keeps it waiting (the query may read the buffer, which must not be
// freed meanwhile) until its deadline says so.
func TestDrain(t *testing.T) {
	t.Run("interrupts", func(t *testing.T) {
		v := newEnv(t, Config{MaxConcurrent: 2})
		v.cpu("db", 100_000, 10, base)
		done := make(chan error, 1)
		go func() {
			// Runs for minutes unless interrupted.
			_, _, err := collect(v.e.Query(context.Background(), "SELECT count(*) FROM db.cpu a, db.cpu b, db.cpu c", ""))
			done <- err
		}()
		waitActive(t, v.e, 1)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := v.e.Drain(ctx); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		t.Logf("drained in %s", time.Since(start).Round(time.Millisecond))
		if err := <-done; err == nil {
			t.Error("the interrupted query returned no error")
		}
		if _, err := v.e.Query(context.Background(), "SELECT 1", ""); !errors.Is(err, ErrClosed) {
			t.Errorf("a query after Drain: %v, want ErrClosed", err)
		}
	})
	t.Run("held_reader", func(t *testing.T) {
		v := newEnv(t, Config{MaxConcurrent: 2})
		v.cpu("db", 100_000, 10, base)
		r, err := v.e.Query(context.Background(), "SELECT a.time, b.host FROM db.cpu a, db.cpu b", "")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Next() {
			t.Fatalf("no first batch: %v", r.Err())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := v.e.Drain(ctx); err == nil {
			t.Fatal("Drain returned nil while a reader held its connection")
		}
		for r.Next() {
		}
		if r.Err() == nil {
			t.Error("the interrupted query ended without an error")
		}
		r.Release()
		if err := v.e.Drain(context.Background()); err != nil {
			t.Fatalf("Drain once the reader is released: %v", err)
		}
		// The env's cleanup closes the engine: Close works after Drain.
	})
}

// waitActive polls until n connections run queries.
func waitActive(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().Active < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d queries running after 10s", n)
		}
		time.Sleep(time.Millisecond)
	}
}
