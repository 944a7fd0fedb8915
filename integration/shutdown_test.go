package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Shutdown: SIGTERM cancels running queries and waits for them before
// any buffer memory is freed, lets the persist in progress finish, and
// ends within --shutdown-timeout with exit code 0.

// shutdownSlack is what a test allows past --shutdown-timeout for the
// process to exit and the test to see it (a busy 2-core machine).
const shutdownSlack = 3 * time.Second

// crashMarks are what a crashed server leaves on stderr.
var crashMarks = []string{"panic:", "fatal error:", "SIGSEGV", "SIGABRT", "runtime error"}

// sigterm sends SIGTERM and returns when it was sent.
func sigterm(t testing.TB, s *server) time.Time {
	t.Helper()
	if s.exited() {
		t.Fatalf("apron already exited (%v); stderr:\n%s", s.waitErr, s.Stderr())
	}
	at := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	return at
}

// waitExit waits at most within for s to exit after a SIGTERM sent at
// sent, and requires exit code 0 and no crash. It returns how long the
// exit took.
func waitExit(t testing.TB, s *server, sent time.Time, within time.Duration) time.Duration {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(time.Until(sent.Add(within))):
		t.Fatalf("apron did not exit within %s of SIGTERM; stderr:\n%s", within, s.Stderr())
	}
	took := time.Since(sent)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM (%v), want 0; stderr:\n%s", code, s.waitErr, s.Stderr())
	}
	for _, m := range crashMarks {
		if strings.Contains(s.Stderr(), m) {
			t.Fatalf("stderr of the stopped server holds %q:\n%s", m, s.Stderr())
		}
	}
	return took
}

// runningQueries counts the queries system.queries shows, but itself.
func runningQueries(t testing.TB, addr string) int64 {
	t.Helper()
	c := sqlClient(t, addr, nil)
	rows, err := sqlExecute(testCtx(t), t, c, "SELECT count(*) AS n FROM system.queries WHERE query NOT LIKE '%system.queries%'")
	if err != nil {
		t.Fatalf("system.queries: %v", err)
	}
	return rows[0]["n"].(int64)
}

// waitRunning polls system.queries until n queries run.
func waitRunning(t testing.TB, addr string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runningQueries(t, addr) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d queries running after 30s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drainReader reads rdr to its end and returns the rows and its error.
func drainReader(rdr *flight.Reader) (int64, error) {
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, rdr.Err()
}

// wantCancelled fails unless err says the read was cut by the shutdown:
// UNAVAILABLE (or CANCELLED), never a stream that just ended.
func wantCancelled(t testing.TB, what string, err error) {
	t.Helper()
	code, msg := grpcCode(err)
	if code != codes.Unavailable && code != codes.Canceled {
		t.Errorf("%s after SIGTERM: %v (%q), want UNAVAILABLE or CANCELLED", what, code, msg)
		return
	}
	t.Logf("%s after SIGTERM: %v %q", what, code, msg)
}

// TestShutdownCancelsQueries: SIGTERM during long queries that read the
// buffer (a cross join run by DuckDB, streamed to a client that reads, or
// held open by one that stopped reading; an aggregate that returns
// nothing for a long time; a direct scan held open) cancels them: the
// client gets UNAVAILABLE or CANCELLED, the server exits 0 within
// --shutdown-timeout, without a crash, and restarts with every row.
func TestShutdownCancelsQueries(t *testing.T) {
	const timeout = 6 * time.Second
	const rows = 200_000
	cases := []struct {
		name string
		sql  string
		// read: the client reads until the end; else it reads one batch
		// and holds the stream without reading.
		read bool
		// firstBatch: the query sends rows soon (else it runs long
		// before its first batch).
		firstBatch bool
		// quick: the query stops as soon as it is cancelled; else its
		// client stopped reading, and the server closes its connection
		// once no other call is in flight (after half a second). Either
		// way the server exits well before the timeout.
		quick bool
	}{
		{"streamed cross join", "SELECT a.id, b.id AS id2 FROM sd.t a, sd.t b", true, true, true},
		{"held cross join", "SELECT a.id, b.id AS id2 FROM sd.t a, sd.t b", false, true, false},
		{"long aggregate", "SELECT count(*) AS n, sum(a.id * b.id) AS s FROM sd.t a, sd.t b", true, false, true},
		{"held direct scan", "SELECT * FROM sd.t", false, true, false},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			srv := startServer(t, dir, "--shutdown-timeout", timeout.String(), "--metrics-addr", "127.0.0.1:0", "--wal-sync", "none")
			_, metrics := waitListening(t, srv)
			writeIDs(t, srv.Addr, "sd", "t", 0, rows, 50_000)
			c := smallWindowClient(t, srv.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			info, err := c.Execute(ctx, tc.sql)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				rows int64
				err  error
			}
			done := make(chan result, 1)
			var held *flight.Reader
			if tc.firstBatch {
				rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
				if err != nil {
					t.Fatal(err)
				}
				defer rdr.Release()
				if !rdr.Next() {
					t.Fatalf("no first batch: %v", rdr.Err())
				}
				if tc.read {
					go func() {
						n, err := drainReader(rdr)
						done <- result{n, err}
					}()
				} else {
					held = rdr
				}
			} else {
				go func() {
					rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
					if err != nil {
						done <- result{0, err}
						return
					}
					defer rdr.Release()
					n, err := drainReader(rdr)
					done <- result{n, err}
				}()
			}
			waitRunning(t, srv.Addr, 1)

			sent := sigterm(t, srv)
			if !tc.quick {
				// The shutdown lasts until the held stream is cut off:
				// /readyz says so meanwhile.
				waitState(t, metrics, "shutting_down")
			}
			if held == nil {
				select {
				case res := <-done:
					t.Logf("the query's client got %d rows in all", res.rows)
					wantCancelled(t, "the query", res.err)
				case <-time.After(timeout):
					t.Fatalf("the reading client got no error within %s of SIGTERM", timeout)
				}
			}
			took := waitExit(t, srv, sent, timeout+shutdownSlack)
			t.Logf("exited %s after SIGTERM (--shutdown-timeout %s)", took.Round(time.Millisecond), timeout)
			if took > timeout/2 {
				t.Errorf("the shutdown took %s: the cancelled query should have stopped at once", took)
			}
			if held != nil {
				_, err := drainReader(held)
				wantCancelled(t, "the held stream", err)
			}
			if !strings.Contains(srv.Stderr(), "reads_cancelled=1") {
				t.Errorf("the shutdown did not cancel one read:\n%s", srv.Stderr())
			}
			if strings.Contains(srv.Stderr(), "queries did not stop in time") {
				t.Errorf("a query outlived the shutdown:\n%s", srv.Stderr())
			}
			srv = startServer(t, dir)
			wantIDRange(t, readTable(t, srv.Addr, "sd", "t"), 0, rows)
			srv.Stop(t)
		})
	}
}

// walsWithRecords lists the WAL files of a data dir that hold records (a file
// of a header only is the open segment of a run that wrote nothing).
func walsWithRecords(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".wal") && fi.Size() > 32 {
			out = append(out, e.Name())
		}
	}
	return out
}

// segmentFiles counts the segment files in the local object store.
func segmentFiles(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "segments"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// waitPersisting polls /readyz until a segment is being persisted.
func waitPersisting(t testing.TB, s *server, metrics string) uint64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, r := getReadyz(t, metrics)
		if r.PersistingSegment != 0 {
			return r.PersistingSegment
		}
		if time.Now().After(deadline) {
			t.Fatalf("no persist in progress after 60s (%+v); stderr:\n%s", r, s.Stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bigWAL writes ids 0..segments*perSegment-1 into db.table on a new
// data dir whose WAL then holds them unpersisted, in segments WAL files:
// each is written by a server of its own with --object-store none (a
// restart closes the segment; without a store it stays in the WAL). It
// returns the data dir.
func bigWAL(t testing.TB, db, table string, segments int, perSegment int64) string {
	t.Helper()
	dir := t.TempDir()
	for i := range segments {
		srv := startServer(t, dir, "--object-store", "none", "--wal-sync", "none")
		writeIDs(t, srv.Addr, db, table, int64(i)*perSegment, perSegment, 100_000)
		srv.Stop(t)
	}
	if n := len(walsWithRecords(t, dir)); n != segments {
		t.Fatalf("%d WAL files with records, want %d", n, segments)
	}
	return dir
}

// persistFlags persist to the local store one Parquet file at a time, so
// that a large segment takes a while.
var persistFlags = []string{"--metrics-addr", "127.0.0.1:0", "--object-store", "local", "--persist-concurrency", "1"}

// TestShutdownDuringPersist: SIGTERM while the segment rebuilt by replay
// persists. With time enough, the persist finishes during the shutdown
// (its WAL file goes, its segment file is written) and the next start has
// nothing to replay. With too little, the shutdown still ends within the
// timeout, and the next start persists the segment again. Either way
// every row is there exactly once.
func TestShutdownDuringPersist(t *testing.T) {
	if testing.Short() {
		t.Skip("persists a large segment")
	}
	const rows = 3_000_000
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		finishes bool
	}{
		{"persist_finishes", 60 * time.Second, true},
		{"persist_cut_short", time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bigWAL(t, "p", "t", 1, rows)
			flags := append([]string{"--shutdown-timeout", tc.timeout.String()}, persistFlags...)
			srv := startServer(t, dir, flags...)
			_, metrics := waitListening(t, srv)
			seg := waitPersisting(t, srv, metrics)
			sent := sigterm(t, srv)
			took := waitExit(t, srv, sent, tc.timeout+shutdownSlack)
			log := srv.Stderr()
			shutdownLog := log[strings.Index(log, "shutting down"):]
			persisted := strings.Contains(shutdownLog, "segment persisted")
			t.Logf("SIGTERM during the persist of segment %d: exited after %s; persisted during the shutdown: %v", seg, took.Round(time.Millisecond), persisted)
			for _, l := range strings.Split(shutdownLog, "\n") {
				if l != "" {
					t.Log(l)
				}
			}
			if tc.finishes {
				if !persisted || segmentFiles(t, dir) != 1 {
					t.Fatalf("the persist did not finish during the shutdown (%d segment files); stderr:\n%s", segmentFiles(t, dir), log)
				}
				if w := walsWithRecords(t, dir); len(w) != 0 {
					t.Errorf("WAL files left after the persist: %v", w)
				}
			} else {
				if persisted {
					t.Skipf("the persist finished within %s: make the segment larger to cut it short", tc.timeout)
				}
				if !strings.Contains(shutdownLog, "did not finish in time") {
					t.Errorf("no log line of the interrupted persist:\n%s", shutdownLog)
				}
				if took > tc.timeout+time.Second {
					t.Errorf("the shutdown took %s, past --shutdown-timeout %s", took, tc.timeout)
				}
			}
			srv = startServer(t, dir, persistFlags...)
			_, metrics = waitListening(t, srv)
			replayed := strings.Contains(srv.Stderr(), "WAL replayed files=1")
			if tc.finishes && replayed {
				t.Errorf("the next start replayed a WAL file the shutdown persisted")
			}
			// All rows, exactly once, while they persist and after.
			sqlIDs(t, srv.Addr, "p.t", rows)
			waitPersisted(t, srv, "p", "t", rows)
			sqlIDs(t, srv.Addr, "p.t", rows)
			if w := walsWithRecords(t, dir); len(w) != 0 {
				t.Errorf("WAL files left once persisted: %v", w)
			}
			srv.Stop(t)
		})
	}
}

// sqlIDs checks with SQL that table holds ids 0..n-1 exactly once.
func sqlIDs(t testing.TB, addr, table string, n int64) {
	t.Helper()
	r := queryOne(t, addr, `SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi, CAST(sum(id) AS BIGINT) AS s FROM `+table)
	want := map[string]any{"n": n, "ids": n, "lo": int64(0), "hi": n - 1, "s": n * (n - 1) / 2}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s: %s = %v, want %v (row %v)", table, k, r[k], v, r)
		}
	}
}

// TestRestartLoopWhilePersisting: a server stopped (SIGTERM) right after
// each start, while it persists the segments its replay rebuilt, still
// makes progress: each stop lets the persist in progress finish, so each
// start has fewer WAL files, until none is left; every row stays, once.
func TestRestartLoopWhilePersisting(t *testing.T) {
	if testing.Short() {
		t.Skip("persists large segments")
	}
	const segments, perSegment = 3, 1_000_000
	dir := bigWAL(t, "r", "t", segments, perSegment)
	flags := append([]string{"--shutdown-timeout", "60s"}, persistFlags...)
	left := len(walsWithRecords(t, dir))
	for round := 1; left > 0; round++ {
		if round > segments+1 {
			t.Fatalf("still %d WAL files after %d restarts", left, round-1)
		}
		srv := startServer(t, dir, flags...)
		_, metrics := waitListening(t, srv)
		seg := waitPersisting(t, srv, metrics)
		sent := sigterm(t, srv)
		took := waitExit(t, srv, sent, 60*time.Second+shutdownSlack)
		now := len(walsWithRecords(t, dir))
		t.Logf("round %d: SIGTERM while segment %d persists; exited after %s; WAL files %d -> %d; segment files %d",
			round, seg, took.Round(time.Millisecond), left, now, segmentFiles(t, dir))
		if now >= left {
			t.Fatalf("round %d made no progress: %d WAL files before, %d after; stderr:\n%s", round, left, now, srv.Stderr())
		}
		left = now
	}
	srv := startServer(t, dir, persistFlags...)
	sqlIDs(t, srv.Addr, "r.t", segments*perSegment)
	if st := parquetFileStats(t, srv.Addr, "r", "t"); st.Rows != segments*perSegment {
		t.Errorf("%d rows persisted, want %d", st.Rows, segments*perSegment)
	}
	srv.Stop(t)
}

// smallWindowClient is a Flight SQL client whose gRPC flow-control window
// stays at 64 KiB (a fixed window turns off gRPC's growing it): a client
// that stops reading holds the server's stream after a few batches.
func smallWindowClient(t testing.TB, addr string) *flightsql.Client {
	t.Helper()
	opts := append(grpcOpts(), grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	c, err := flightsql.NewClient(addr, nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitState polls /readyz until its state is want.
func waitState(t testing.TB, metrics, want string) readyzBody {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, r := getReadyz(t, metrics)
		if r.State == want {
			if want != "ready" && (code != 503 || r.Ready) {
				t.Errorf("/readyz %d %+v in state %s, want 503", code, r, want)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not %s after 10s: %d %+v", want, code, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
