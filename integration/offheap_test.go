package integration

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestBufferOffHeap: the real server's sealed chunks live outside the Go
// heap (--buffer-off-heap, the default; apron_buffer_offheap_bytes) while
// their segment is buffered, read back exactly through SQL and plain
// Flight, and leave once the segment is persisted and no query holds it.
func TestBufferOffHeap(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	metrics := metricsAddrOf(t, srv)
	if !stringsContainsFold(srv.Stderr(), "buffer_off_heap=true") {
		t.Fatalf("the ready line does not say buffer_off_heap=true:\n%s", srv.Stderr())
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := testCtx(t)
	cn := adbcConn(t, srv.Addr, mem)
	// 30,000 rows of one day: three sealed chunks of 8,192 rows (229 KiB
	// each, over offheap.MinMapped) and an open one.
	const n = 30000
	rec := idRecord(mem, 0, n)
	_, err := adbcIngest(ctx, cn, "oh", "cpu", "adbc.ingest.mode.create_append", rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, metrics, "apron_buffer_offheap_bytes"); v < 3*8192*28 {
		t.Fatalf("apron_buffer_offheap_bytes %v with 3 sealed chunks buffered, want at least %d", v, 3*8192*28)
	}
	check := func(when string) {
		t.Helper()
		r := queryOne(t, srv.Addr, `SELECT count(*) AS n, CAST(sum(id) AS BIGINT) AS s, sum(value) AS v,
			count(DISTINCT tag) AS tags, min(time) = TIMESTAMP '2024-01-02 03:04:05' AS first FROM oh.cpu`)
		if r["n"] != int64(n) || r["s"] != int64(n*(n-1)/2) || r["v"] != float64(n*(n-1)/2)/2 || r["tags"] != int64(7) || r["first"] != true {
			t.Fatalf("%s: %v", when, r)
		}
		wantIDRange(t, readTable(t, srv.Addr, "oh", "cpu"), 0, n)
	}
	check("buffered")

	// A DROP TABLE rolls the open segment over; it is persisted and its
	// memory unmapped.
	one := idRecord(mem, 0, 1)
	_, err = adbcIngest(ctx, cn, "oh", "roll", "adbc.ingest.mode.create_append", one)
	one.Release()
	if err != nil {
		t.Fatal(err)
	}
	sc := sqlClient(t, srv.Addr, nil)
	if _, err := sc.ExecuteUpdate(ctx, "DROP TABLE oh.roll"); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, srv, "oh", "cpu", n)
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, metrics, "apron_buffer_offheap_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("apron_buffer_offheap_bytes %v 30 s after the segment persisted, want 0", metricValue(t, metrics, "apron_buffer_offheap_bytes"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v := metricValue(t, metrics, "apron_buffer_offheap_fallbacks_total"); v != 0 {
		t.Errorf("apron_buffer_offheap_fallbacks_total %v, want 0", v)
	}
	check("persisted")
}
