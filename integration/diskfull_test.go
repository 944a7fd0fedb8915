package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	apronpb "github.com/apron-db/apron/proto"
)

// mountTmpfs mounts a tmpfs of size bytes on dir, unmounted at the end of
// the test; it skips the test where the machine does not allow it (not
// Linux, or no CAP_SYS_ADMIN: not root, or a container without it). That
// skip is an environment limit, not a missing client, so it does not fail
// under CI=true; the disk fault table (buffer.TestDiskFaults) covers the
// same outcomes with an injected ENOSPC everywhere.
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("a real full file system needs a Linux tmpfs (GOOS %s)", runtime.GOOS)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): mounting needs root or CAP_SYS_ADMIN, which this environment does not give; "+
			"the injected ENOSPC of buffer.TestDiskFaults still runs", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs on %s: %v", dir, err)
		}
	})
}

// diskWriter is one client writing ids [base, …) with plain Flight DoPut
// until its stream fails: wait says whether it waits for each batch's
// PutResult before sending the next (else it streams, reading the
// acknowledgements on the side).
type diskWriter struct {
	path  []string // [db, table]; nil: diskfull.t
	base  int64
	wait  bool
	acked int64 // rows acknowledged, from base on
	err   error // the error that ended the stream
	// lastAck is when the last PutResult came; failedAt when the stream
	// ended with err.
	lastAck, failedAt time.Time
}

const diskBatchRows = 2000

func (w *diskWriter) run(ctx context.Context, c flight.Client, mem memory.Allocator) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		w.err, w.failedAt = err, time.Now()
		return
	}
	fw := flight.NewRecordWriter(stream, ipc.WithSchema(idSchema), ipc.WithAllocator(mem))
	defer fw.Close()
	path := w.path
	if path == nil {
		path = []string{"diskfull", "t"}
	}
	fw.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: path})
	acks := make(chan error, 1)
	var mu sync.Mutex
	recvOne := func() error {
		res, err := stream.Recv()
		if err != nil {
			return err
		}
		var md apronpb.PutResultMetadata
		if err := proto.Unmarshal(res.GetAppMetadata(), &md); err != nil {
			return err
		}
		mu.Lock()
		w.acked, w.lastAck = md.GetTotalRowsWritten(), time.Now()
		mu.Unlock()
		return nil
	}
	if !w.wait {
		go func() {
			for {
				if err := recvOne(); err != nil {
					acks <- err
					return
				}
			}
		}()
	}
	next := w.base
	for {
		rec := idRecord(mem, next, diskBatchRows)
		serr := fw.Write(rec)
		rec.Release()
		next += diskBatchRows
		if w.wait && serr == nil {
			serr = recvOne()
		}
		if !w.wait && serr == nil {
			select {
			case err := <-acks:
				serr = err
			default:
			}
		}
		if serr != nil {
			if !w.wait && errors.Is(serr, io.EOF) {
				// A Send that fails says only EOF: the status comes
				// with Recv.
				serr = <-acks
			}
			mu.Lock()
			w.err, w.failedAt = serr, time.Now()
			mu.Unlock()
			return
		}
	}
}

// TestDiskFull: the data dir on a real, small file system (a 32 MiB
// tmpfs, a ballast file taking part of it). Two writers, one waiting for
// each acknowledgement and one streaming, write until the WAL hits ENOSPC:
// both get the error promptly (UNAVAILABLE naming the cause, well within
// seconds of their last acknowledgement: no hang), /readyz says the WAL
// failed and health apron.v1.Write is NOT_SERVING; after kill -9 and the
// ballast deleted (space freed), a restart has every acknowledged row,
// once.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	mountTmpfs(t, mnt, 32<<20)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "data")
	flags := []string{"--object-store", "none", "--metrics-addr", "127.0.0.1:0", "--segment-duration", "1h"}
	srv := startServer(t, dir, flags...)
	metrics := metricsAddrOf(t, srv)

	writers, firstFail := runUntilRefused(t, srv.Addr, nil, "the full disk")
	for _, w := range writers {
		code, msg := grpcCode(w.err)
		t.Logf("writer (wait %v): %d rows acknowledged, then after %s: %v %s", w.wait, w.acked,
			w.failedAt.Sub(firstFail).Round(time.Millisecond), code, msg)
		if code != codes.Unavailable || !strings.Contains(msg, "no space left on device") {
			t.Errorf("writer (wait %v): %v %q, want UNAVAILABLE naming ENOSPC", w.wait, code, msg)
		}
		if d := w.failedAt.Sub(firstFail); d > 10*time.Second {
			t.Errorf("writer (wait %v) got its error %s after the first failure: want it promptly", w.wait, d)
		}
		if w.acked == 0 {
			t.Errorf("writer (wait %v): nothing acknowledged before the disk filled", w.wait)
		}
	}

	// What operators see.
	resp, err := http.Get("http://" + metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rz, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(rz), "no space left on device") {
		t.Errorf("/readyz after the WAL failed: HTTP %d %s, want 503 naming the WAL's error", resp.StatusCode, rz)
	}
	if st, err := healthOf(srv.Addr, "apron.v1.Write"); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health apron.v1.Write after the WAL failed: %v %v, want NOT_SERVING", st, err)
	}
	if st, err := healthOf(srv.Addr, ""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health \"\" after the WAL failed: %v %v, want SERVING (reads go on)", st, err)
	}
	if v := metricValue(t, metrics, "apron_wal_failed"); v != 1 {
		t.Errorf("apron_wal_failed = %v, want 1", v)
	}
	// A new writer is refused at once too.
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	one := idRecord(mem, 1<<41, 1)
	_, err = flightPut(testCtx(t), flightClient(t, srv.Addr), []string{"diskfull", "t"}, mem, one)
	one.Release()
	if code, _ := grpcCode(err); code != codes.Unavailable {
		t.Errorf("a write after the WAL failed: %v, want UNAVAILABLE", err)
	}
	// Reads still work, and hold every acknowledged row.
	checkAcked(t, srv.Addr, writers, "before the restart")
	srv.Kill(t)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, dir, flags...)
	checkAcked(t, srv.Addr, writers, "after the restart with space freed")
	// Writes work again.
	ten := idRecord(mem, 1<<42, 10)
	if _, err := flightPut(testCtx(t), flightClient(t, srv.Addr), []string{"diskfull", "t"}, mem, ten); err != nil {
		t.Errorf("a write after the restart with space freed: %v", err)
	}
	ten.Release()
	srv.Stop(t)
}

// checkAcked: every writer's acknowledged ids are in its table once (rows
// written but not acknowledged may be there too).
func checkAcked(t *testing.T, addr string, writers []*diskWriter, when string) {
	t.Helper()
	for _, w := range writers {
		table := "diskfull.t"
		if w.path != nil {
			table = w.path[0] + "." + w.path[1]
		}
		r := queryOne(t, addr, fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS ids FROM %s WHERE id >= %d AND id < %d`,
			table, w.base, w.base+w.acked))
		if r["n"] != w.acked || r["ids"] != w.acked {
			t.Errorf("%s: writer (wait %v) had %d rows acknowledged; the table holds %v of them (%v distinct)", when, w.wait, w.acked, r["n"], r["ids"])
		}
	}
}

// runUntilRefused runs two writers to path (nil: the default) until each
// is refused, one waiting for each acknowledgement, one streaming without
// waiting; it fails the test if either is still waiting after 2 minutes
// (hung on what: for the message). It returns them and the time of the
// first refusal.
func runUntilRefused(t *testing.T, addr string, path []string, what string) ([]*diskWriter, time.Time) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writers := []*diskWriter{{path: path, base: 0, wait: true}, {path: path, base: 1 << 40, wait: false}}
	var wg sync.WaitGroup
	for _, w := range writers {
		c := flightClient(t, addr)
		wg.Go(func() { w.run(ctx, c, mem) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("a writer was still waiting after 2 minutes: hung on %s (acknowledged: %d, %d)", what, writers[0].acked, writers[1].acked)
	}
	var firstFail time.Time
	for _, w := range writers {
		if firstFail.IsZero() || w.failedAt.Before(firstFail) {
			firstFail = w.failedAt
		}
	}
	return writers, firstFail
}
