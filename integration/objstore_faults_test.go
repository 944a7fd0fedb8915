package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/grpc/codes"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore/objstoretest"
)

// Object store fault suite (issue 15): the real binary persists to the GCS
// emulator through objstoretest.FaultProxy, which answers 500, 503 and
// 429, resets connections mid-upload, delays requests (under and past
// --persist-attempt-timeout) and reports successes as failures. After each
// fault, persistence converges with every row exactly once; the failures
// are counted (apron_objstore_failures_total by operation and class,
// apron_persist_failures_total for failed persist steps) and logged; an
// outage shows in /readyz, system.segments and the log; a kill -9 while
// segment files cannot be written leaves nothing orphaned after the next
// start, and a fresh server on the bucket gets back every row.

// storeFailures sums apron_objstore_failures_total by class.
func storeFailures(t testing.TB, metrics string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	classRE := regexp.MustCompile(`class="([^"]*)"`)
	for _, l := range metricLines(t, metrics, "apron_objstore_failures_total") {
		m := classRE.FindStringSubmatch(l.labels)
		if m == nil {
			t.Fatalf("apron_objstore_failures_total without a class: %q", l.labels)
		}
		if !strings.Contains(l.labels, `op="`) || strings.Contains(l.labels, `op=""`) {
			t.Errorf("apron_objstore_failures_total without an operation: %q", l.labels)
		}
		out[m[1]] += l.value
	}
	return out
}

type metricLine struct {
	labels string
	value  float64
}

// metricLines reads the samples of one metric from /metrics.
func metricLines(t testing.TB, metrics, name string) []metricLine {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	var out []metricLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		var labels string
		if strings.HasPrefix(rest, "{") {
			i := strings.LastIndex(rest, "}")
			labels, rest = rest[1:i], rest[i+1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out = append(out, metricLine{labels, v})
	}
	return out
}

func metricValue(t testing.TB, metrics, name string) float64 {
	t.Helper()
	var v float64
	for _, l := range metricLines(t, metrics, name) {
		v += l.value
	}
	return v
}

// persistReadyz is what /readyz says of persistence.
type persistReadyz struct {
	Ready          bool       `json:"ready"`
	WAL            string     `json:"wal"`
	Persist        string     `json:"persist"`
	FailingSince   *time.Time `json:"failing_since"`
	FailedAttempts int        `json:"failed_attempts"`
	LastError      string     `json:"last_error"`
}

func readPersistReadyz(t testing.TB, metrics string) (int, persistReadyz) {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r persistReadyz
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("/readyz: HTTP %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, r
}

func metricsAddrOf(t testing.TB, s *server) string {
	t.Helper()
	m := regexp.MustCompile(`metrics_addr=(\S+)`).FindStringSubmatch(s.Stderr())
	if m == nil {
		t.Fatalf("no metrics_addr in the server's log:\n%s", s.Stderr())
	}
	return m[1]
}

// checkNoOrphans lists the bucket: every Parquet file is listed by a
// segment file, every listed file is there with its size, and the segment
// files hold want rows.
func checkNoOrphans(t testing.TB, gc *storage.Client, bucket, prefix, db, table string, want int64) {
	t.Helper()
	listed := map[string]bool{}
	var rows int64
	var parquet []string
	for _, n := range listObjects(t, gc, bucket, prefix+"/") {
		rel := strings.TrimPrefix(n, prefix+"/")
		switch {
		case strings.HasPrefix(rel, "segments/") && strings.HasSuffix(rel, ".json"):
			sf := parseSegmentFile(t, rel, readObject(t, gc, bucket, n))
			rows += sf.Rows
			for _, f := range sf.Files {
				listed[f.Path] = true
				a, err := gc.Bucket(bucket).Object(prefix + "/" + f.Path).Attrs(testCtx(t))
				if err != nil {
					t.Errorf("segment %d lists %s: %v", sf.SegmentID, f.Path, err)
				} else if a.Size != f.Size {
					t.Errorf("%s: %d bytes, its segment file says %d", f.Path, a.Size, f.Size)
				}
			}
		case strings.HasPrefix(rel, "dbs/"):
			parquet = append(parquet, rel)
		}
	}
	for _, p := range parquet {
		if !listed[p] {
			t.Errorf("orphan in the bucket: %s is listed by no segment file", p)
		}
	}
	if rows != want {
		t.Errorf("the segment files hold %d rows, want %d", rows, want)
	}
	t.Logf("bucket: %d Parquet files, all listed; %d rows", len(parquet), rows)
}

func TestObjectStoreFaults(t *testing.T) {
	t.Parallel()
	endpoint := startFakeGCS(t) // http://127.0.0.1:N/storage/v1/
	gc := gcsClient(t, endpoint)
	const bucket, prefix, db, table = "apron-faults", "apron/faults", "fdb", "cpu"
	if err := gc.Bucket(bucket).Create(testCtx(t), "p", nil); err != nil {
		t.Fatalf("creating bucket: %v", err)
	}
	proxy, err := objstoretest.NewFaultProxy(strings.TrimSuffix(endpoint, "/storage/v1/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("faults injected:\n%s", strings.Join(proxy.Log(), "\n"))
		}
	})
	const attemptTimeout = 2 * time.Second
	flags := []string{"--object-store", "gcs", "--gcs-endpoint", proxy.URL() + "/storage/v1/", "--gcs-bucket", bucket,
		"--gcs-prefix", prefix, "--segment-duration", "1s", "--persist-attempt-timeout", attemptTimeout.String(),
		"--compaction-interval", "1h", "--metrics-addr", "127.0.0.1:0"}
	dir := t.TempDir()
	srv := startServer(t, dir, flags...)
	metrics := metricsAddrOf(t, srv)

	var written int64
	batch := 0
	write := func(n int) {
		written += writeBatches(t, srv.Addr, db, table, batch, n, 0)
		batch += n
	}
	write(2)
	waitPersisted(t, srv, db, table, written)

	cases := []struct {
		name  string
		fault objstoretest.Fault
		n     int
		class string // of apron_objstore_failures_total; "" if no failure
		// stepFails: the persist step fails (the attempt deadline), so
		// apron_persist_failures_total counts it and the log says so.
		stepFails bool
	}{
		{"503", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 503}, 3, "unavailable", false},
		{"500", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 500}, 3, "unavailable", false},
		{"429", objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 429}, 3, "rate_limited", false},
		{"reset mid-upload", objstoretest.Fault{Kind: objstoretest.FaultReset}, 3, "connection", false},
		{"delay under the attempt deadline", objstoretest.Fault{Kind: objstoretest.FaultDelay, Delay: 300 * time.Millisecond}, 2, "", false},
		{"delay past the attempt deadline", objstoretest.Fault{Kind: objstoretest.FaultDelay, Delay: 2 * attemptTimeout}, 1, "timeout", true},
		{"success reported as failure", objstoretest.Fault{Kind: objstoretest.FaultLostSuccess, Status: 503}, 3, "unavailable", false},
	}
	logged := make(map[string]bool) // failure classes logged so far
	for _, c := range cases {
		before := storeFailures(t, metrics)
		stepsBefore := metricValue(t, metrics, "apron_persist_failures_total")
		logBefore := len(srv.Stderr())
		proxy.Inject(objstoretest.MatchUploads, c.fault, c.n)
		start := time.Now()
		write(2)
		waitPersisted(t, srv, db, table, written)
		if p := proxy.Pending(); p != 0 {
			t.Errorf("%s: persisted with %d faults not injected", c.name, p)
			proxy.Clear()
		}
		after := storeFailures(t, metrics)
		steps := metricValue(t, metrics, "apron_persist_failures_total") - stepsBefore
		t.Logf("%s: persisted in %s; failures by class %v (before %v); failed persist steps +%.0f",
			c.name, time.Since(start).Round(time.Millisecond), after, before, steps)
		if c.class != "" && after[c.class] <= before[c.class] {
			t.Errorf("%s: apron_objstore_failures_total{class=%q} %v -> %v, want it counted", c.name, c.class, before[c.class], after[c.class])
		}
		if c.class == "" {
			for k, v := range after {
				if v != before[k] {
					t.Errorf("%s: apron_objstore_failures_total{class=%q} %v -> %v, want no failure", c.name, k, before[k], v)
				}
			}
		}
		newLog := srv.Stderr()[logBefore:]
		// The log holds back failures of a class within a second of the
		// last logged one (lograte.ByKey), so only a class's first
		// failure is sure to be logged; later ones may be counted in a
		// later line's suppressed_since_last.
		if c.class != "" && !logged[c.class] {
			if !strings.Contains(newLog, "object store request failed") && !strings.Contains(newLog, "persist step failed") {
				t.Errorf("%s: no log line of the first failure of class %s:\n%s", c.name, c.class, newLog)
			}
			logged[c.class] = true
		}
		if c.stepFails {
			if steps < 1 {
				t.Errorf("%s: apron_persist_failures_total +%v, want the failed step counted", c.name, steps)
			}
			if !strings.Contains(newLog, "persist step failed") {
				t.Errorf("%s: no 'persist step failed' line:\n%s", c.name, newLog)
			}
		}
		sqlTotals(t, srv.Addr, db, table, written)
	}

	// An outage: every upload answered 503 until it ends. It is seen in
	// /readyz, system.segments and the log while it lasts, and
	// persistence resumes after it.
	stepsBefore := metricValue(t, metrics, "apron_persist_failures_total")
	proxy.Inject(objstoretest.MatchUploads, objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 503}, -1)
	outage := time.Now()
	write(2)
	var rz persistReadyz
	waitUntil(t, "/readyz to say persistence is failing", func() bool {
		_, rz = readPersistReadyz(t, metrics)
		return rz.Persist == "failing"
	})
	if rz.FailingSince == nil || rz.FailingSince.Before(outage.Add(-time.Second)) || !strings.Contains(rz.LastError, "503") {
		t.Errorf("/readyz during the outage: %+v, want failing since the outage, with the store's last error (503)", rz)
	}
	if rz.WAL != "ok" {
		t.Errorf("/readyz during the outage: wal %q, want ok (writes go on)", rz.WAL)
	}
	waitUntil(t, "system.segments to show the persist error", func() bool {
		r := queryOne(t, srv.Addr, `SELECT count(*) AS n, max(persist_error) AS err FROM system.segments
			WHERE persist_error IS NOT NULL AND persist_error <> '' AND persist_failing_since IS NOT NULL`)
		if r["n"].(int64) == 0 {
			return false
		}
		if e, _ := r["err"].(string); !strings.Contains(e, "503") {
			t.Errorf("system.segments persist_error %q, want the store's 503", e)
		}
		return true
	})
	waitUntil(t, "a failed persist step during the outage", func() bool {
		return metricValue(t, metrics, "apron_persist_failures_total") > stepsBefore && strings.Contains(srv.Stderr(), "persist step failed")
	})
	if _, rz = readPersistReadyz(t, metrics); rz.Persist != "failing" || rz.FailedAttempts < 1 || !strings.Contains(rz.LastError, "503") {
		t.Errorf("/readyz once a persist step failed: %+v, want failing with the attempts and the last error (the store's 503)", rz)
	}
	t.Logf("/readyz during the outage: %+v", rz)
	// Writes go on meanwhile.
	write(1)
	proxy.Clear()
	ended := time.Now()
	waitPersisted(t, srv, db, table, written)
	t.Logf("outage of %s: persisted %s after it ended", ended.Sub(outage).Round(time.Millisecond), time.Since(ended).Round(time.Millisecond))
	waitUntil(t, "/readyz to say persistence is ok after the outage", func() bool {
		_, rz = readPersistReadyz(t, metrics)
		return rz.Persist == "ok" && rz.LastError == ""
	})
	sqlTotals(t, srv.Addr, db, table, written)

	// kill -9 while segment files cannot be written (their Parquet files
	// land, and their catalogs): the next start persists those segments
	// again from the WAL, finds the files in place, and leaves no orphan.
	proxy.Inject(objstoretest.MatchUploadOf("segments/"), objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 503}, -1)
	segFaults := func() int { return strings.Count(strings.Join(proxy.Log(), "\n"), "/segments/") }
	segBefore := segFaults()
	write(3)
	waitUntil(t, "a segment file upload to fail", func() bool { return segFaults() > segBefore })
	srv.Kill(t)
	proxy.Clear()
	// Lost successes at the next start too: each upload lands but is
	// reported failed once.
	proxy.Inject(objstoretest.MatchUploads, objstoretest.Fault{Kind: objstoretest.FaultLostSuccess, Status: 503}, 2)
	srv = startServer(t, dir, flags...)
	metrics = metricsAddrOf(t, srv)
	waitPersisted(t, srv, db, table, written)
	sqlTotals(t, srv.Addr, db, table, written)
	srv.Stop(t)
	checkNoOrphans(t, gc, bucket, prefix, db, table, written)

	// A fresh server on the bucket, without the data dir: every row, once.
	srv2 := startServer(t, t.TempDir(), flags...)
	sqlTotals(t, srv2.Addr, db, table, written)
	srv2.Stop(t)
	t.Logf("%d rows, %d requests through the proxy, faults injected: %d status, %d reset, %d delay, %d lost success",
		written, proxy.Requests(), proxy.Injected(objstoretest.FaultStatus), proxy.Injected(objstoretest.FaultReset),
		proxy.Injected(objstoretest.FaultDelay), proxy.Injected(objstoretest.FaultLostSuccess))
}

// TestObjectStoreOutageWriters: writers under an object store outage.
// Closed segments pile up in memory until --buffer-mem-limit; then a
// writer waiting for each acknowledgement and a streaming one both get
// RESOURCE_EXHAUSTED promptly (no hang), saying persistence fails and
// why (the store's 503). Once the store is back, persistence converges,
// writes are taken again, and every acknowledged row is there once,
// across a restart.
func TestObjectStoreOutageWriters(t *testing.T) {
	t.Parallel()
	endpoint := startFakeGCS(t)
	gc := gcsClient(t, endpoint)
	const bucket = "apron-outage"
	if err := gc.Bucket(bucket).Create(testCtx(t), "p", nil); err != nil {
		t.Fatalf("creating bucket: %v", err)
	}
	proxy, err := objstoretest.NewFaultProxy(strings.TrimSuffix(endpoint, "/storage/v1/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	dir := t.TempDir()
	flags := []string{"--object-store", "gcs", "--gcs-endpoint", proxy.URL() + "/storage/v1/", "--gcs-bucket", bucket,
		"--segment-duration", "1s", "--persist-attempt-timeout", "2s", "--buffer-mem-limit", "16MiB",
		"--compaction-interval", "1h", "--metrics-addr", "127.0.0.1:0"}
	srv := startServer(t, dir, flags...)
	proxy.Inject(objstoretest.MatchUploads, objstoretest.Fault{Kind: objstoretest.FaultStatus, Status: 503}, -1)

	writers, firstFail := runUntilRefused(t, srv.Addr, []string{"outage", "t"}, "the full buffer")
	for _, w := range writers {
		code, msg := grpcCode(w.err)
		t.Logf("writer (wait %v): %d rows acknowledged, then after %s: %v %s", w.wait, w.acked,
			w.failedAt.Sub(firstFail).Round(time.Millisecond), code, msg)
		if code != codes.ResourceExhausted || !strings.Contains(msg, "503") {
			t.Errorf("writer (wait %v): %v %q, want RESOURCE_EXHAUSTED carrying the store's error (503)", w.wait, code, msg)
		}
		// The other writer is refused at its next batch: both within
		// seconds of each other, not at the end of a hang.
		if d := w.failedAt.Sub(firstFail); d > 10*time.Second {
			t.Errorf("writer (wait %v) got its error %s after the first refusal: want it promptly", w.wait, d)
		}
	}
	checkAcked(t, srv.Addr, writers, "during the outage")

	proxy.Clear()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	path := []string{"outage", "t"}
	waitUntil(t, "writes taken again after the outage", func() bool {
		rec := idRecord(mem, 1<<41, 1)
		defer rec.Release()
		_, err := flightPut(testCtx(t), flightClient(t, srv.Addr), path, mem, rec)
		return err == nil
	})
	srv.Kill(t)
	srv = startServer(t, dir, flags...)
	checkAcked(t, srv.Addr, writers, "after the outage and a restart")
	srv.Stop(t)
}
