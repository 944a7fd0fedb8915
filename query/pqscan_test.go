//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
)

// threeWays runs each query while the rows are buffered (before, from
// the caller), then over the persisted files natively and through
// pqarrow, and wants the same rows each time.
func threeWays(t *testing.T, s *storeEnv, queries []string, before [][]string) {
	t.Helper()
	nativeBefore, fallbackBefore := pqNative.Load(), pqFallback.Load()
	for i, q := range queries {
		compareRows(t, "native: "+q, s.query(q, ""), before[i])
	}
	if pqNative.Load() == nativeBefore || pqFallback.Load() != fallbackBefore {
		t.Errorf("native reads %d, pqarrow reads %d", pqNative.Load()-nativeBefore, pqFallback.Load()-fallbackBefore)
	}
	pqDisabled.Store(true)
	defer pqDisabled.Store(false)
	for i, q := range queries {
		compareRows(t, "pqarrow: "+q, s.query(q, ""), before[i])
	}
}

func queryAll(s *storeEnv, queries []string) [][]string {
	out := make([][]string, len(queries))
	for i, q := range queries {
		out[i] = s.query(q, "")
	}
	return out
}

// TestPQEngineTypes writes rows of every type through the buffer, in
// segments that add columns as they go, and queries them buffered, then
// persisted (natively and through pqarrow): the same answers.
func TestPQEngineTypes(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	rng := rand.New(rand.NewPCG(11, 12))
	all := pqAllTypes(0.15)
	const segs = 4
	var names []string
	for i, c := range all {
		if i > 0 {
			names = append(names, c.name)
		}
	}
	for seg := range segs {
		// Segment 0 has half the columns, 1 three quarters: schema growth.
		cols := all[:len(all)*(seg+2)/(segs+1)+1]
		if seg >= 2 {
			cols = all
		}
		rec := pqRecord(s.mem, cols, 3000+rng.IntN(5000), base+int64(seg)*int64(time.Minute), rng)
		s.write("db", "t", rec)
		s.roll()
	}
	queries := []string{
		"SELECT * FROM db.t ORDER BY time",
		"SELECT count(*) FROM db.t",
		"SELECT count(*), " + strings.Join(names, ", ") + " FROM db.t GROUP BY ALL ORDER BY ALL LIMIT 50",
		"SELECT host, count(*), sum(i64::HUGEINT), min(ts_s), max(tz_ns), count(msg) FROM db.t GROUP BY host ORDER BY host",
		"SELECT time, msg, raw, ok FROM db.t WHERE msg LIKE 'v1%' ORDER BY time",
		"SELECT tz_ms, u64, d64 FROM db.t WHERE host IS NULL ORDER BY time",
		"SELECT count(*), count(d32), count(tz_us) FROM db.t WHERE time >= " + tsLiteral(base+2*int64(time.Minute)),
	}
	// Taken as the segments roll over, while they are still in memory.
	buffered := queryAll(s, queries)
	s.write("db", "other", batch(s.mem, col{"time", tsNs, []any{base}}))
	s.waitReleased(t, segs)
	st := s.e.Stats()
	threeWays(t, s, queries, buffered)
	if st2 := s.e.Stats(); st2.FilesPruned == st.FilesPruned {
		t.Error("no file pruned by time")
	}
}

func tsLiteral(ns int64) string {
	return "TIMESTAMP_NS '" + time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") + "'"
}

// TestPQEngineStrings persists strings whose dictionary the writer drops
// mid-chunk (many distinct long values: PLAIN pages follow dictionary
// pages) next to a sorted series key, with part of the rows still
// buffered.
func TestPQEngineStrings(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	rng := rand.New(rand.NewPCG(13, 14))
	n := 60000
	times, host, note, v := make([]any, n), make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = base + int64(i)*1e6
		host[i] = fmt.Sprintf("host-%03d", rng.IntN(30))
		if rng.IntN(50) > 0 {
			note[i] = fmt.Sprintf("%08x-%s", rng.Uint32(), strings.Repeat("n", 30+rng.IntN(20)))
		}
		if rng.IntN(10) > 0 {
			v[i] = rng.Float64()
		}
	}
	s.write("db", "logs", batch(s.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host},
		col{"note", arrow.BinaryTypes.String, note}, col{"v", arrow.PrimitiveTypes.Float64, v}))
	queries := []string{
		"SELECT time, host, note, v FROM db.logs ORDER BY time",
		"SELECT host, count(*), count(note), min(note), max(note), sum(v) FROM db.logs GROUP BY host ORDER BY host",
		"SELECT count(DISTINCT note), count(DISTINCT host) FROM db.logs",
		"SELECT note FROM db.logs WHERE host = 'host-007' ORDER BY time",
	}
	buffered := queryAll(s, queries)
	if got, want := s.query("SELECT count(*), count(note) FROM db.logs", ""), fmt.Sprintf("%d|%d", n, countNonNil(note)); got[0] != want {
		t.Fatalf("counts %v, want %s", got, want)
	}
	s.roll()
	s.write("db", "other", batch(s.mem, col{"time", tsNs, []any{base}}))
	s.waitReleased(t, 1)
	// The writer gave up the dictionary of note mid-chunk.
	encs := map[string]bool{}
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			for _, e := range columnEncodings(t, s, f, "note") {
				encs[e] = true
			}
		}
	}
	if !encs["DATA_PAGE RLE_DICTIONARY"] || !encs["DATA_PAGE PLAIN"] {
		t.Errorf("note's pages: %v, want dictionary and PLAIN data pages", encs)
	}
	threeWays(t, s, queries, buffered)
}

// columnEncodings lists the page types and encodings of a column's chunks
// in a persisted file.
func columnEncodings(t *testing.T, s *storeEnv, f persist.File, name string) []string {
	t.Helper()
	path, unpin, err := s.e.cache.acquire(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	col := md.Schema.ColumnIndexByName(name)
	var out []string
	for rg := range md.NumRowGroups() {
		cc, err := md.RowGroup(rg).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range cc.EncodingStats() {
			out = append(out, fmt.Sprintf("%s %s", st.PageType, st.Encoding))
		}
	}
	return out
}

func countNonNil(vals []any) int {
	n := 0
	for _, v := range vals {
		if v != nil {
			n++
		}
	}
	return n
}

// TestPQRowGroups persists a file of two row groups (the writer's limit is
// 2^20 rows), sorted by time: both threads read them, a query within the
// second's time range prunes the first, count(*) reads every row.
func TestPQRowGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.1M rows")
	}
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	const n = 1<<20 + 50000
	tb := array.NewTimestampBuilder(s.mem, tsNs)
	vb := array.NewInt64Builder(s.mem)
	fb := array.NewFloat64Builder(s.mem)
	var sum int64
	for i := range n {
		tb.Append(arrow.Timestamp(base + int64(i)*1000))
		vb.Append(int64(i % 1000))
		sum += int64(i % 1000)
		if i%7 == 0 {
			fb.AppendNull()
		} else {
			fb.Append(float64(i % 100))
		}
	}
	cols := []arrow.Array{tb.NewArray(), vb.NewArray(), fb.NewArray()}
	tb.Release()
	vb.Release()
	fb.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	s.write("db", "big", rec)
	queries := []string{
		"SELECT count(*), sum(v), count(f), sum(f), min(time), max(time) FROM db.big",
		"SELECT v, count(*), sum(f) FROM db.big GROUP BY v ORDER BY v",
		"SELECT count(*), sum(v) FROM db.big WHERE time >= " + tsLiteral(base+int64(1<<20+10)*1000),
	}
	buffered := queryAll(s, queries)
	if got, want := buffered[0][0], fmt.Sprintf("%d|%d|%d|", n, sum, n-(n+6)/7); !strings.HasPrefix(got, want) {
		t.Fatalf("buffered: %s, want %s…", got, want)
	}
	s.roll()
	s.write("db", "other", batch(s.mem, col{"time", tsNs, []any{base}}))
	s.waitReleased(t, 1)

	st := s.e.Stats()
	compareRows(t, "all", s.query(queries[0], ""), buffered[0])
	st2 := s.e.Stats()
	// Row groups of a segment's file: the last one holds 50000 rows from
	// row 1<<20 on (a multiple of their size).
	groups := int64((n + persist.SegmentRowGroupRows - 1) / persist.SegmentRowGroupRows)
	if got := st2.RowGroupsScanned - st.RowGroupsScanned; got != groups {
		t.Errorf("%d row groups read, want %d", got, groups)
	}
	compareRows(t, "bounded", s.query(queries[2], ""), buffered[2])
	st3 := s.e.Stats()
	if got := st3.RowGroupsPruned - st2.RowGroupsPruned; got != groups-1 {
		t.Errorf("%d row groups pruned, want %d", got, groups-1)
	}
	threeWays(t, s, queries, buffered)
}

// raceOpening sets the hooks of the next scan: the thread that opens a
// file waits until another has found nothing left to open (or fails the
// test after 10 s); group is told of every row group a thread opens.
func raceOpening(t *testing.T, group func(*scanLocal)) {
	idle := make(chan struct{})
	var once sync.Once
	pqTestHooks.Store(&pqHooks{
		opening: func() {
			select {
			case <-idle:
			case <-time.After(10 * time.Second):
				t.Error("no second thread found the scan out of files in 10 s")
			}
		},
		idle:  func() { once.Do(func() { close(idle) }) },
		group: group,
	})
}

// TestPQFileSharedByThreads reads one persisted file of four row groups
// on two threads, the second finding no file left to open while the first
// is still opening it: the second must wait for the first's row groups
// rather than end its part of the scan. (It used to end it, and a table
// of one file, the usual one after a persist, was read on one core.)
func TestPQFileSharedByThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400k rows")
	}
	s := newStoreEnv(t, objstore.NewMemory(), Config{Threads: 2})
	const n = 3*persist.SegmentRowGroupRows + 1000
	tb := array.NewTimestampBuilder(s.mem, tsNs)
	fb := array.NewFloat64Builder(s.mem)
	for i := range n {
		tb.Append(arrow.Timestamp(base + int64(i)*1000))
		fb.Append(float64(i % 100))
	}
	cols := []arrow.Array{tb.NewArray(), fb.NewArray()}
	tb.Release()
	fb.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "time", Type: tsNs}, {Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	s.write("db", "t", rec)
	const q = "SELECT count(*), sum(f), min(time), max(time) FROM db.t"
	buffered := s.query(q, "")
	s.roll()
	s.write("db", "other", batch(s.mem, col{"time", tsNs, []any{base}}))
	s.waitReleased(t, 1)

	// Every thread that reads a row group is noted.
	var mu sync.Mutex
	readers := map[*scanLocal]int{}
	defer pqTestHooks.Store(nil)
	raceOpening(t, func(l *scanLocal) {
		mu.Lock()
		readers[l]++
		mu.Unlock()
	})
	compareRows(t, "persisted", s.query(q, ""), buffered)
	pqTestHooks.Store(nil)
	mu.Lock()
	defer mu.Unlock()
	groups := 0
	for _, k := range readers {
		groups += k
	}
	if len(readers) < 2 || groups != 4 {
		t.Errorf("4 row groups read by %d threads (%v), want both threads reading", len(readers), readers)
	}

	// A query DuckDB stops early (a LIMIT), with the same race each time:
	// the waiting thread is let go, and the query ends with its rows.
	for _, c := range []struct {
		q    string
		rows int
	}{{"SELECT * FROM db.t LIMIT 3", 3}, {"SELECT f FROM db.t WHERE f > 98 LIMIT 1", 1}, {"SELECT max(f) FROM db.t", 1}} {
		raceOpening(t, func(*scanLocal) {})
		rows := s.query(c.q, "")
		pqTestHooks.Store(nil)
		if len(rows) != c.rows {
			t.Errorf("%s: %d rows, want %d", c.q, len(rows), c.rows)
		}
	}
}
