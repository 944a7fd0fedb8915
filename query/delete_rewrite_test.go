//go:build duckdb_arrow

package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// update runs a DELETE (or any statement that answers a row count).
func (v *env) update(sql string) (int64, error) {
	v.t.Helper()
	st, err := v.e.Prepare(context.Background(), sql, "")
	if err != nil {
		return 0, err
	}
	return v.e.Exec(context.Background(), st, nil)
}

// rewrittenFiles counts the persisted files a rewrite made.
func rewrittenFiles(s *storeEnv) int {
	n := 0
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			if strings.Contains(f.Path, "/r") && strings.HasSuffix(f.Path, ".parquet") && strings.Contains(f.Path[strings.LastIndex(f.Path, "/"):], "-") {
				n++
			}
		}
	}
	return n
}

// TestDeleteRewrite: DELETEs of a table with persisted files (two days,
// several segments, some rows buffered) run as rewrites of its files
// (delete_rewrite.go), and give what DuckDB gives over the same rows: the
// count answered, the rows left, the last-value cache's answers, after
// a restart too; a condition with a subquery takes the replace instead and
// is as right; rows written after a delete are kept.
func TestDeleteRewrite(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			s := newStoreEnv(t, kind.new(t), Config{})
			ref := newRefDB(t)
			ref.exec(`CREATE SCHEMA db; CREATE TABLE db.cpu (time TIMESTAMP_NS, host VARCHAR, usage DOUBLE)`)
			rng := rand.New(rand.NewPCG(11, 12))
			next := int64(0)
			write := func(start int64, n int) {
				ts, host, usage := make([]any, n), make([]any, n), make([]any, n)
				for i := range n {
					ts[i] = start + next
					next++
					host[i] = fmt.Sprintf("h%d", rng.IntN(6))
					if rng.IntN(10) > 0 {
						usage[i] = float64(rng.IntN(1000)) / 10
					}
				}
				rec := batch(s.mem, col{"time", tsNs, ts}, col{"host", arrow.BinaryTypes.String, host}, col{"usage", arrow.PrimitiveTypes.Float64, usage})
				ref.append("db", "cpu", rec)
				s.write("db", "cpu", rec)
			}
			day := int64(24 * time.Hour)
			for seg := range 4 {
				write(base+int64(seg%2)*day+int64(seg)*int64(time.Hour), 3000)
				s.roll()
			}
			write(base+int64(5*time.Hour), 2000) // buffered
			s.waitReleased(t, 3)
			if err := s.exec("CREATE LAST VALUE CACHE ON db.cpu (host)"); err != nil {
				t.Fatal(err)
			}
			s.waitReady("db", "cpu")

			check := func(what string) {
				t.Helper()
				for _, q := range []string{
					"SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3",
					"SELECT count(*), min(time), max(time) FROM db.cpu",
				} {
					equalRows(t, what+": "+q, s.query(q, ""), ref.query(q))
				}
				// Answered by the last-value cache, once it is filled again.
				c, _ := s.wb.LastValueCache("db", "cpu")
				uses := c.Uses()
				q := "SELECT host, arg_max(usage, time), max(time) FROM db.cpu GROUP BY host"
				equalRows(t, what+": "+q, sorted(s.query(q, "")), sorted(ref.query(q)))
				if c.Uses() == uses {
					t.Fatalf("%s: the last-value cache answered no query", what)
				}
			}
			del := func(cond string) {
				t.Helper()
				want := ref.query("SELECT count(*) FROM db.cpu WHERE " + cond)
				got, err := s.update("DELETE FROM db.cpu WHERE " + cond)
				if err != nil {
					t.Fatalf("DELETE … WHERE %s: %v", cond, err)
				}
				if fmt.Sprint(got) != want[0] {
					t.Fatalf("DELETE … WHERE %s answered %d, DuckDB counts %s", cond, got, want[0])
				}
				ref.exec("DELETE FROM db.cpu WHERE " + cond)
				s.waitReady("db", "cpu")
				check("after DELETE … WHERE " + cond)
			}
			check("before")
			del("host = 'h1'")
			if rewrittenFiles(s) == 0 {
				t.Fatalf("no file was rewritten: the DELETE did not take the rewrite")
			}
			// Time bounds: only the first day's files are read.
			del(fmt.Sprintf("time < %s", nsLiteral(base+int64(90*time.Minute))))
			del("usage > 90 AND host = 'h2'")
			del("usage IS NULL")
			// A host no file holds: the probe finds no row, no file is
			// read whole.
			read, skipped := s.e.Stats().DeleteFilesRead, s.e.Stats().DeleteFilesSkipped
			del("host = 'nobody'")
			if st := s.e.Stats(); st.DeleteFilesRead != read || st.DeleteFilesSkipped == skipped {
				t.Fatalf("a DELETE of a host no file holds read %d files whole and skipped %d", st.DeleteFilesRead-read, st.DeleteFilesSkipped-skipped)
			}
			// A condition that ends in a line comment (the probe appends
			// its LIMIT on a line of its own); conditions that try to reach
			// past the WHERE are refused, with nothing changed.
			del("host = 'h3' -- a comment")
			unchanged := s.query("SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3", "")
			for _, cond := range []string{"true) OR (true", "host = 'h4' LIMIT 1", "host = 'h4' OFFSET 1", "host = 'h4'; SELECT 1", "host = 'h4' /*"} {
				if n, err := s.update("DELETE FROM db.cpu WHERE " + cond); !errors.Is(err, ErrSyntax) {
					t.Fatalf("DELETE … WHERE %s: %d, %v; want ErrSyntax", cond, n, err)
				}
			}
			equalRows(t, "after the refused DELETEs", s.query("SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3", ""), unchanged)
			before := rewrittenFiles(s)
			del("host IN (SELECT host FROM db.cpu WHERE usage > 99.5)") // the replace
			if rewrittenFiles(s) > before {
				t.Fatalf("a condition with a subquery took the rewrite")
			}
			write(base+int64(6*time.Hour), 500) // after the deletes
			del("host = 'h3' AND usage < 50")
			check("before the restart")

			s.env.close()
			s.open(t)
			s.waitReady("db", "cpu")
			check("after the restart")
			del("true")
			check("after deleting every row")
		})
	}
}

// TestDeleteRewriteFailsWhole: a rewrite that fails before its commit
// (a file upload refused) deletes nothing, leaves the table readable as
// it was, and a retry deletes.
func TestDeleteRewriteFailsWhole(t *testing.T) {
	store := &failingStore{Store: objstore.NewMemory(), left: -1}
	s, w := persistedCPU(t, store, 3)
	s.writeRows(w, base+int64(7*time.Hour), 10)
	all := s.query("SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3", "")
	// The second rewritten file's upload fails.
	store.failAfter(1, "/r")
	if _, err := s.update("DELETE FROM db.cpu WHERE host = 'h0'"); err == nil {
		t.Fatal("the DELETE succeeded with an upload failing")
	}
	equalRows(t, "after the failed DELETE", s.query("SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3", ""), all)
	if n := rewrittenFiles(s); n != 0 {
		t.Fatalf("%d rewritten files listed after the failed DELETE", n)
	}
	if left := store.objectsLike("/r"); len(left) != 0 {
		t.Fatalf("the failed DELETE left %v in the store", left)
	}
	store.failAfter(-1, "")
	n, err := s.update("DELETE FROM db.cpu WHERE host = 'h0'")
	if err != nil || n != int64(w.n/5) {
		t.Fatalf("the retry: %d, %v; want %d", n, err, w.n/5)
	}
	if got := s.query("SELECT count(*) FROM db.cpu WHERE host = 'h0'", ""); got[0] != "0" {
		t.Fatalf("%s rows of h0 left", got[0])
	}
}

// TestDeleteRewriteCancelled: a client that gives up on its DELETE once
// the first file's replacement is uploaded (while the next file is being
// read) gets an error, and nothing is deleted: the files replaced so far
// are not committed. Several times over, since where the reader of the
// next file stands when the cancellation comes varies.
func TestDeleteRewriteCancelled(t *testing.T) {
	for i := range 6 {
		store := &failingStore{Store: objstore.NewMemory(), left: -1}
		s, _ := persistedCPU(t, store, 4)
		const q = "SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1, 2, 3"
		all := s.query(q, "")
		ctx, cancel := context.WithCancel(context.Background())
		store.mu.Lock()
		store.onPut = func(name string) {
			if strings.Contains(name, "/r") {
				cancel()
			}
		}
		store.mu.Unlock()
		st, err := s.e.Prepare(ctx, "DELETE FROM db.cpu WHERE host = 'h0'", "")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.e.Exec(ctx, st, nil); err == nil {
			t.Fatalf("round %d: the DELETE answered %d rows after its client gave up", i, n)
		}
		cancel()
		equalRows(t, "after the cancelled DELETE", s.query(q, ""), all)
		if n := rewrittenFiles(s); n != 0 {
			t.Fatalf("round %d: %d rewritten files listed after the cancelled DELETE", i, n)
		}
		s.env.close()
	}
}

// persistedCPU writes segs segments of 1,000 rows of db.cpu, two hours
// apart, to store, each persisted and out of memory.
func persistedCPU(t *testing.T, store objstore.Store, segs int) (*storeEnv, *written) {
	t.Helper()
	s := newStoreEnv(t, store, Config{})
	w := &written{}
	for i := range segs {
		s.writeRows(w, base+int64(i)*int64(2*time.Hour), 1000)
		s.roll()
	}
	s.waitReleased(t, segs)
	return s, w
}

// failingStore fails the uploads of objects whose name holds a string,
// once it has let a number of them through.
type failingStore struct {
	objstore.Store
	mu    sync.Mutex
	left  int // uploads let through before failing; -1: never fail
	match string
	// onPut, if set, is called after each upload that succeeded.
	onPut func(name string)
}

func (f *failingStore) failAfter(n int, match string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left, f.match = n, match
}

func (f *failingStore) Put(ctx context.Context, name string, data io.Reader, size int64, opts objstore.PutOptions) error {
	f.mu.Lock()
	fail := false
	if f.match != "" && strings.Contains(name, f.match) && strings.HasPrefix(name, persist.DBsPrefix) {
		if f.left == 0 {
			fail = true
		} else if f.left > 0 {
			f.left--
		}
	}
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("test: upload of %s refused", name)
	}
	if err := f.Store.Put(ctx, name, data, size, opts); err != nil {
		return err
	}
	f.mu.Lock()
	onPut := f.onPut
	f.mu.Unlock()
	if onPut != nil {
		onPut(name)
	}
	return nil
}

// objectsLike lists the objects whose name holds match.
func (f *failingStore) objectsLike(match string) []string {
	infos, err := f.Store.List(context.Background(), "")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, o := range infos {
		if strings.Contains(o.Name, match) {
			out = append(out, o.Name)
		}
	}
	return out
}

// TestDeleteRewriteCrashAtEachStep crashes the store (and with it the
// process's writes) at each operation of a DELETE by rewrite, from its
// reads to its sweep: after a restart the table holds exactly the rows of
// before the DELETE or of after it (after, if it answered), twice over,
// and once swept the store holds exactly the files listed.
func TestDeleteRewriteCrashAtEachStep(t *testing.T) {
	deleteCrashEachStep(t, false)
}

// TestDeleteRewritePowerLoss cuts the power of the data dir at each of
// its file operations during a DELETE by rewrite and its sweep (the
// rollover of the table's buffered rows, their persist and WAL removal,
// the journal of the uploads not yet listed), leaves the files as a real
// power failure could (waltest.FS.PowerLoss), and restarts: the same
// checks as TestDeleteRewriteCrashAtEachStep. The store does not lose
// power (an object once written stays).
func TestDeleteRewritePowerLoss(t *testing.T) {
	deleteCrashEachStep(t, true)
}

func deleteCrashEachStep(t *testing.T, powerLoss bool) {
	outcomes := map[string]int{}
	for k := 0; ; k++ {
		if !deleteCrashAt(t, k, powerLoss, outcomes) {
			if k < 5 {
				t.Fatalf("no crash at k=%d: fewer steps than expected", k)
			}
			what := "store"
			if powerLoss {
				what = "data dir's file"
			}
			t.Logf("crashed at each of the %d %s operations of a DELETE by rewrite and its sweep; restarts that found the table %v", k, what, outcomes)
			if outcomes["before"] == 0 || outcomes["after"] < 3 {
				t.Fatalf("the crashes did not fall on both sides of the commit: %v", outcomes)
			}
			return
		}
	}
}

// deleteCrashAt runs a DELETE by rewrite and its sweep with a crash after
// k operations (of the store, or with powerLoss of the data dir's files),
// restarts twice and checks the table; it returns whether the crash came.
func deleteCrashAt(t *testing.T, k int, powerLoss bool, outcomes map[string]int) bool {
	const cond = "host = 'h0' OR usage < 300"
	inner := objstore.NewMemory()
	var (
		s       *storeEnv
		crashed func() bool
		faulty  *objstoretest.Faulty
		power   *waltest.FS
	)
	if powerLoss {
		s = newStoreEnv(t, inner, Config{})
	} else {
		faulty = objstoretest.NewFaulty(inner)
		s = newStoreEnvFS(t, faulty, Config{}, objstoretest.CrashFS{FS: wal.OSFS(), F: faulty})
		crashed = faulty.Crashed
	}
	w := &written{}
	for i := range 3 {
		s.writeRows(w, base+int64(i)*int64(13*time.Hour), 500) // two days
		s.roll()
	}
	s.writeRows(w, base+int64(30*time.Hour), 20) // buffered
	s.waitReleased(t, 3)
	const q = "SELECT epoch_ns(time), host, usage FROM db.cpu ORDER BY 1"
	before := s.query(q, "")
	after := s.query("SELECT epoch_ns(time), host, usage FROM db.cpu WHERE NOT ("+cond+") ORDER BY 1", "")
	if len(after) == len(before) || len(after) == 0 {
		t.Fatalf("the condition deletes %d of %d rows", len(before)-len(after), len(before))
	}
	if powerLoss {
		// Restart on a file system that counts what is on disk now as
		// durable, and cuts the power after k operations.
		s.env.close()
		power = waltest.New(nil)
		s.walFS = power
		s.open(t)
		crashed = power.Crashed
		power.CrashAfter(k)
	} else {
		faulty.CrashAfter(k)
	}

	done := make(chan error, 1)
	go func() {
		n, err := s.update("DELETE FROM db.cpu WHERE " + cond)
		if err == nil && n != int64(len(before)-len(after)) {
			err = fmt.Errorf("DELETE answered %d, want %d", n, len(before)-len(after))
		}
		if err == nil {
			err = s.wb.Sweep(context.Background())
		}
		done <- err
	}()
	var err error
	finished := false
	waitFor := time.Now().Add(time.Minute)
	for !finished && !crashed() {
		select {
		case err = <-done:
			finished = true
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(waitFor) {
			t.Fatalf("k=%d: neither a crash nor the end of the DELETE", k)
		}
	}
	wasCrashed := crashed()
	if !finished {
		// The process dies: its retries stop as at a shutdown.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.wb.FinishPersist(ctx)
		cancel()
		err = <-done
	}
	if !wasCrashed && err != nil {
		t.Fatalf("k=%d: %v", k, err)
	}
	answered := err == nil
	s.e.Close()
	s.wb.Close()
	s.env.mem.AssertSize(t, 0)
	s.env.e, s.env.wb = nil, nil
	if power != nil {
		if err := power.PowerLoss(); err != nil {
			t.Fatal(err)
		}
	}

	for restart := range 2 {
		s.store = inner
		s.open(t)
		// A segment replay closed persists in the background: its upload,
		// not yet listed, is no orphan; the check below waits for it.
		s.waitClosedPersisted(t)
		got := s.query(q, "")
		switch {
		case slices.Equal(got, after):
			outcomes["after"]++
		case slices.Equal(got, before) && !answered:
			outcomes["before"]++
		default:
			t.Fatalf("k=%d restart %d: %d rows, neither the %d of before the DELETE nor the %d of after it (answered: %v)",
				k, restart, len(got), len(before), len(after), answered)
		}
		if err := s.wb.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkListedExactly(t, s, inner)
		s.env.close()
	}
	return wasCrashed
}

// checkListedExactly checks that the Parquet objects in store are those
// the buffer lists, with their sizes.
func checkListedExactly(t *testing.T, s *storeEnv, store objstore.Store) {
	t.Helper()
	listed := map[string]int64{}
	for _, ps := range s.wb.Persisted() {
		for _, f := range ps.Files {
			listed[f.Path] = f.Size
		}
	}
	objs, err := store.List(context.Background(), persist.DBsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		size, ok := listed[o.Name]
		if !ok {
			t.Errorf("orphan %s", o.Name)
		} else if size != o.Size {
			t.Errorf("%s: %d bytes, listed with %d", o.Name, o.Size, size)
		}
		delete(listed, o.Name)
	}
	for name := range listed {
		t.Errorf("%s listed but missing", name)
	}
}
