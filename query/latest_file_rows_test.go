//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
)

// TestReadFileRows: a persisted file's latest row of each key value (NULL
// included), read a few rows at a time across row groups, is the row
// DuckDB ranks first by time among the value's rows, for two key
// columns; the kept batch's key is dictionary-encoded, for pickLatest.
func TestReadFileRows(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 5)
	host := func(int) any {
		if rng.IntN(40) == 0 {
			return nil
		}
		return fmt.Sprintf("h%d", rng.IntN(30))
	}
	usage := func(int, any) any {
		if rng.IntN(9) == 0 {
			return nil
		}
		return float64(rng.IntN(1000)) / 10
	}
	// Batches without region: the file's rows of them are NULL there.
	for j := range 4 {
		write(base+int64(j)*int64(5*time.Minute), int64(20*time.Minute), 3000, host, usage, j%2 == 0)
	}
	s.roll()
	s.waitReleased(t, 1)
	v := s.wb.View()
	defer v.Release()
	tbl, ok := v.Catalog().Table("db", "cpu")
	if !ok {
		t.Fatal("no table db.cpu")
	}
	files := s.e.persistedFiles(v, lowerKey("db", "cpu"), allTime)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1", len(files))
	}
	f := files[0]
	path, unpin, err := s.e.cache.acquire(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	for _, col := range []string{"host", "region"} {
		for _, batch := range []int64{97, 1 << 16} {
			pf, err := s.e.openFooter(path, f)
			if err != nil {
				t.Fatal(err)
			}
			fr, err := readFileRows(context.Background(), pf, []string{col}, tbl, batch, batch > 100)
			pf.Close()
			if err != nil {
				t.Fatalf("%s, batches of %d: %v", col, batch, err)
			}
			rec := fr.chunk.Rec
			names := make([]string, rec.NumCols())
			for i, fl := range rec.Schema().Fields() {
				names[i] = fl.Name
			}
			if _, ok := latestKeyOf(rec, col); !ok || rec.Column(rec.Schema().FieldIndices(col)[0]).DataType().ID() != arrow.DICTIONARY {
				t.Errorf("%s: the kept key column is %s, want dictionary<int32, utf8>", col, rec.Column(rec.Schema().FieldIndices(col)[0]).DataType())
			}
			var got []string
			for i := range int(rec.NumRows()) {
				got = append(got, rowString(rec, i))
			}
			want := ref.query(fmt.Sprintf("SELECT %s FROM db.cpu QUALIFY row_number() OVER (PARTITION BY %s ORDER BY time DESC) = 1", strings.Join(names, ", "), col))
			equalRows(t, fmt.Sprintf("%s, batches of %d", col, batch), sorted(got), sorted(want))
			if ts, ok := timeColumn(rec); ok {
				lo, hi := ts.Value(0), ts.Value(0)
				for _, x := range ts.TimestampValues() {
					lo, hi = min(lo, x), max(hi, x)
				}
				if int64(lo) != fr.chunk.MinTime || int64(hi) != fr.chunk.MaxTime {
					t.Errorf("%s: the batch's time range [%d, %d], its rows' [%d, %d]", col, fr.chunk.MinTime, fr.chunk.MaxTime, lo, hi)
				}
			} else {
				t.Errorf("%s: the kept batch has no time column of timestamps", col)
			}
		}
	}
}

// TestFileRowsReadOnce: queries that need a file's latest rows at the
// same time read the file once, and later ones not at all.
func TestFileRowsReadOnce(t *testing.T) {
	s, _, _, write := cpuStore(t, Config{}, 7)
	write(base, int64(time.Hour), 20000, func(i int) any { return fmt.Sprintf("h%d", i%50) }, func(int, any) any { return 1.5 }, true)
	s.roll()
	s.waitReleased(t, 1)
	v := s.wb.View()
	defer v.Release()
	tbl, _ := v.Catalog().Table("db", "cpu")
	files := s.e.persistedFiles(v, lowerKey("db", "cpu"), allTime)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1", len(files))
	}
	const n = 8
	got := make([]*fileRows, n)
	errs := make([]error, n)
	read := make([]bool, n)
	start := make(chan struct{})
	done := make(chan int)
	for i := range n {
		go func() {
			<-start
			got[i], read[i], errs[i] = s.e.fileRowsOf(context.Background(), files[0], []string{"host"}, tbl, true)
			done <- i
		}()
	}
	close(start)
	for range n {
		<-done
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] || got[i].chunk.Rec.NumRows() != 50 {
			t.Fatalf("query %d: %d rows, shared %v; want 50 rows of one read", i, got[i].chunk.Rec.NumRows(), got[i] == got[0])
		}
	}
	if readers := len(slices.DeleteFunc(read, func(r bool) bool { return !r })); readers != 1 {
		t.Errorf("%d calls say they read the file, want 1", readers)
	}
	if _, read, err := s.e.fileRowsOf(context.Background(), files[0], []string{"host"}, tbl, true); err != nil || read {
		t.Fatalf("a later call: read %v, err %v; want the kept rows", read, err)
	}
	if r := s.e.Stats().LatestFileReads; r != 1 {
		t.Errorf("the file was read %d times, want once", r)
	}
}

// TestLatestReadAhead: once a latest-row query of a table needed its
// files, a file persisted later is read ahead for its latest rows, and
// the next query reads no file; nothing is read ahead for tables whose
// queries needed none, and a want is forgotten after latestWantFor.
func TestLatestReadAhead(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 9)
	host := func(i int) any { return fmt.Sprintf("h%d", i%10) }
	usage := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	const q = "SELECT host, max(time), arg_max(usage, time), arg_max_null(region, time) FROM db.cpu GROUP BY host"
	ctx := context.Background()
	stats := func() (reads, aheads int64) {
		st := s.e.Stats()
		return st.LatestFileReads, st.LatestFileReadAheads
	}

	write(base, int64(time.Hour), 5000, host, usage, true)
	equalRows(t, "buffered", sorted(s.query(q, "")), sorted(ref.query(q)))
	s.roll()
	s.waitReleased(t, 1)
	s.e.warmLatest(ctx)
	if r, a := stats(); r != 0 || a != 0 {
		t.Fatalf("before a query needed files: %d files read, %d ahead; want none", r, a)
	}
	equalRows(t, "persisted", sorted(s.query(q, "")), sorted(ref.query(q)))
	if r, _ := stats(); r != 1 {
		t.Fatalf("the first query over the file: %d files read, want 1", r)
	}

	write(base+int64(2*time.Hour), int64(time.Hour), 5000, host, usage, true)
	s.roll()
	s.waitReleased(t, 2)
	s.e.warmLatest(ctx)
	s.e.warmLatest(ctx)
	if r, a := stats(); r != 2 || a != 1 {
		t.Fatalf("after a second persist: %d files read, %d ahead; want 2, 1", r, a)
	}
	equalRows(t, "two files", sorted(s.query(q, "")), sorted(ref.query(q)))
	if r, _ := stats(); r != 2 {
		t.Errorf("the query after the read-ahead read %d more files, want none", r-2)
	}
	if w := s.e.latestWarm.current(time.Now().Add(latestWantFor + time.Minute)); len(w) != 0 {
		t.Errorf("wants after %v: %v, want none", latestWantFor, w)
	}
}

// TestFileRowsUnusable: a file whose columns read back as types other
// than the table's (a timestamp[s] column is stored in milliseconds)
// cannot give its latest rows: DuckDB answers, and the file is not read
// again for them at the next query.
func TestFileRowsUnusable(t *testing.T) {
	s := newStoreEnv(t, objstore.NewMemory(), Config{})
	ref := newRefDB(t)
	ref.exec(`CREATE SCHEMA db; CREATE TABLE db.ev (time TIMESTAMP_NS, host VARCHAR, seen TIMESTAMP_S)`)
	tsS := &arrow.TimestampType{Unit: arrow.Second}
	n := 300
	ts, hosts, seen := make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		ts[i] = base + int64(i)*int64(time.Second)
		hosts[i] = fmt.Sprintf("h%d", i%7)
		seen[i] = base/1e9 + int64(i)
	}
	rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, hosts}, col{"seen", tsS, seen})
	ref.append("db", "ev", rec)
	s.write("db", "ev", rec)
	s.roll()
	s.waitReleased(t, 1)
	const q = "SELECT host, max(time), arg_max(seen, time) FROM db.ev GROUP BY host"
	for i := range 2 {
		direct := s.e.Stats().DirectScans
		equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
		if s.e.Stats().DirectScans != direct {
			t.Errorf("query %d: answered from the file's latest rows, want DuckDB", i+1)
		}
	}
	if r := s.e.Stats().LatestFileReads; r != 1 {
		t.Errorf("the file was read %d times for its latest rows, want once", r)
	}
}

// TestLatestOlderFilesUnread: with nothing buffered, the latest row per
// key reads the newest file first and leaves out, unread, the older
// files whose every key value it has a later row of; a file holding a
// value found nowhere newer is read. The read-ahead reads none of the
// older files.
func TestLatestOlderFilesUnread(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 11)
	usage := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	for seg := range 4 {
		host := func(i int) any { return fmt.Sprintf("h%d", i%10) }
		if seg == 1 {
			host = func(i int) any {
				if i == 7 {
					return "gone"
				}
				return fmt.Sprintf("h%d", i%10)
			}
		}
		write(base+int64(seg)*int64(time.Hour), int64(time.Hour), 2000, host, usage, true)
		s.roll()
		s.waitReleased(t, seg+1)
	}
	const q = "SELECT host, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host"
	before := s.e.Stats()
	equalRows(t, q, sorted(s.query(q, "")), sorted(ref.query(q)))
	after := s.e.Stats()
	if after.DirectScans == before.DirectScans {
		t.Fatal("DuckDB answered")
	}
	if r := after.LatestFileReads - before.LatestFileReads; r != 2 {
		t.Errorf("%d files read, want 2 (the newest, and the one with a host found nowhere newer)", r)
	}
	if n := after.LatestFiles - before.LatestFiles; n != 2 {
		t.Errorf("%d files left out, want 2", n)
	}
	s.e.warmLatest(context.Background())
	if r := s.e.Stats().LatestFileReads - after.LatestFileReads; r != 0 {
		t.Errorf("the read-ahead read %d older files, want none", r)
	}
}

// TestLatestHintAfterRestart: the files whose latest rows an engine kept
// are read ahead by the next engine over the same data, before any query
// (and the first query then reads none); a hint that does not parse, or
// names files no longer persisted, reads nothing and fails nothing.
func TestLatestHintAfterRestart(t *testing.T) {
	s, ref, rng, write := cpuStore(t, Config{}, 11)
	host := func(i int) any { return fmt.Sprintf("h%d", i%10) }
	usage := func(int, any) any { return float64(rng.IntN(1000)) / 10 }
	const q = "SELECT host, max(time), arg_max(usage, time) FROM db.cpu GROUP BY host"
	reads := func() (reads, aheads int64) {
		st := s.e.Stats()
		return st.LatestFileReads, st.LatestFileReadAheads
	}
	write(base, int64(time.Hour), 5000, host, usage, true)
	s.roll()
	s.waitReleased(t, 1)
	equalRows(t, "persisted", sorted(s.query(q, "")), sorted(ref.query(q)))
	if r, _ := reads(); r != 1 {
		t.Fatalf("the first query over the file: %d files read, want 1", r)
	}

	restart := func() {
		t.Helper()
		s.env.close()
		s.open(t)
		<-s.e.latestWarm.hintDone // the read-ahead's goroutine reads the hint first
	}
	restart()
	if r, a := reads(); r != 1 || a != 1 {
		t.Fatalf("after a restart: %d files read, %d ahead; want the hinted file read ahead", r, a)
	}
	equalRows(t, "after a restart", sorted(s.query(q, "")), sorted(ref.query(q)))
	if r, _ := reads(); r != 1 {
		t.Errorf("the first query after the restart read %d files, want none", r-1)
	}
	if w := s.e.latestWarm.current(time.Now()); len(w) != 1 {
		t.Errorf("wants after the restart: %v, want the table's", w)
	}

	hint := filepath.Join(s.dataDir, "query", latestHintName)
	// A write cut short by a crash leaves its temporary file: the next
	// engine removes it.
	s.env.close()
	stale := hint + ".123.tmp"
	if err := os.WriteFile(stale, []byte(`{"version":1,"fi`), 0o644); err != nil {
		t.Fatal(err)
	}
	s.open(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a cut-short hint's temporary file is still there: %v", err)
	}
	good, err := os.ReadFile(hint)
	if err != nil || !strings.Contains(string(good), `"col":"host"`) {
		t.Fatalf("the hint written at Close: %q, %v", good, err)
	}
	for name, content := range map[string]string{
		"torn":        `{"version":1,"files":[{"path":`,
		"new version": `{"version":2,"files":[]}`,
		"gone files":  `{"version":1,"files":[{"path":"db/cpu/x.parquet","size":10,"crc32c":1,"col":"host"}]}`,
		// The engine's own list, which it would read ahead, padded past
		// the bound.
		"too large": strings.TrimSuffix(string(good), "}") + strings.Repeat(" ", latestHintMaxBytes) + "}",
	} {
		s.env.close()
		if err := os.WriteFile(hint, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		s.open(t)
		<-s.e.latestWarm.hintDone // the hint was dealt with
		if r, a := reads(); r != 0 || a != 0 {
			t.Fatalf("%s hint: %d files read, %d ahead; want none", name, r, a)
		}
		equalRows(t, name+" hint", sorted(s.query(q, "")), sorted(ref.query(q)))
	}
}
