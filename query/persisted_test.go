//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
)

// clock is a settable time for the buffer: advancing it past the segment
// duration makes the next write roll the open segment over.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// storeEnv is an env whose buffer persists to store and releases
// persisted segments.
type storeEnv struct {
	*env
	store   objstore.Store
	clock   *clock
	dataDir string
	qcfg    Config
	walFS   wal.FS // the next open's, then nil
}

func newStoreEnv(t testing.TB, store objstore.Store, qcfg Config) *storeEnv {
	t.Helper()
	return newStoreEnvFS(t, store, qcfg, nil)
}

// newStoreEnvFS is newStoreEnv with the buffer's files on walFS (nil: the
// OS's) until the next open.
func newStoreEnvFS(t testing.TB, store objstore.Store, qcfg Config, walFS wal.FS) *storeEnv {
	t.Helper()
	s := &storeEnv{store: store, clock: &clock{}, dataDir: t.TempDir(), qcfg: qcfg, walFS: walFS}
	s.clock.ns.Store(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	if s.qcfg.CacheDir == "" {
		s.qcfg.CacheDir = filepath.Join(s.dataDir, "cache")
	}
	if s.qcfg.StateDir == "" {
		s.qcfg.StateDir = filepath.Join(s.dataDir, "query")
	}
	s.open(t)
	return s
}

// open (re)opens the buffer and the engine on the env's data dir and store.
func (s *storeEnv) open(t testing.TB) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	bcfg := buffer.DefaultConfig()
	bcfg.DataDir = s.dataDir
	bcfg.Allocator = mem
	bcfg.ChunkAllocator = chunkAllocator(t)
	bcfg.MemLimit = 1 << 30
	bcfg.WALSync = wal.SyncNone
	bcfg.Store = s.store
	bcfg.WALFS, s.walFS = s.walFS, nil
	bcfg.ReleasePersisted = true
	bcfg.SegmentDuration = time.Hour
	bcfg.PersistRetryMin = time.Millisecond
	bcfg.PersistRetryMax = 20 * time.Millisecond
	bcfg.StartupStoreTimeout = 5 * time.Second
	bcfg.Now = s.clock.now
	bcfg.CompactionInterval = 0 // by hand (BenchmarkCompactedQuery)
	wb, err := buffer.Open(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(wb, s.qcfg)
	if err != nil {
		wb.Close()
		t.Fatal(err)
	}
	s.env = &env{t: t, mem: mem, wb: wb, e: e}
	t.Cleanup(s.env.close)
}

// roll makes the next write start a new segment.
func (s *storeEnv) roll() { s.clock.advance(time.Hour + time.Second) }

// persistedPaths is the local paths of every persisted file, quoted as
// SQL literals and sorted, for read_parquet in a reference DuckDB.
func (s *storeEnv) persistedPaths(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			u, err := url.Parse(f.URI)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, quoteLiteral(u.Path))
		}
	}
	sort.Strings(out)
	return out
}

// waitReleased waits until n segments are persisted and out of memory.
func (s *storeEnv) waitReleased(t testing.TB, n int) {
	t.Helper()
	// Persisting is slow under -race on a loaded machine (CI): 30 s was
	// too little for 360k rows there.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v := s.wb.View()
		got := len(v.Persisted)
		v.Release()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			err, _ := s.wb.PersistError()
			t.Fatalf("timed out waiting for %d persisted segments (have %d; last error %v)", n, got, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitClosedPersisted waits until no closed segment waits to persist.
func (s *storeEnv) waitClosedPersisted(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v := s.wb.View()
		closed := 0
		for _, seg := range v.Buffered {
			if seg.Info().State == buffer.SegmentClosed {
				closed++
			}
		}
		v.Release()
		if closed == 0 {
			return
		}
		if time.Now().After(deadline) {
			err, _ := s.wb.PersistError()
			t.Fatalf("timed out waiting for %d closed segments to persist (last error %v)", closed, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rows is what the tests write, to compare against.
type written struct {
	n    int
	sum  float64
	rows []string // time|host|usage, in time order
}

// writeRows writes n rows of db.cpu from time start, 1 ms apart.
func (s *storeEnv) writeRows(w *written, start int64, n int) {
	times, host, usage := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		times[i] = start + int64(i)*1e6
		host[i] = fmt.Sprintf("h%d", (w.n+i)%5)
		usage[i] = float64(w.n + i)
		w.rows = append(w.rows, fmt.Sprintf("%d|%s|%s", times[i], host[i], floatString(usage[i].(float64))))
		w.sum += usage[i].(float64)
	}
	w.n += n
	s.write("db", "cpu", batch(s.mem, col{"time", tsNs, times}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage}))
}

var storeKinds = []struct {
	name string
	new  func(t testing.TB) objstore.Store
}{
	{"memory", func(t testing.TB) objstore.Store { return objstore.NewMemory() }},
	{"local", func(t testing.TB) objstore.Store {
		s, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// TestPersistedUnion reads a table whose rows are in persisted files and in
// the buffer: each row once.
func TestPersistedUnion(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			s := newStoreEnv(t, sk.new(t), Config{})
			var w written
			const segs, per = 5, 3000
			for i := range segs {
				s.writeRows(&w, base+int64(i)*int64(time.Minute), per)
				if i < segs-2 {
					s.roll()
				}
			}
			// Segments 1..3 persisted; the last two writes share the open one.
			s.waitReleased(t, segs-2)

			equalRows(t, "count", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""),
				[]string{fmt.Sprintf("%d|%s", w.n, floatString(w.sum))})
			equalRows(t, "rows", s.query("SELECT time, host, usage FROM db.cpu ORDER BY time", ""), w.rows)
			equalRows(t, "distinct", s.query("SELECT count(DISTINCT time) FROM db.cpu", ""), []string{fmt.Sprint(w.n)})
			equalRows(t, "self_join", s.query("SELECT count(*) FROM db.cpu a JOIN db.cpu b ON a.time = b.time AND a.host = b.host", ""),
				[]string{fmt.Sprint(w.n)})
			equalRows(t, "group", s.query("SELECT host, count(*) FROM db.cpu GROUP BY host ORDER BY host", ""),
				[]string{"h0|3000", "h1|3000", "h2|3000", "h3|3000", "h4|3000"})
			st := s.e.Stats()
			if st.FilesScanned == 0 {
				t.Errorf("no persisted file read: %+v", st)
			}
			equalRows(t, "parquet_files", s.query("SELECT count(*), sum(rows), min(segment_id) > 0, bool_and(uri <> '') FROM system.parquet_files WHERE table_name = 'cpu'", ""),
				[]string{fmt.Sprintf("3|%d|true|true", 3*per)})
			equalRows(t, "segments", s.query("SELECT state, count(*), sum(rows), bool_and(bytes > 0), count(wal_file) FROM system.segments GROUP BY state ORDER BY state", ""),
				[]string{fmt.Sprintf("open|1|%d|true|1", 2*per), fmt.Sprintf("persisted|3|%d|true|0", 3*per)})
			if st.Active != 0 {
				t.Errorf("%d connections active", st.Active)
			}
		})
	}
}

// TestPersistWhileQuerying queries while segments are persisted and
// dropped: never a row twice, never a row missing.
func TestPersistWhileQuerying(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	var w written
	const segs, per = 16, 2000
	for i := range segs {
		s.writeRows(&w, base+int64(i)*int64(time.Minute), per)
		s.roll()
	}
	want := []string{fmt.Sprintf("%d|%s|%d", w.n, floatString(w.sum), w.n)}
	var wg sync.WaitGroup
	var queries, directs, filteredRuns atomic.Int64
	done := make(chan struct{})
	stop := sync.OnceFunc(func() { close(done) })
	defer stop() // a failed wait below does not leave the queries running
	// keepQuerying runs sql until stop, each answer (sorted) want.
	keepQuerying := func(what, sql string, want []string, runs *atomic.Int64) {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				rows, _, err := collect(s.e.Query(context.Background(), sql, ""))
				if err != nil {
					t.Error(err)
					return
				}
				runs.Add(1)
				equalRows(t, what, sorted(rows), want)
			}
		})
	}
	// A direct scan (streamed from the View, not by DuckDB) sees each row
	// once too.
	keepQuerying("direct scan while persisting", "SELECT time, host, usage FROM db.cpu", sorted(w.rows), &directs)
	// So does a filtered one (direct_where.go: streamed from the View while
	// its rows are buffered, from the files once they are persisted,
	// direct_files.go), and it keeps only its
	// rows.
	since := base + int64(segs/2)*int64(time.Minute)
	var filtered []string
	for _, r := range w.rows {
		f := strings.Split(r, "|") // time|host|usage
		if ts, _ := strconv.ParseInt(f[0], 10, 64); f[1] == "h2" && ts >= since {
			filtered = append(filtered, r)
		}
	}
	if len(filtered) == 0 {
		t.Fatal("no row for the filtered scan: it would show nothing")
	}
	keepQuerying("filtered scan while persisting", fmt.Sprintf("SELECT time, host, usage FROM db.cpu WHERE host = 'h2' AND time >= '%s'",
		time.Unix(0, since).UTC().Format("2006-01-02 15:04:05.999999999")), sorted(filtered), &filteredRuns)
	for range 2 {
		keepQuerying("while persisting", "SELECT count(*), sum(usage), count(DISTINCT time) FROM db.cpu", want, &queries)
	}
	// Both kinds run before the persists begin and go on until the
	// segments are released and a few more ran: the counts do not depend
	// on how fast the persists are.
	ran := func(q, d int64) func() bool {
		return func() bool { return queries.Load() >= q && directs.Load() >= d }
	}
	waitFor(t, "the first queries", ran(1, 1))
	s.clock.advance(time.Hour) // the last segment rolls over on the next tick
	s.waitReleased(t, segs)
	q, d := queries.Load(), directs.Load()
	waitFor(t, "queries after the release", ran(max(q+1, 5), max(d+1, 2)))
	stop()
	wg.Wait()
	if queries.Load() < 5 || directs.Load() < 2 || filteredRuns.Load() < 1 {
		t.Errorf("only %d queries, %d direct scans and %d filtered scans ran", queries.Load(), directs.Load(), filteredRuns.Load())
	}
	if st := s.e.Stats(); st.DirectScans < directs.Load() {
		t.Errorf("%d direct scans counted, %d run", st.DirectScans, directs.Load())
	}
	equalRows(t, "after", s.query("SELECT count(*), sum(usage), count(DISTINCT time) FROM db.cpu", ""), want)
	equalRows(t, "rows", s.query("SELECT time, host, usage FROM db.cpu ORDER BY time", ""), w.rows)
}

// TestPersistedSchemaGrowth reads files written before columns existed:
// the columns they lack read as NULL.
func TestPersistedSchemaGrowth(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base, base + 1}}, col{"a", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(2)}}))
	s.roll()
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base + 2}}, col{"b", arrow.BinaryTypes.String, []any{"x"}}))
	s.roll()
	s.write("db", "m", batch(s.mem, col{"time", tsNs, []any{base + 3}}, col{"c", arrow.FixedWidthTypes.Boolean, []any{true}},
		col{"a", arrow.PrimitiveTypes.Int64, []any{int64(4)}}))
	s.waitReleased(t, 2)
	equalRows(t, "star", s.query("SELECT * FROM db.m ORDER BY time", ""), []string{
		fmt.Sprintf("%d|1|NULL|NULL", base), fmt.Sprintf("%d|2|NULL|NULL", base+1),
		fmt.Sprintf("%d|NULL|x|NULL", base+2), fmt.Sprintf("%d|4|NULL|true", base+3)})
	equalRows(t, "b only", s.query("SELECT b FROM db.m ORDER BY time", ""), []string{"NULL", "NULL", "x", "NULL"})
	equalRows(t, "counts", s.query("SELECT count(a), count(b), count(c), count(*) FROM db.m", ""), []string{"3|1|1|4"})
	equalRows(t, "string filter", s.query("SELECT time FROM db.m WHERE b = 'x'", ""), []string{fmt.Sprint(base + 2)})
}

// TestPersistedPruning skips the files outside a query's time bounds.
func TestPersistedPruning(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	var w written
	const segs, per = 8, 1000
	for i := range segs {
		s.writeRows(&w, base+int64(i)*int64(time.Minute), per)
		s.roll()
	}
	s.clock.advance(time.Hour)
	s.waitReleased(t, segs)
	ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") }
	from := base + 6*int64(time.Minute) // the last two segments
	var n int
	var sum float64
	for i := range w.n {
		if t := base + int64(i/per)*int64(time.Minute) + int64(i%per)*1e6; t >= from {
			n++
			sum += float64(i)
		}
	}
	before := s.e.Stats()
	equalRows(t, "last two", s.query(fmt.Sprintf("SELECT count(*), sum(usage) FROM db.cpu WHERE time >= '%s'", ts(from)), ""),
		[]string{fmt.Sprintf("%d|%s", n, floatString(sum))})
	after := s.e.Stats()
	if got := after.FilesPruned - before.FilesPruned; got != segs-2 {
		t.Errorf("%d files pruned, want %d", got, segs-2)
	}
	if got := after.FilesScanned - before.FilesScanned; got != 2 {
		t.Errorf("%d files read, want 2", got)
	}
	if got := after.CacheFetches - before.CacheFetches; got != 2 {
		t.Errorf("%d files fetched, want 2", got)
	}
	// Nothing matches: no file read.
	equalRows(t, "none", s.query(fmt.Sprintf("SELECT count(*) FROM db.cpu WHERE time < '%s'", ts(base-1)), ""), []string{"0"})
	if got := s.e.Stats().FilesScanned - after.FilesScanned; got != 0 {
		t.Errorf("%d files read for an empty range", got)
	}
	// Row groups: each file holds one; a query within a file's range
	// reads it.
	if s.e.Stats().RowGroupsScanned == 0 {
		t.Error("no row group counted")
	}
}

// TestPersistedCache evicts the least recently used files past CacheSize
// and serves repeated reads from the cache.
func TestPersistedCache(t *testing.T) {
	store := objstore.NewMemory()
	s := newStoreEnv(t, store, Config{CacheSize: 1}) // set below
	var w written
	const segs, per = 6, 2000
	for i := range segs {
		s.writeRows(&w, base+int64(i)*int64(time.Minute), per)
		s.roll()
	}
	s.clock.advance(time.Hour)
	s.waitReleased(t, segs)
	var sizes []int64
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			sizes = append(sizes, f.Size)
		}
	}
	if len(sizes) != segs {
		t.Fatalf("%d files, want %d", len(sizes), segs)
	}
	// Room for the two largest files, not three.
	maxSize := int64(0)
	for _, sz := range sizes {
		maxSize = max(maxSize, sz)
	}
	s.e.cache.limit = 2*maxSize + maxSize/2
	ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.999999999") }
	want := []string{fmt.Sprintf("%d|%s", w.n, floatString(w.sum))}

	equalRows(t, "all", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
	st := s.e.Stats()
	if st.CacheFetches != segs || st.CacheEvictions < segs-2 || st.CacheBytes > s.e.cache.limit || st.CacheFiles > 2 {
		t.Errorf("after one full scan: %+v", st)
	}
	// Read the last two segments' files, one query each (the full scan
	// read its files on DuckDB's threads, in no set order): they are the
	// two cached now. (count(usage), not count(*): a count(*) is answered
	// from the files' metadata, without reading them.)
	last := base + int64(segs-1)*int64(time.Minute)
	before := base + int64(segs-2)*int64(time.Minute)
	equalRows(t, "before last", s.query(fmt.Sprintf("SELECT count(usage) FROM db.cpu WHERE time >= '%s' AND time < '%s'", ts(before), ts(last)), ""), []string{fmt.Sprint(per)})
	equalRows(t, "last", s.query(fmt.Sprintf("SELECT count(usage) FROM db.cpu WHERE time >= '%s'", ts(last)), ""), []string{fmt.Sprint(per)})
	st1 := s.e.Stats()
	// Read again: from the cache.
	equalRows(t, "last again", s.query(fmt.Sprintf("SELECT count(usage) FROM db.cpu WHERE time >= '%s'", ts(last)), ""), []string{fmt.Sprint(per)})
	st2 := s.e.Stats()
	if st2.CacheFetches != st1.CacheFetches || st2.CacheHits == st1.CacheHits {
		t.Errorf("second query of a cached file: fetches %d→%d, hits %d→%d", st1.CacheFetches, st2.CacheFetches, st1.CacheHits, st2.CacheHits)
	}
	// The first one was evicted: fetched again.
	equalRows(t, "first", s.query(fmt.Sprintf("SELECT count(usage) FROM db.cpu WHERE time <= '%s'", ts(base+int64(per-1)*1e6)), ""), []string{fmt.Sprint(per)})
	if got := s.e.Stats().CacheFetches - st2.CacheFetches; got != 1 {
		t.Errorf("evicted file: %d fetches, want 1", got)
	}
	// The directory holds what the cache counts.
	var onDisk int64
	filepath.WalkDir(s.qcfg.CacheDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			onDisk += fi.Size()
		}
		return nil
	})
	if b, _ := s.e.cache.usage(); onDisk != b {
		t.Errorf("%d bytes in the cache dir, the cache counts %d", onDisk, b)
	}

	// A large cache: the second full scan fetches nothing.
	s.e.cache.limit = 1 << 30
	equalRows(t, "fill", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
	st3 := s.e.Stats()
	equalRows(t, "hit", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
	st4 := s.e.Stats()
	if st4.CacheFetches != st3.CacheFetches || st4.CacheHits-st3.CacheHits != segs {
		t.Errorf("cached scan: fetches %d→%d, hits %d→%d", st3.CacheFetches, st4.CacheFetches, st3.CacheHits, st4.CacheHits)
	}
}

// TestPersistedRestart reopens buffer and engine on the same data dir and
// store, with the cache gone: the persisted rows are all there.
func TestPersistedRestart(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			s := newStoreEnv(t, sk.new(t), Config{})
			var w written
			const segs, per = 4, 1500
			for i := range segs {
				s.writeRows(&w, base+int64(i)*int64(time.Minute), per)
				s.roll()
			}
			s.clock.advance(time.Hour)
			s.waitReleased(t, segs)
			want := []string{fmt.Sprintf("%d|%s", w.n, floatString(w.sum))}
			equalRows(t, "before", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
			s.env.close()
			if err := os.RemoveAll(s.qcfg.CacheDir); err != nil {
				t.Fatal(err)
			}
			s.open(t)
			v := s.wb.View()
			buffered := 0
			for _, seg := range v.Buffered {
				for _, c := range seg.Snapshot("db", "cpu") {
					buffered++
					c.Rec.Release()
				}
			}
			persisted := len(v.Persisted)
			v.Release()
			if buffered != 0 || persisted != segs {
				t.Errorf("after restart: %d buffered chunks, %d persisted segments", buffered, persisted)
			}
			equalRows(t, "after", s.query("SELECT count(*), sum(usage) FROM db.cpu", ""), want)
			equalRows(t, "rows", s.query("SELECT time, host, usage FROM db.cpu ORDER BY time", ""), w.rows)
		})
	}
}

// TestPersistedCancel stops reading a query over persisted files early and
// cancels another: the View and the files are released (no leak at the
// end), and the connection goes back.
func TestPersistedCancel(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	var w written
	for i := range 4 {
		s.writeRows(&w, base+int64(i)*int64(time.Minute), 20000)
		s.roll()
	}
	s.clock.advance(time.Hour)
	s.waitReleased(t, 4)
	r, err := s.e.Query(context.Background(), "SELECT * FROM db.cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() {
		t.Fatal(r.Err())
	}
	r.Release()
	ctx, cancel := context.WithCancel(context.Background())
	r, err = s.e.Query(ctx, "SELECT * FROM db.cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	r.Next()
	cancel()
	for r.Next() {
	}
	r.Release()
	// A prepared statement holds no View.
	st, err := s.e.Prepare(context.Background(), "SELECT count(*) FROM db.cpu WHERE usage > $1", "")
	if err != nil {
		t.Fatal(err)
	}
	_ = st
	if n := countStates(s.e); n != 0 {
		t.Errorf("%d query states left", n)
	}
	if a := s.e.Stats().Active; a != 0 {
		t.Errorf("%d connections active", a)
	}
	equalRows(t, "still", s.query("SELECT count(*) FROM db.cpu", ""), []string{fmt.Sprint(w.n)})
}

func countStates(e *Engine) int {
	n := 0
	e.qstate.Range(func(_, _ any) bool { n++; return true })
	return n
}

// waitFor polls cond for up to 30 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
