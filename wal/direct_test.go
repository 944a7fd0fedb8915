package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// directDir returns a temporary directory where O_DIRECT works, or skips:
// t.TempDir may be a tmpfs, which has no direct I/O, so the package
// directory's file system is tried too.
func directDir(t *testing.T) string {
	t.Helper()
	for _, parent := range []string{"", "."} {
		dir, err := os.MkdirTemp(parent, "wal-direct-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		probe := filepath.Join(dir, "probe")
		if err := os.WriteFile(probe, nil, 0o644); err == nil {
			if f, err := os.OpenFile(probe, os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
				f.Close()
				os.Remove(probe)
				return dir
			}
		}
	}
	t.Skip("no file system with O_DIRECT here")
	return ""
}

// TestDirectIO: with direct I/O the file is written in whole blocks, ends
// in zero padding while open (what a crash leaves: replay cuts it as a
// torn tail and gets every record back), and is cut to its records when
// rotated or closed. A failed direct write is sticky and loses nothing
// acknowledged.
func TestDirectIO(t *testing.T) {
	dir := directDir(t)
	fs := waltest.New(wal.OSFS())
	fs.Direct = true
	w, err := wal.Create(wal.Options{Dir: dir, FS: fs}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var payloads [][]byte
	var last *wal.Pending
	for g := range 12 {
		var ps []*wal.Pending
		for i := range 1 + g%4 {
			p := payloadOf(uint64(g*10+i), 1+(g*7919+i*104729)%(200<<10))
			payloads = append(payloads, p)
			ps = append(ps, w.Append(p))
		}
		for _, p := range ps {
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		last = ps[len(ps)-1]
	}
	path := segPath(dir, 1)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := last.End()
	if len(data)%wal.DirectBlockSize != 0 || int64(len(data)) < end || int64(len(data)) >= end+wal.DirectBlockSize {
		t.Fatalf("open file of %d bytes for %d bytes of records: not written in whole blocks (direct I/O not used?)", len(data), end)
	}
	if !bytes.Equal(data[end:], make([]byte, int64(len(data))-end)) {
		t.Fatal("the padding after the records is not zeros")
	}

	// A crash now leaves the file as it is.
	crashed := filepath.Join(dir, "crashed")
	if err := os.MkdirAll(crashed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segPath(crashed, 1), data, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, stats, err := replayAll(t, wal.ReplayOptions{Dir: crashed})
	if err != nil || len(recs) != len(payloads) || stats.TruncatedBytes != int64(len(data))-end {
		t.Fatalf("replay after a crash: %d records (want %d), %+v, %v", len(recs), len(payloads), stats, err)
	}
	for i, r := range recs {
		if !bytes.Equal(r.payload, payloads[i]) {
			t.Fatalf("record %d differs", i)
		}
	}

	// Rotation cuts the old file to its records.
	if err := w.Rotate(2); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != end {
		t.Fatalf("rotated file: %v bytes, want %d (%v)", fi.Size(), end, err)
	}
	p := payloadOf(99, 5000)
	if err := w.Append(p).Wait(); err != nil {
		t.Fatal(err)
	}
	payloads = append(payloads, p)

	// A failed write: that record and every later one fail, the earlier
	// ones stay.
	fs.FailNth(waltest.OpWrite, 1, syscall.EIO)
	if err := w.Append(payloadOf(100, 7000)).Wait(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Wait = %v, want the injected write error", err)
	}
	if err := w.Append([]byte("later")).Wait(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("later Append = %v", err)
	}
	_ = w.Close()
	recs, _, err = replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != len(payloads) {
		t.Fatalf("replay after the failed write: %d records (want %d), %v", len(recs), len(payloads), err)
	}

	// A clean close leaves no padding.
	dir2 := directDir(t)
	w2, err := wal.Create(wal.Options{Dir: dir2, FS: fs}, 7)
	if err != nil {
		t.Fatal(err)
	}
	pe := w2.Append(payloadOf(7, 12345))
	if err := pe.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(segPath(dir2, 7)); err != nil || fi.Size() != pe.End() {
		t.Fatalf("closed file: %d bytes, want %d (%v)", fi.Size(), pe.End(), err)
	}
	_, stats, err = replayAll(t, wal.ReplayOptions{Dir: dir2})
	if err != nil || stats.Records != 1 || stats.TruncatedBytes != 0 {
		t.Fatalf("replay of a cleanly closed file: %+v, %v", stats, err)
	}
}

// TestDirectStageGivenBack: a group larger than the staging buffer keeps
// is written from a buffer of its own, and the memory is not held after
// it; records still replay.
func TestDirectStageGivenBack(t *testing.T) {
	dir := directDir(t)
	fs := waltest.New(wal.OSFS())
	fs.Direct = true
	w, err := wal.Create(wal.Options{Dir: dir, FS: fs}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var payloads [][]byte
	for _, size := range []int{1000, 100 << 20, 3000} {
		p := payloadOf(uint64(len(payloads)), size)
		payloads = append(payloads, p)
		if err := w.Append(p).Wait(); err != nil {
			t.Fatal(err)
		}
		if c := w.StageCap(); c > 64<<20 {
			t.Fatalf("after a record of %d bytes the staging buffer holds %d bytes", size, c)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil || len(recs) != len(payloads) {
		t.Fatalf("replay: %d records (want %d), %v", len(recs), len(payloads), err)
	}
	for i, r := range recs {
		if !bytes.Equal(r.payload, payloads[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}
