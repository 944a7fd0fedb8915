package wal_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/apron-db/apron/wal"
)

// TestGoldenFile pins the on-disk format: a change to it shows up as a diff
// of testdata/segment_v1.wal. Regenerate with APRON_UPDATE_GOLDEN=1.
func TestGoldenFile(t *testing.T) {
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir}, 12)
	for _, e := range []wal.Entry{
		{Database: "db", Table: "cpu", Sequence: 1, Rows: 2, IPC: []byte("ipc-stream-1")},
		{Database: "db", Table: "mem", Sequence: 2, Rows: 1, IPC: []byte("ipc-stream-2")},
	} {
		if err := w.Append(wal.AppendEntry(nil, e)).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(segPath(dir, 12))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "segment_v1.wal")
	if os.Getenv("APRON_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with APRON_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("WAL file differs from %s:\ngot:\n%s\nwant:\n%s", golden, hex.Dump(got), hex.Dump(want))
	}

	// The golden file replays as the entries it was written from.
	gdir := t.TempDir()
	writeFile(t, segPath(gdir, 12), want)
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: gdir})
	if err != nil || len(recs) != 2 {
		t.Fatalf("replay of golden file: %d records, %v", len(recs), err)
	}
	e, err := wal.DecodeEntry(recs[1].payload)
	if err != nil || e.Table != "mem" || e.Sequence != 2 || string(e.IPC) != "ipc-stream-2" {
		t.Fatalf("golden entry 2 = %+v, %v", e, err)
	}
}
