package buffer

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
)

// parquetGateStore holds every upload of a Parquet file until open is
// closed.
type parquetGateStore struct {
	objstore.Store
	open      chan struct{}
	closeOnce sync.Once
}

func (s *parquetGateStore) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	if strings.HasSuffix(name, ".parquet") {
		select {
		case <-s.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Put(ctx, name, data, size, opts)
}

func (s *parquetGateStore) release() { s.closeOnce.Do(func() { close(s.open) }) }

// gatedConfig is a 1 MiB buffer persisting to a store that holds every
// Parquet upload until released, whose writes wait for room up to
// fullWait. The held upload never times out: only what a test does ends
// a wait.
func gatedConfig(t *testing.T, mem memory.Allocator, fullWait time.Duration) (*parquetGateStore, Config) {
	store := &parquetGateStore{Store: objstore.NewMemory(), open: make(chan struct{})}
	cfg := persistConfig(t, mem, store)
	cfg.MemLimit = 1 << 20
	cfg.ReleasePersisted = true
	cfg.FullWait = fullWait
	cfg.PersistAttemptTimeout = time.Hour
	return store, cfg
}

// fillUntilWaiting writes 500-row batches from a goroutine until one
// waits for room (or fails); it returns a function that stops the writes
// and returns their rows and the first error.
func fillUntilWaiting(t *testing.T, b *WriteBuffer, ctx context.Context) func() ([]row, error) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	var acked []row
	var werr error
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rows := genRows(t0.UnixNano()+int64(i)*1000, 500, 1)
			rec := makeRecord(memory.NewGoAllocator(), cpuSchema, rows)
			_, err := b.Write(ctx, "db", "cpu", rec, catalog.WriteOptions{})
			rec.Release()
			if err != nil {
				werr = err
				return
			}
			acked = append(acked, rows...)
		}
	}()
	waitFor(t, "a write waiting for room", func() bool {
		select {
		case <-done:
			return true
		default:
		}
		return testutil.ToFloat64(b.metrics.fullWaits) > 0
	})
	return func() ([]row, error) {
		close(stop)
		<-done
		return acked, werr
	}
}

// TestWriteWaitsForRoom: a write that finds the buffer full while closed
// segments are being persisted waits for their memory and is then taken,
// with every row acknowledged there once; past --buffer-full-wait, when
// its context ends, when a shutdown begins, or when the batches waiting
// would pass their bound, it is refused as before, saying why.
func TestWriteWaitsForRoom(t *testing.T) {
	t.Run("taken once room comes", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		store, cfg := gatedConfig(t, mem, time.Minute)
		defer store.release()
		b := openBuffer(t, cfg)
		finish := fillUntilWaiting(t, b, context.Background())
		if n := testutil.ToFloat64(b.metrics.writes.WithLabelValues("full")); n != 0 {
			t.Fatalf("%v writes refused while persistence was only slow", n)
		}
		// A batch that would take the bytes waiting past their bound is
		// refused at once: it does not wait (nor count as waiting).
		host := strings.Repeat("h", 20<<10)
		big := genRows(t0.UnixNano()-1e12, 1000, 1)
		for i := range big {
			big[i].Host = &host
		}
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, big)
		waits := testutil.ToFloat64(b.metrics.fullWaits)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Write(ctx, "db", "cpu", rec, catalog.WriteOptions{})
		cancel()
		rec.Release()
		if !errors.Is(err, ErrBufferFull) || testutil.ToFloat64(b.metrics.fullWaits) != waits {
			t.Fatalf("a 20 MiB batch with 16 MiB allowed to wait: %v, %v writes waited (want ErrBufferFull at once, %v)",
				err, testutil.ToFloat64(b.metrics.fullWaits), waits)
		}
		if !strings.Contains(err.Error(), "could not wait for room") || !strings.Contains(err.Error(), "smaller batches") {
			t.Fatalf("the refusal of a batch past the bound on waiting bytes does not say so: %v", err)
		}
		store.release() // persistence goes on: the waiting write is taken
		waitFor(t, "writes after the wait", func() bool {
			return testutil.ToFloat64(b.metrics.rows) > 0 && testutil.ToFloat64(b.metrics.fullWaitSeconds) > 0
		})
		acked, err := finish()
		if err != nil {
			t.Fatalf("a write failed: %v", err)
		}
		waitAllPersisted(t, b)
		assertRows(t, viewRows(t, b, "cpu"), acked)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	})

	for _, c := range []struct {
		name     string
		fullWait time.Duration
		cancel   bool // the write's context ends
		shutdown bool // a shutdown begins (FinishPersist)
	}{
		{"refused past --buffer-full-wait", 200 * time.Millisecond, false, false},
		{"refused when its context ends", time.Hour, true, false},
		{"refused when a shutdown begins", time.Hour, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			store, cfg := gatedConfig(t, mem, c.fullWait)
			defer store.release()
			b := openBuffer(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			finish := fillUntilWaiting(t, b, ctx)
			if c.cancel {
				cancel()
			}
			finished := make(chan error, 1)
			if c.shutdown {
				go func() { finished <- b.FinishPersist(context.Background()) }()
			}
			type result struct {
				acked []row
				err   error
			}
			ended := make(chan result, 1)
			go func() {
				acked, err := finish()
				ended <- result{acked, err}
			}()
			var acked []row
			var err error
			select {
			case r := <-ended:
				acked, err = r.acked, r.err
			case <-time.After(20 * time.Second):
				store.release()
				t.Fatal("the waiting write was not refused within 20 s (it waits for its --buffer-full-wait of an hour)")
			}
			if !errors.Is(err, ErrBufferFull) {
				t.Fatalf("after %d rows: %v, want ErrBufferFull", len(acked), err)
			}
			store.release()
			if c.shutdown {
				// The persist in progress finishes, the others wait for the
				// next start: every acknowledged row is there after it.
				if err := <-finished; err != nil {
					t.Fatal(err)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				b = openBuffer(t, cfg)
			} else if !strings.Contains(err.Error(), "being persisted") {
				t.Fatalf("%v: the error does not say that segments are being persisted", err)
			}
			waitAllPersisted(t, b)
			assertRows(t, viewRows(t, b, "cpu"), acked)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
