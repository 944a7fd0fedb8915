package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Health and readiness while the server starts and stops: it listens
// before it replays the WAL, answers /healthz at once, /readyz 503 with
// the replay's progress, the gRPC health service NOT_SERVING and Flight
// calls UNAVAILABLE until it is ready.

// listeningRE matches the line the server logs once its ports are open,
// before the WAL replays.
var listeningRE = regexp.MustCompile(`msg="apron listening[^"]*" addr=(\S+) metrics_addr=(\S*)`)

// waitListening waits for the listening line of s and returns its gRPC
// and metrics addresses.
func waitListening(t testing.TB, s *server) (addr, metrics string) {
	t.Helper()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		if m := listeningRE.FindStringSubmatch(s.log.String()); m != nil {
			return m[1], m[2]
		}
		select {
		case <-s.log.notify:
		case <-s.done:
			t.Fatalf("apron exited before listening (%v); stderr:\n%s", s.waitErr, s.log.String())
		case <-deadline.C:
			t.Fatalf("apron not listening after %s; stderr:\n%s", readyTimeout, s.log.String())
		}
	}
}

// readyzBody is what the tests read of /readyz.
type readyzBody struct {
	Ready          bool   `json:"ready"`
	State          string `json:"state"`
	Replay         string `json:"replay"`
	ReplayProgress *struct {
		Files      int64   `json:"files"`
		FilesTotal int64   `json:"files_total"`
		Bytes      int64   `json:"bytes"`
		BytesTotal int64   `json:"bytes_total"`
		Percent    float64 `json:"percent"`
		Rows       int64   `json:"rows"`
	} `json:"replay_progress"`
	WAL               string `json:"wal"`
	Persist           string `json:"persist"`
	SegmentsWaiting   int    `json:"segments_waiting"`
	PersistingSegment uint64 `json:"persisting_segment"`
	Store             string `json:"store"`
}

// getReadyz reads /readyz.
func getReadyz(t testing.TB, metrics string) (int, readyzBody) {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	var r readyzBody
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("/readyz: HTTP %d, body %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, r
}

// healthOf asks the gRPC health service about svc.
func healthOf(addr, svc string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(addr, grpcOpts()...)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		return 0, err
	}
	return res.Status, nil
}

var healthNames = []string{"", "arrow.flight.protocol.FlightService", "apron.v1.Write"}

// writeIDs ingests ids [from, from+n) of idRecord into db.table through
// Flight SQL, in batches of per rows.
func writeIDs(t testing.TB, addr, db, table string, from, n, per int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := sqlClient(t, addr, mem)
	ctx := testCtx(t)
	for i := from; i < from+n; i += per {
		r := idRecord(mem, i, min(per, from+n-i))
		_, err := sqlIngest(ctx, c, db, table, r)
		r.Release()
		if err != nil {
			t.Fatalf("ingest at id %d: %v", i, err)
		}
	}
}

// walBytes is the size of the WAL files of a data dir, and their count.
func walBytes(t testing.TB, dir string) (int64, int) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	files := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
		files++
	}
	return n, files
}

// TestHealthDuringReplay: a server restarted on a large WAL listens at
// once: /healthz answers 200, /readyz 503 with the replay's state, the
// gRPC health service NOT_SERVING for every name and a Flight call
// UNAVAILABLE saying the WAL replays; once replayed, /readyz is 200 and
// health SERVING, on the same port, and every row is back.
func TestHealthDuringReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large WAL")
	}
	dir := t.TempDir()
	const rows, per = 3_000_000, 100_000
	flags := []string{"--metrics-addr", "127.0.0.1:0", "--wal-sync", "none", "--object-store", "none"}
	srv := startServer(t, dir, flags...)
	writeIDs(t, srv.Addr, "h", "t", 0, rows, per)
	srv.Kill(t) // the rows come back by replay only
	size, files := walBytes(t, dir)
	t.Logf("WAL: %d files, %d bytes", files, size)

	s := launch(t, nil, serverArgs(dir, flags...))
	addr, metrics := waitListening(t, s)

	// At once, before the replay can be over.
	resp, err := http.Get("http://" + metrics + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during replay: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz during replay: HTTP %d, want 200", resp.StatusCode)
	}
	var seen []string
	sawRunning := false
	deadline := time.Now().Add(2 * readyTimeout)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 after %s; stderr:\n%s", 2*readyTimeout, s.Stderr())
		}
		code, r := getReadyz(t, metrics)
		if code == http.StatusOK {
			if !r.Ready || r.State != "ready" || r.Replay != "done" || r.WAL != "ok" {
				t.Errorf("/readyz 200 with %+v", r)
			}
			break
		}
		if r.Ready || r.State != "starting" {
			t.Fatalf("/readyz %d during startup: %+v", code, r)
		}
		if len(seen) == 0 {
			// The first answer came during the startup: so do health
			// and Flight.
			for _, name := range healthNames {
				st, err := healthOf(addr, name)
				if err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
					// The replay may have ended meanwhile: only a
					// SERVING before /readyz is 200 is wrong, checked below.
					t.Logf("health %q during startup: %v %v", name, st, err)
				}
			}
			fc := flightClient(t, addr)
			_, err := fc.GetFlightInfo(testCtx(t), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"h", "t"}})
			if code, msg := grpcCode(err); code != codes.Unavailable || !strings.Contains(msg, "starting") {
				if _, r2 := getReadyz(t, metrics); r2.State == "starting" {
					t.Errorf("a Flight call during startup: %v %q, want UNAVAILABLE saying apron is starting", code, msg)
				}
			} else {
				t.Logf("a Flight call during startup: %v %q", code, msg)
			}
		}
		if r.Replay == "running" {
			sawRunning = true
			p := r.ReplayProgress
			if p == nil || p.BytesTotal <= 0 || p.Bytes > p.BytesTotal || p.Percent < 0 || p.Percent > 100 {
				t.Errorf("/readyz during replay without sane progress: %+v %+v", r, p)
			}
		}
		seen = append(seen, fmt.Sprintf("%s/%s", r.State, r.Replay))
		select {
		case <-s.done:
			t.Fatalf("apron exited during startup; stderr:\n%s", s.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("/readyz answers before ready: %d (%s … %s)", len(seen), first(seen), last(seen))
	if len(seen) == 0 {
		t.Fatalf("/readyz was 200 at its first answer: the replay of %d bytes was over before it (make the WAL larger)", size)
	}
	if !sawRunning {
		t.Errorf("never saw replay \"running\" in /readyz (answers: %v)", seen)
	}
	for _, name := range healthNames {
		if st, err := healthOf(addr, name); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q once ready: %v %v, want SERVING", name, st, err)
		}
	}
	if !readyRE.MatchString(s.Stderr()) {
		t.Errorf("/readyz 200 before the ready line:\n%s", s.Stderr())
	}
	s.Addr, s.DataDir = addr, dir
	wantIDRange(t, readTable(t, addr, "h", "t"), 0, rows)
	for _, l := range strings.Split(s.Stderr(), "\n") {
		if strings.Contains(l, "replaying the WAL") || strings.Contains(l, "WAL replayed") {
			t.Log(l)
		}
	}
	s.Stop(t)
}

// TestHealthNotServingDuringReplay: the gRPC health service says
// NOT_SERVING while the WAL replays, on the port the server then serves
// on, and health checks made throughout never see SERVING before the
// ready line, nor a refused connection.
func TestHealthNotServingDuringReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large WAL")
	}
	dir := t.TempDir()
	flags := []string{"--wal-sync", "none", "--object-store", "none"}
	srv := startServer(t, dir, flags...)
	writeIDs(t, srv.Addr, "h", "t", 0, 2_000_000, 100_000)
	srv.Kill(t)

	s := launch(t, nil, serverArgs(dir, flags...))
	addr, _ := waitListening(t, s)
	conn, err := grpc.NewClient(addr, grpcOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	notServing := 0
	deadline := time.Now().Add(2 * readyTimeout)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("health not SERVING after %s; stderr:\n%s", 2*readyTimeout, s.Stderr())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// WaitForReady: at the handoff the client reconnects (GOAWAY);
		// the check waits for that rather than fail.
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: ""}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatalf("health check during startup: %v", err)
		}
		ready := readyRE.MatchString(s.Stderr())
		if res.Status == healthpb.HealthCheckResponse_SERVING {
			if !ready {
				// The server writes the line before it says SERVING, but
				// the pipe to this test may not have delivered it yet:
				// wait for it, then check that it was logged before the
				// answer came.
				answered := time.Now()
				waitUntil(t, "the ready line", func() bool { return readyRE.MatchString(s.Stderr()) })
				if logged := readyLineTime(t, s.Stderr()); logged.After(answered) {
					t.Fatalf("SERVING at %s, before the ready line (logged %s)", answered.Format(time.RFC3339Nano), logged.Format(time.RFC3339Nano))
				}
			}
			break
		}
		if ready {
			// The starting server may answer until its retirement.
			t.Logf("NOT_SERVING just after the ready line")
		}
		notServing++
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d NOT_SERVING answers, then SERVING", notServing)
	if notServing == 0 {
		t.Errorf("never NOT_SERVING: the replay was over before the first check")
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-s.done
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// readyLineTime is the time the ready line of stderr was logged at (its
// time= field, to the millisecond).
func readyLineTime(t *testing.T, stderr string) time.Time {
	t.Helper()
	for line := range strings.Lines(stderr) {
		if !readyRE.MatchString(line) {
			continue
		}
		if m := readyTimeRE.FindStringSubmatch(line); m != nil {
			v := m[1] + m[2] // text or JSON log: one of them is empty
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				t.Fatalf("ready line time %q: %v", v, err)
			}
			return ts
		}
	}
	t.Fatalf("no time in the ready line of:\n%s", stderr)
	return time.Time{}
}

var readyTimeRE = regexp.MustCompile(`^time=(\S+)|"time":"([^"]+)"`)

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestSIGTERMDuringReplay: SIGTERM while the WAL replays exits 0 at once,
// without waiting for the replay, and loses nothing: the next start
// replays it all.
func TestSIGTERMDuringReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large WAL")
	}
	dir := t.TempDir()
	const rows = 3_000_000
	flags := []string{"--wal-sync", "none", "--object-store", "none"}
	srv := startServer(t, dir, flags...)
	writeIDs(t, srv.Addr, "h", "t", 0, rows, 100_000)
	srv.Kill(t)

	s := launch(t, nil, serverArgs(dir, flags...))
	waitListening(t, s)
	sent := sigterm(t, s)
	took := waitExit(t, s, sent, 10*time.Second)
	if readyRE.MatchString(s.Stderr()) {
		t.Skipf("the replay was over before the SIGTERM (exit after %s)", took)
	}
	if !strings.Contains(s.Stderr(), "SIGTERM during startup") {
		t.Errorf("no log line of the interrupted startup:\n%s", s.Stderr())
	}
	t.Logf("SIGTERM during the replay: exit 0 after %s", took.Round(time.Millisecond))
	srv = startServer(t, dir, flags...)
	wantIDRange(t, readTable(t, srv.Addr, "h", "t"), 0, rows)
	srv.Stop(t)
}
