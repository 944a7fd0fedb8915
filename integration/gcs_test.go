package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// fake-gcs-server (the module's pinned version) built once per test binary
// run, next to the apron binary (TestMain removes that directory).
var fakeGCS struct {
	once sync.Once
	bin  string
	err  error
}

func fakeGCSBin(t testing.TB) string {
	t.Helper()
	fakeGCS.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			fakeGCS.err = err
			return
		}
		fakeGCS.bin = filepath.Join(filepath.Dir(apronBin), "fake-gcs-server")
		cmd := exec.Command("go", "build", "-o", fakeGCS.bin, "github.com/fsouza/fake-gcs-server")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeGCS.err = fmt.Errorf("building fake-gcs-server: %w\n%s", err, out)
		}
	})
	if fakeGCS.err != nil {
		t.Fatal(fakeGCS.err)
	}
	return fakeGCS.bin
}

// freePort returns a port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startFakeGCS runs fake-gcs-server as a separate process (in-memory
// backend) and returns its JSON API endpoint, http://127.0.0.1:N/storage/v1/.
func startFakeGCS(t testing.TB) string {
	t.Helper()
	bin := fakeGCSBin(t)
	port := freePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	log := newLogBuffer()
	cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port),
		"-backend", "memory", "-public-host", host)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("fake-gcs-server output:\n%s", log.String())
		}
	})
	endpoint := "http://" + host + "/storage/v1/"
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(endpoint + "b")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return endpoint
			}
		}
		select {
		case <-done:
			t.Fatalf("fake-gcs-server exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake-gcs-server not answering on %s after 15s (%v); output:\n%s", endpoint, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gcsClient is a storage client of the emulator, without authentication.
func gcsClient(t testing.TB, endpoint string) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(endpoint), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listObjects returns the object names under prefix, sorted.
func listObjects(t testing.TB, c *storage.Client, bucket, prefix string) []string {
	t.Helper()
	var out []string
	it := c.Bucket(bucket).Objects(testCtx(t), &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("listing gs://%s/%s: %v", bucket, prefix, err)
		}
		out = append(out, a.Name)
	}
	sort.Strings(out)
	return out
}

func readObject(t testing.TB, c *storage.Client, bucket, name string) []byte {
	t.Helper()
	r, err := c.Bucket(bucket).Object(name).NewReader(testCtx(t))
	if err != nil {
		t.Fatalf("reading gs://%s/%s: %v", bucket, name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading gs://%s/%s: %v", bucket, name, err)
	}
	return b
}

// TestGCSEndToEnd: apron persists to a GCS emulator (a separate
// fake-gcs-server process); a new apron on an empty data dir with the same
// bucket and prefix serves exactly the persisted rows, through SQL and
// through plain Flight Parquet endpoints whose URIs name the bucket.
func TestGCSEndToEnd(t *testing.T) {
	t.Parallel()
	endpoint := startFakeGCS(t)
	gc := gcsClient(t, endpoint)
	const bucket, prefix = "apron-e2e", "apron/test"
	if err := gc.Bucket(bucket).Create(testCtx(t), "p", nil); err != nil {
		t.Fatalf("creating bucket: %v", err)
	}
	flags := []string{"--object-store", "gcs", "--gcs-endpoint", endpoint, "--gcs-bucket", bucket,
		"--gcs-prefix", prefix, "--segment-duration", "1s"}
	const db, table = "gdb", "cpu"

	srv := startServer(t, t.TempDir(), flags...)
	written := writeBatches(t, srv.Addr, db, table, 0, 6, 500*time.Millisecond)
	st := waitPersisted(t, srv, db, table, written)
	if st.Files < 2 {
		t.Errorf("%d Parquet files, want several", st.Files)
	}
	sqlTotals(t, srv.Addr, db, table, written)

	// Rows written just before the stop stay in this server's WAL (unless
	// a rollover persisted them in between): the bucket decides.
	late := writeBatches(t, srv.Addr, db, table, 6, 1, 0)
	srv.Stop(t)

	// The bucket: everything under the prefix, as documented.
	names := listObjects(t, gc, bucket, "")
	var segRows int64
	var catalogs, parquet, segments int
	for _, n := range names {
		rel, ok := strings.CutPrefix(n, prefix+"/")
		if !ok {
			t.Errorf("object %q outside the prefix %q", n, prefix)
			continue
		}
		switch {
		case strings.HasPrefix(rel, "catalogs/") && strings.HasSuffix(rel, ".json"):
			catalogs++
		case strings.HasPrefix(rel, "dbs/"+db+"/"+table+"/") && strings.HasSuffix(rel, ".parquet"):
			parquet++
		case strings.HasPrefix(rel, "segments/") && strings.HasSuffix(rel, ".json"):
			segments++
			sf := parseSegmentFile(t, rel, readObject(t, gc, bucket, n))
			segRows += sf.Rows
			for _, f := range sf.Files {
				a, err := gc.Bucket(bucket).Object(prefix + "/" + f.Path).Attrs(testCtx(t))
				if err != nil {
					t.Errorf("segment %d lists %s: %v", sf.SegmentID, f.Path, err)
				} else if a.Size != f.Size {
					t.Errorf("%s: %d bytes, segment file says %d", f.Path, a.Size, f.Size)
				}
			}
		default:
			t.Errorf("unexpected object %q", n)
		}
	}
	if catalogs == 0 || parquet == 0 || segments == 0 {
		t.Errorf("objects %v: want catalogs/, dbs/ and segments/", names)
	}
	switch segRows {
	case written:
		t.Logf("the last %d rows stayed in the first server's WAL", late)
	case written + late:
		t.Logf("the last %d rows were persisted before the stop", late)
		written += late
	default:
		t.Fatalf("segment files hold %d rows; %d were persisted before the last write of %d", segRows, written, late)
	}

	// A new server, empty data dir, same bucket and prefix.
	dir2 := t.TempDir()
	srv2 := startServer(t, dir2, flags...)
	sqlTotals(t, srv2.Addr, db, table, written)
	if st2 := parquetFileStats(t, srv2.Addr, db, table); st2.Rows != written {
		t.Errorf("new server: system.parquet_files holds %d rows, want %d", st2.Rows, written)
	}
	// SQL read the files through the local cache (<data-dir>/cache).
	var cached int
	filepath.WalkDir(filepath.Join(dir2, "cache"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			cached++
		}
		return nil
	})
	if int64(cached) != parquetFileStats(t, srv2.Addr, db, table).Files {
		t.Errorf("%d Parquet files in the cache dir after reading every file with SQL, want %d", cached, parquetFileStats(t, srv2.Addr, db, table).Files)
	}
	if _, err := os.Stat(filepath.Join(dir2, "catalog.json")); err != nil {
		t.Errorf("new server did not install the catalog from the bucket: %v", err)
	}

	c := flightClient(t, srv2.Addr)
	info, err := c.GetFlightInfo(testCtx(t), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{db, table}})
	if err != nil {
		t.Fatal(err)
	}
	buffered, pq := splitEndpoints(t, info)
	if len(buffered) != 0 {
		t.Errorf("new server: %d buffered endpoints, want none", len(buffered))
	}
	if got := checkRefs(t, pq, db, table, "gs://"+bucket+"/"+prefix+"/dbs/", written); got != written {
		t.Errorf("ParquetReferences hold %d rows, want %d", got, written)
	}
	wantIDRange(t, readTable(t, srv2.Addr, db, table), 0, written)

	// The new server keeps writing to the same bucket.
	more := writeBatches(t, srv2.Addr, db, table, 7, 1, 0)
	waitPersisted(t, srv2, db, table, written+more)
}
