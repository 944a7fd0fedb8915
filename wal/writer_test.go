package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rec is a record as replayed.
type rec struct {
	seg     uint64
	off     int64
	payload []byte
}

func replayAll(t testing.TB, opts wal.ReplayOptions) ([]rec, wal.ReplayStats, error) {
	t.Helper()
	var recs []rec
	stats, err := wal.Replay(opts, func(seg uint64, off int64, p []byte) error {
		recs = append(recs, rec{seg, off, bytes.Clone(p)})
		return nil
	})
	return recs, stats, err
}

func mustCreate(t testing.TB, opts wal.Options, seg uint64) *wal.Writer {
	t.Helper()
	w, err := wal.Create(opts, seg)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func payloadOf(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func segPath(dir string, seg uint64) string {
	return filepath.Join(dir, wal.SegmentFileName(seg))
}

func TestRoundTripAcrossRotations(t *testing.T) {
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir}, 3)
	r := rand.New(rand.NewPCG(1, 2))

	type want struct {
		seg     uint64
		payload []byte
		p       *wal.Pending
	}
	var wants []want
	seg := uint64(3)
	for f := range 5 {
		n := 1 + r.IntN(40)
		for i := range n {
			size := 1 + r.IntN(4096)
			switch {
			case i == 0 && f == 1:
				size = 3 << 20 / 2 // larger than the write buffer
			case r.IntN(10) == 0:
				size = 100<<10 + r.IntN(200<<10)
			}
			p := payloadOf(uint64(len(wants)), size)
			wants = append(wants, want{seg, p, w.Append(p)})
		}
		if f < 4 {
			seg += uint64(1 + r.IntN(3))
			if err := w.Rotate(seg); err != nil {
				t.Fatalf("Rotate(%d): %v", seg, err)
			}
			if got := w.SegmentID(); got != seg {
				t.Fatalf("SegmentID() = %d after Rotate(%d)", got, seg)
			}
		}
	}
	for i, wa := range wants {
		if err := wa.p.Wait(); err != nil {
			t.Fatalf("record %d: Wait: %v", i, err)
		}
		if s, _ := wa.p.Position(); s != wa.seg {
			t.Fatalf("record %d appended before rotation to segment %d landed in segment %d", i, wa.seg, s)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	recs, stats, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if len(recs) != len(wants) {
		t.Fatalf("replayed %d records, want %d", len(recs), len(wants))
	}
	for i, g := range recs {
		s, off := wants[i].p.Position()
		if g.seg != wants[i].seg || g.seg != s || g.off != off || !bytes.Equal(g.payload, wants[i].payload) {
			t.Fatalf("record %d: got segment %d offset %d len %d, want segment %d offset %d len %d",
				i, g.seg, g.off, len(g.payload), s, off, len(wants[i].payload))
		}
	}
	if stats.Files != 5 || stats.Records != len(wants) || stats.TruncatedBytes != 0 || len(stats.MovedAside) != 0 {
		t.Fatalf("stats = %+v", stats)
	}
	ids, err := wal.ListSegments(nil, dir)
	if err != nil || len(ids) != 5 || ids[0] != 3 || ids[4] != seg {
		t.Fatalf("ListSegments = %v, %v", ids, err)
	}
}

func TestListSegmentsIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		wal.SegmentFileName(10), wal.SegmentFileName(2), wal.SegmentFileName(2) + ".corrupt",
		wal.SegmentFileName(3) + ".tmp", "12.wal", "notes.txt", "0000000000000000000x.wal",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := wal.ListSegments(wal.OSFS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != "[2 10]" {
		t.Fatalf("ListSegments = %v, want [2 10]", ids)
	}
	if ids, err := wal.ListSegments(wal.OSFS(), filepath.Join(dir, "missing")); err != nil || ids != nil {
		t.Fatalf("ListSegments(missing dir) = %v, %v", ids, err)
	}
}

func TestCreateRefusesExistingFile(t *testing.T) {
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir}, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Create(wal.Options{Dir: dir}, 1); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file: err = %v, want ErrExist", err)
	}
}

func TestCloseIsIdempotentAndFailsLaterCalls(t *testing.T) {
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir}, 1)
	p := w.Append([]byte("queued before close"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("record queued before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Append([]byte("x")).Wait(); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := w.Rotate(2); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Rotate after Close: %v", err)
	}
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != 1 {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}

func TestAppendRejectsBadRecords(t *testing.T) {
	w := mustCreate(t, wal.Options{Dir: t.TempDir()}, 1)
	if err := w.Append(nil).Wait(); err == nil {
		t.Fatal("empty record accepted")
	}
	if err := w.Rotate(1); err == nil || !strings.Contains(err.Error(), "must grow") {
		t.Fatalf("Rotate to the same id: %v", err)
	}
	// Neither is sticky.
	if err := w.Append([]byte("ok")).Wait(); err != nil {
		t.Fatalf("Append after rejected calls: %v", err)
	}
}

// TestGroupCommit runs 64 concurrent writers. Fewer syncs than records must
// happen, and no Wait may return before a completed sync covers its record:
// the FS records the file size at every sync once the sync has returned, and
// delays each sync, so a waiter released before its sync would find no
// completed sync that covers its record.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.New(wal.OSFS())
	fs.SyncDelay = 200 * time.Microsecond
	w := mustCreate(t, wal.Options{Dir: dir, FS: fs}, 7)
	path := segPath(dir, 7)
	syncsBefore := fs.Count(waltest.OpSync)

	const writers, perWriter = 64, 20
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				p := w.Append(payloadOf(uint64(g*perWriter+i), 10+(g*31+i*17)%3000))
				if err := p.Wait(); err != nil {
					errc <- err
					return
				}
				if synced := fs.SyncedSize(path); synced < p.End() {
					errc <- fmt.Errorf("writer %d record %d released with end offset %d, but completed syncs cover only %d bytes", g, i, p.End(), synced)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	syncs := fs.Count(waltest.OpSync) - syncsBefore
	if syncs >= writers*perWriter {
		t.Fatalf("%d syncs for %d records: no group commit", syncs, writers*perWriter)
	}
	t.Logf("%d records, %d syncs", writers*perWriter, syncs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != writers*perWriter {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}

func TestSyncFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.New(wal.OSFS())
	var failures []error
	var mu sync.Mutex
	onFail := func(err error) { mu.Lock(); failures = append(failures, err); mu.Unlock() }
	w := mustCreate(t, wal.Options{Dir: dir, FS: fs, OnFail: onFail}, 12)
	if err := w.Append([]byte("before")).Wait(); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("EIO from the disk")
	fs.FailNth(waltest.OpSync, 1, cause)

	// Several records, possibly in several groups: the failing group gets
	// the error, and so does everything after it.
	var ps []*wal.Pending
	for i := range 10 {
		ps = append(ps, w.Append(fmt.Appendf(nil, "record %d", i)))
	}
	for i, p := range ps {
		if err := p.Wait(); !errors.Is(err, cause) {
			t.Fatalf("record %d: Wait = %v, want the injected sync error", i, err)
		}
	}
	syncs := fs.Count(waltest.OpSync)

	// The FS would now succeed: a retrying writer would be caught here.
	err := w.Append([]byte("after")).Wait()
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "segment 12: fsync failed earlier; restart required") {
		t.Fatalf("Append after failed sync: %v", err)
	}
	if err := w.Rotate(13); !errors.Is(err, cause) {
		t.Fatalf("Rotate after failed sync: %v", err)
	}
	if err := w.Err(); !errors.Is(err, cause) {
		t.Fatalf("Err() = %v", err)
	}
	if err := w.Close(); !errors.Is(err, cause) {
		t.Fatalf("Close() = %v, want the sticky error", err)
	}
	if got := fs.Count(waltest.OpSync); got != syncs {
		t.Fatalf("%d syncs after the failed one: a failed fsync must not be retried", got-syncs)
	}
	if _, err := os.Stat(segPath(dir, 13)); !os.IsNotExist(err) {
		t.Fatalf("Rotate after failure created the next file: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != 1 || !errors.Is(failures[0], cause) {
		t.Fatalf("OnFail called with %v, want once with the sticky error", failures)
	}
}

func TestWriteFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		partial bool
		err     error
	}{
		{"short_write", true, waltest.ErrInjected},
		{"disk_full_nothing_written", false, syscall.ENOSPC},
		{"disk_full_half_written", true, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := waltest.New(wal.OSFS())
			fs.PartialWrites = tc.partial
			w := mustCreate(t, wal.Options{Dir: dir, FS: fs}, 1)
			var good [][]byte
			for i := range 3 {
				p := payloadOf(uint64(i), 100)
				if err := w.Append(p).Wait(); err != nil {
					t.Fatal(err)
				}
				good = append(good, p)
			}
			fs.FailNth(waltest.OpWrite, 1, tc.err)
			if err := w.Append(payloadOf(9, 1000)).Wait(); !errors.Is(err, tc.err) {
				t.Fatalf("Wait = %v, want the write error", err)
			}
			if err := w.Append([]byte("later")).Wait(); !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "write failed earlier") {
				t.Fatalf("later Append: %v", err)
			}
			_ = w.Close()

			recs, stats, err := replayAll(t, wal.ReplayOptions{Dir: dir})
			if err != nil {
				t.Fatalf("replay after failed write: %v", err)
			}
			if len(recs) != len(good) {
				t.Fatalf("replayed %d records, want %d", len(recs), len(good))
			}
			wantTrunc := int64(0)
			if tc.partial {
				wantTrunc = (wal.RecordHeaderSize + 1000) / 2
			}
			if stats.TruncatedBytes != wantTrunc {
				t.Fatalf("truncated %d bytes, want %d", stats.TruncatedBytes, wantTrunc)
			}
			recs, stats, err = replayAll(t, wal.ReplayOptions{Dir: dir})
			if err != nil || len(recs) != len(good) || stats.TruncatedBytes != 0 {
				t.Fatalf("second replay: %d records, %+v, %v", len(recs), stats, err)
			}
		})
	}
}

func TestRotateCreateFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.New(wal.OSFS())
	w := mustCreate(t, wal.Options{Dir: dir, FS: fs}, 1)
	if err := w.Append([]byte("a")).Wait(); err != nil {
		t.Fatal(err)
	}
	fs.FailNth(waltest.OpSyncDir, 1, nil)
	if err := w.Rotate(2); !errors.Is(err, waltest.ErrInjected) {
		t.Fatalf("Rotate = %v", err)
	}
	if err := w.Append([]byte("b")).Wait(); !errors.Is(err, waltest.ErrInjected) {
		t.Fatalf("Append after failed rotation = %v", err)
	}
	_ = w.Close()
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != 1 {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}

func TestSyncNone(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.New(wal.OSFS())
	w := mustCreate(t, wal.Options{Dir: dir, FS: fs, Sync: wal.SyncNone}, 1)
	before := fs.Count(waltest.OpSync)
	var end int64
	for i := range 100 {
		p := w.Append(payloadOf(uint64(i), 200))
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		end = p.End()
	}
	if got := fs.Count(waltest.OpSync) - before; got != 0 {
		t.Fatalf("SyncNone synced %d times", got)
	}
	// Written to the OS before Wait returned.
	if fi, err := os.Stat(segPath(dir, 1)); err != nil || fi.Size() != end {
		t.Fatalf("file size %v (%v), want %d", fi.Size(), err, end)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != 100 {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir, Registerer: reg}, 1)
	for range 5 {
		if err := w.Append([]byte("0123456789")).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// A second Writer on the same registry (a restart in-process) works,
	// and two Writers without a registry can run side by side.
	w2 := mustCreate(t, wal.Options{Dir: dir, Registerer: reg}, 2)
	w3 := mustCreate(t, wal.Options{Dir: t.TempDir()}, 1)
	if err := errors.Join(w2.Append([]byte("x")).Wait(), w3.Append([]byte("y")).Wait()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			got[mf.GetName()] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	if got["apron_wal_records_total"] != 6 || got["apron_wal_bytes_written_total"] != 5*18+9 {
		t.Fatalf("metrics = %v", got)
	}
	if got["apron_wal_fsyncs_total"] < 6 || got["apron_wal_group_records"] < 1 || got["apron_wal_fsync_duration_seconds"] < 6 {
		t.Fatalf("metrics = %v", got)
	}
	if _, ok := got["apron_wal_failures_total"]; !ok {
		t.Fatalf("apron_wal_failures_total missing: %v", got)
	}
}

// TestAppendParts: a record appended in parts is their concatenation, on
// both write paths; parts may be empty, a record may not.
func TestAppendParts(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			dir := t.TempDir()
			fs := waltest.New(nil)
			fs.Direct = direct
			w := mustCreate(t, wal.Options{Dir: dir, FS: fs}, 1)
			whole := payloadOf(3, 10000)
			var want [][]byte
			for _, cuts := range [][]int{{0}, {1, 2}, {0, 0, 5000}, {9999}, {4096, 8192}} {
				var parts [][]byte
				prev := 0
				for _, c := range cuts {
					parts = append(parts, whole[prev:c])
					prev = c
				}
				parts = append(parts, whole[prev:], nil)
				if err := w.Append(parts...).Wait(); err != nil {
					t.Fatal(err)
				}
				want = append(want, whole)
			}
			if err := w.Append(nil, []byte{}).Wait(); err == nil || !strings.Contains(err.Error(), "empty record") {
				t.Fatalf("a record of empty parts: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(want) {
				t.Fatalf("%d records, want %d", len(recs), len(want))
			}
			for i, r := range recs {
				if !bytes.Equal(r.payload, want[i]) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}
