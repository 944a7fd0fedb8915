//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestConcurrentQueriesAndWrites(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 16})
	const batchRows = 1000
	writeBatch := func(w, seq int) {
		times, ones, tag := make([]any, batchRows), make([]any, batchRows), make([]any, batchRows)
		for i := range batchRows {
			times[i] = base + int64(seq*batchRows+i)*1000 + int64(w)
			ones[i] = int64(1)
			tag[i] = fmt.Sprintf("w%d", w)
		}
		cols := []col{{"time", tsNs, times}, {"one", arrow.PrimitiveTypes.Int64, ones}}
		if seq%5 == 4 {
			// The schema grows while readers read.
			cols = append(cols, col{fmt.Sprintf("tag%d", w), arrow.BinaryTypes.String, tag})
		}
		rec := batch(v.mem, cols...)
		defer rec.Release()
		if _, err := v.wb.Write(context.Background(), "db", "c", rec, catalogOpts); err != nil {
			t.Error(err)
		}
	}
	writeBatch(0, 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, reads atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				writeBatch(w, seq)
				writes.Add(1)
			}
		}()
	}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rows, _, err := collect(v.e.Query(context.Background(), "SELECT count(*), sum(one), count(DISTINCT time) FROM c", "db"))
				if err != nil {
					t.Error(err)
					return
				}
				f := strings.Split(rows[0], "|")
				n, _ := strconv.ParseInt(f[0], 10, 64)
				if n%batchRows != 0 || f[1] != f[0] || f[2] != f[0] {
					t.Errorf("torn read: count, sum, distinct times = %s", rows[0])
					return
				}
				if n < last {
					t.Errorf("count went from %d down to %d", last, n)
					return
				}
				last = n
				reads.Add(1)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d writes, %d queries", writes.Load(), reads.Load())
	if st := v.e.Stats(); st.Active != 0 || st.Open > 16 {
		t.Errorf("pool after the run: %+v", st)
	}
}

func TestQueueTimeout(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1, QueueTimeout: 50 * time.Millisecond})
	v.cpu("db", 10, 1, base)
	r, err := v.e.Query(context.Background(), "SELECT * FROM db.cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Query(context.Background(), "SELECT 1", ""); !errors.Is(err, ErrTooManyQueries) {
		t.Errorf("second query: %v, want ErrTooManyQueries", err)
	}
	r.Release()
	equalRows(t, "after release", v.query("SELECT count(*) FROM db.cpu", ""), []string{"10"})
}

func TestCancel(t *testing.T) {
	v := newEnv(t, Config{MaxConcurrent: 1})
	v.cpu("db", 300_000, 10, base)

	t.Run("mid_stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, err := v.e.Query(ctx, "SELECT * FROM db.cpu", "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r.Next() {
			if n++; n == 3 {
				cancel()
			}
		}
		if !errors.Is(r.Err(), context.Canceled) {
			t.Errorf("err = %v after %d batches, want Canceled", r.Err(), n)
		}
		r.Release()
	})
	t.Run("while_running", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, _, err := collect(v.e.Query(ctx, "SELECT count(*) FROM db.cpu a JOIN db.cpu b ON a.host = b.host", ""))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cancel took %s", d)
		}
	})
	t.Run("released_unread", func(t *testing.T) {
		r, err := v.e.Query(context.Background(), "SELECT * FROM db.cpu", "")
		if err != nil {
			t.Fatal(err)
		}
		r.Next()
		r.Release()
	})
	// The single connection is back and not left interrupted.
	if st := v.e.Stats(); st.Active != 0 || st.Idle != 1 {
		t.Errorf("pool: %+v", st)
	}
	equalRows(t, "after cancels", v.query("SELECT count(*) FROM db.cpu", ""), []string{"300000"})
}
