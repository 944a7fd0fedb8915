//go:build duckdb_arrow

package persist

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// TestParquetDuckDB reads a persisted file with DuckDB: time is
// TIMESTAMP_NS without a zone (so nanoseconds stay distinct), strings are
// VARCHAR, every row is there.
func TestParquetDuckDB(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rows := genRows(t0.UnixNano(), 1000, 1) // 1 ns apart: distinct only at ns precision
	chunks := makeChunks(t, mem, batch{rows: rows})
	defer releaseChunks(chunks)
	path := filepath.Join(t.TempDir(), "f.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writePartition(struct{ io.Writer }{f}, cpuTable(false), chunks, mem, RowGroupRows, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	var db duck.Database
	if duck.Open(":memory:", &db) != duck.StateSuccess {
		t.Fatal("duckdb open")
	}
	defer duck.Close(&db)
	var conn duck.Connection
	if duck.Connect(db, &conn) != duck.StateSuccess {
		t.Fatal("duckdb connect")
	}
	defer duck.Disconnect(&conn)
	q := fmt.Sprintf(`SELECT (typeof(any_value(time)) = 'TIMESTAMP_NS')::BIGINT,
		(typeof(any_value(host)) = 'VARCHAR')::BIGINT,
		count(DISTINCT time), count(*), epoch_ns(min(time)), count(host)
		FROM read_parquet('%s')`, path)
	var res duck.Result
	if duck.Query(conn, q, &res) != duck.StateSuccess {
		t.Fatal(duck.ResultError(&res))
	}
	defer duck.DestroyResult(&res)
	hosts := 0
	for _, r := range rows {
		if r.Host != nil {
			hosts++
		}
	}
	want := []int64{1, 1, 1000, 1000, rows[0].Time, int64(hosts)}
	for i, w := range want {
		if got := duck.ValueInt64(&res, duck.IdxT(i), 0); got != w {
			t.Errorf("column %d: %d, want %d", i, got, w)
		}
	}
}
