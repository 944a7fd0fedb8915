//go:build duckdb_arrow

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var seqSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: tsNs},
	{Name: "writer", Type: arrow.PrimitiveTypes.Int64},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// seqBatch is rows seq from..from+n-1 of writer w.
func seqBatch(mem memory.Allocator, w, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, seqSchema)
	defer b.Release()
	for s := from; s < from+n; s++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(baseTime + s*int64(time.Millisecond) + w))
		b.Field(1).(*array.Int64Builder).Append(w)
		b.Field(2).(*array.Int64Builder).Append(s)
	}
	return b.NewRecordBatch()
}

// TestSQLConcurrentQueriesAndWrites runs 16 clients querying while 4 write
// batches (each a contiguous range of its writer's sequence, written in
// order) for a few seconds, each on its own connection. Every answer must
// be a prefix of every writer's sequence (count = max(seq)+1, sum =
// n(n-1)/2: a batch is seen whole or not at all), include every batch
// acknowledged before the query started, and never go back. At the end no
// query is left running and the server is healthy.
func TestSQLConcurrentQueriesAndWrites(t *testing.T) {
	const writers, readers = 4, 16
	duration := 5 * time.Second
	if testing.Short() {
		duration = time.Second
	}
	srv := startServer(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)

	// The table exists before the readers start.
	first := seqBatch(mem, 0, 0, 1)
	if _, err := flightPut(ctx, flightClient(t, srv.Addr), []string{"cc", "t"}, mem, first); err != nil {
		t.Fatal(err)
	}
	first.Release()

	var acked [writers]atomic.Int64 // rows of each writer acknowledged
	acked[0].Store(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	var batches, queries atomic.Int64

	for w := range int64(writers) {
		// Writers 0 and 1 use plain Flight DoPut, 2 and 3 ADBC ingest.
		var put func(rec arrow.RecordBatch) error
		if w < 2 {
			fc := flightClient(t, srv.Addr)
			put = func(rec arrow.RecordBatch) error {
				_, err := flightPut(ctx, fc, []string{"cc", "t"}, mem, rec)
				return err
			}
		} else {
			cn := adbcConn(t, srv.Addr, mem)
			put = func(rec arrow.RecordBatch) error {
				_, err := adbcIngest(ctx, cn, "cc", "t", adbc.OptionValueIngestModeCreateAppend, rec)
				return err
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			next := acked[w].Load()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + rng.Int64N(500)
				rec := seqBatch(mem, w, next, n)
				err := put(rec)
				rec.Release()
				if err != nil {
					errs <- fmt.Errorf("writer %d, seq %d..%d: %w", w, next, next+n-1, err)
					return
				}
				next += n
				acked[w].Store(next)
				batches.Add(1)
			}
		}()
	}

	const q = `SELECT writer, count(*) AS n, max(seq) AS mx, sum(seq)::BIGINT AS s FROM cc.t GROUP BY writer`
	for r := range readers {
		// Half the readers use ADBC, half arrow-go's Flight SQL client.
		var run func() ([]map[string]any, error)
		if r%2 == 0 {
			cn := adbcConn(t, srv.Addr, mem)
			run = func() ([]map[string]any, error) {
				rdr, err := adbcQuery(ctx, cn, q)
				if err != nil {
					return nil, err
				}
				return readRows(rdr)
			}
		} else {
			c := sqlClient(t, srv.Addr, mem)
			run = func() ([]map[string]any, error) {
				info, err := c.Execute(ctx, q)
				if err != nil {
					return nil, err
				}
				var rows []map[string]any
				for _, ep := range info.Endpoint {
					rdr, err := c.DoGet(ctx, ep.Ticket)
					if err != nil {
						return nil, err
					}
					part, err := readRows(rdr)
					if err != nil {
						return nil, err
					}
					rows = append(rows, part...)
				}
				return rows, nil
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last [writers]int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				var floor [writers]int64
				for w := range floor {
					floor[w] = acked[w].Load()
				}
				rows, err := run()
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				queries.Add(1)
				var seen [writers]int64
				for _, row := range rows {
					w, ok1 := row["writer"].(int64)
					n, ok2 := row["n"].(int64)
					mx, ok3 := row["mx"].(int64)
					s, ok4 := row["s"].(int64)
					if !ok1 || !ok2 || !ok3 || !ok4 || w < 0 || w >= writers {
						errs <- fmt.Errorf("reader %d: unexpected row %v", r, row)
						return
					}
					if n != mx+1 || s != n*(n-1)/2 {
						errs <- fmt.Errorf("reader %d: writer %d: count %d, max %d, sum %d: not a whole prefix of the sequence", r, w, n, mx, s)
						return
					}
					seen[w] = n
				}
				for w := range writers {
					if seen[w] < floor[w] {
						errs <- fmt.Errorf("reader %d: writer %d: %d rows, but %d were acknowledged before the query", r, w, seen[w], floor[w])
						return
					}
					if seen[w] < last[w] {
						errs <- fmt.Errorf("reader %d: writer %d: %d rows after %d", r, w, seen[w], last[w])
						return
					}
					last[w] = seen[w]
				}
			}
		}()
	}

	time.Sleep(duration)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d batches written, %d queries answered in %s", batches.Load(), queries.Load(), duration)
	if batches.Load() < writers || queries.Load() < readers {
		t.Errorf("too little work: %d batches, %d queries", batches.Load(), queries.Load())
	}

	cn := adbcConn(t, srv.Addr, mem)
	rows := mustQuery(t, cn, q)
	if len(rows) != writers {
		t.Errorf("final: %d writers, want %d: %v", len(rows), writers, rows)
	}
	for _, row := range rows {
		if w := row["writer"].(int64); row["n"].(int64) != acked[w].Load() {
			t.Errorf("final: writer %d has %v rows, %d acknowledged", w, row["n"], acked[w].Load())
		}
	}
	wantValues(t, "running queries", column(mustQuery(t, cn, `SELECT count(*) AS n FROM system.queries`), "n"), int64(1))
	checkHealth(t, srv.Addr)
}

// readRows reads rdr to the end (and releases it) into rows: column name
// to Go value. Unlike collect it may run off the test's goroutine.
func readRows(rdr array.RecordReader) ([]map[string]any, error) {
	defer rdr.Release()
	var rows []map[string]any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			row := make(map[string]any, rec.NumCols())
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = goValue(rec.Column(c), r)
			}
			rows = append(rows, row)
		}
	}
	return rows, rdr.Err()
}
