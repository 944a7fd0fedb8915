package catalog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersAndWriter runs readers against a writer that keeps
// adding tables and columns; run it with -race. Readers check that every
// snapshot they see is internally consistent and that versions never go
// back.
func TestConcurrentReadersAndWriter(t *testing.T) {
	c := New(Limits{})
	withCPU(t, c)
	const writes = 200
	var done atomic.Bool
	var wg sync.WaitGroup

	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for !done.Load() {
				s := c.Snapshot()
				if s.Version() < last {
					errs <- fmt.Errorf("version went back from %d to %d", last, s.Version())
					return
				}
				last = s.Version()
				n := 0
				for _, d := range s.Databases() {
					for _, tb := range s.Tables(d.Name) {
						n++
						if tb.Columns[0].Name != TimeColumn || tb.ArrowSchema().NumFields() != len(tb.Columns) {
							errs <- fmt.Errorf("inconsistent table %s.%s", d.Name, tb.Name)
							return
						}
					}
				}
				if n != s.NumTables() {
					errs <- fmt.Errorf("snapshot lists %d tables, counts %d", n, s.NumTables())
					return
				}
				// Readers also plan, as concurrent writers to other
				// tables would; planning must be safe alongside Apply.
				if _, err := c.PlanWrite("metrics", "cpu", cpu(), WriteOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	for i := 0; i < writes; i++ {
		if i%2 == 0 {
			write(t, c, fmt.Sprintf("db%d", i%7), fmt.Sprintf("t%d", i), cpu())
		} else {
			write(t, c, "metrics", "cpu", sch(fld("time", tsNs), fld(fmt.Sprintf("c%d", i), i64)))
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.Version(); got != writes+1 {
		t.Errorf("version = %d, want %d", got, writes+1)
	}
}
