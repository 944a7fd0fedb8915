package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apron-db/apron/wal"
)

// layout is what a clean replay of the test files found.
type layout struct {
	dir  string
	recs map[uint64][]rec
	size map[uint64]int64
}

func (l layout) off(seg uint64, i int) int64 { return l.recs[seg][i].off }

func (l layout) end(seg uint64, i int) int64 {
	r := l.recs[seg][i]
	return r.off + wal.RecordHeaderSize + int64(len(r.payload))
}

func (l layout) path(seg uint64) string { return segPath(l.dir, seg) }

// writeTestFiles writes segments 1, 2 and 3 with 8 records each, payloads
// of 40, 70, …, 250 bytes, and returns their layout.
func writeTestFiles(t *testing.T) layout {
	t.Helper()
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir, Sync: wal.SyncNone}, 1)
	for seg := uint64(1); seg <= 3; seg++ {
		if seg > 1 {
			if err := w.Rotate(seg); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 8 {
			if err := w.Append(payloadOf(seg*100+uint64(i), 40+30*i)).Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := replayAll(t, wal.ReplayOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l := layout{dir: dir, recs: map[uint64][]rec{}, size: map[uint64]int64{}}
	for _, r := range recs {
		l.recs[r.seg] = append(l.recs[r.seg], r)
	}
	for seg := uint64(1); seg <= 3; seg++ {
		fi, err := os.Stat(l.path(seg))
		if err != nil {
			t.Fatal(err)
		}
		l.size[seg] = fi.Size()
	}
	return l
}

func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func flipBit(t *testing.T, path string, off int64) {
	editFile(t, path, func(b []byte) []byte { b[off] ^= 0x10; return b })
}

func putUint32(t *testing.T, path string, off int64, v uint32) {
	editFile(t, path, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b })
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type corruptionCase struct {
	name   string
	mutate func(t *testing.T, l layout)
	// keep: how many records of a segment survive (default: all). For an
	// error, the records of later segments are delivered only with
	// MoveCorrupt.
	keep map[uint64]int
	// errSeg is the segment of the CorruptionError (0: replay succeeds).
	errSeg uint64
	errOff func(l layout) int64
	// truncated is the number of bytes cut off a torn tail.
	truncated func(l layout) int64
}

func corruptionCases() []corruptionCase {
	const lastRec = 40 + 30*7 + wal.RecordHeaderSize // bytes of the last record of a file
	return []corruptionCase{
		{
			name:      "torn_last_record",
			mutate:    func(t *testing.T, l layout) { editFile(t, l.path(3), func(b []byte) []byte { return b[:len(b)-5] }) },
			keep:      map[uint64]int{3: 7},
			truncated: func(layout) int64 { return lastRec - 5 },
		},
		{
			name: "zeroed_last_sector_appended",
			mutate: func(t *testing.T, l layout) {
				editFile(t, l.path(3), func(b []byte) []byte { return append(b, make([]byte, 512)...) })
			},
			truncated: func(layout) int64 { return 512 },
		},
		{
			name: "zeroed_last_sector_overwritten",
			mutate: func(t *testing.T, l layout) {
				editFile(t, l.path(3), func(b []byte) []byte { clear(b[len(b)-512:]); return b })
			},
			keep: map[uint64]int{3: 5}, // records 0..4 end before size-512 (1256-512 = 744)
			truncated: func(l layout) int64 {
				return l.size[3] - l.off(3, 5)
			},
		},
		{
			name:      "length_past_eof",
			mutate:    func(t *testing.T, l layout) { putUint32(t, l.path(3), l.off(3, 7), 1<<30-1) },
			keep:      map[uint64]int{3: 7},
			truncated: func(layout) int64 { return lastRec },
		},
		{
			name:      "bad_checksum_last_record",
			mutate:    func(t *testing.T, l layout) { flipBit(t, l.path(3), l.off(3, 7)+20) },
			keep:      map[uint64]int{3: 7},
			truncated: func(layout) int64 { return lastRec },
		},
		{
			name: "bad_checksum_last_record_zeros_after",
			mutate: func(t *testing.T, l layout) {
				flipBit(t, l.path(3), l.off(3, 7)+20)
				editFile(t, l.path(3), func(b []byte) []byte { return append(b, make([]byte, 100)...) })
			},
			keep:      map[uint64]int{3: 7},
			truncated: func(layout) int64 { return lastRec + 100 },
		},
		{
			name: "partial_record_header",
			mutate: func(t *testing.T, l layout) {
				editFile(t, l.path(3), func(b []byte) []byte { return b[:l.off(3, 7)+5] })
			},
			keep:      map[uint64]int{3: 7},
			truncated: func(layout) int64 { return 5 },
		},
		{
			name: "zeroed_record_header_newest",
			mutate: func(t *testing.T, l layout) {
				editFile(t, l.path(3), func(b []byte) []byte { clear(b[l.off(3, 5) : l.off(3, 5)+8]); return b })
			},
			keep:      map[uint64]int{3: 5},
			truncated: func(l layout) int64 { return l.size[3] - l.off(3, 5) },
		},
		{
			name:   "bad_checksum_newest_middle",
			mutate: func(t *testing.T, l layout) { flipBit(t, l.path(3), l.off(3, 5)+30) },
			keep:   map[uint64]int{3: 5},
			errSeg: 3,
			errOff: func(l layout) int64 { return l.off(3, 5) },
		},
		{
			name:   "bad_length_newest_middle",
			mutate: func(t *testing.T, l layout) { putUint32(t, l.path(3), l.off(3, 2), 12) },
			keep:   map[uint64]int{3: 2},
			errSeg: 3,
			errOff: func(l layout) int64 { return l.off(3, 2) },
		},
		{
			name:   "bad_checksum_older",
			mutate: func(t *testing.T, l layout) { flipBit(t, l.path(2), l.off(2, 3)+wal.RecordHeaderSize+33) },
			keep:   map[uint64]int{2: 3},
			errSeg: 2,
			errOff: func(l layout) int64 { return l.off(2, 3) },
		},
		{
			name:   "bad_crc_field_older",
			mutate: func(t *testing.T, l layout) { flipBit(t, l.path(2), l.off(2, 0)+5) },
			keep:   map[uint64]int{2: 0},
			errSeg: 2,
			errOff: func(l layout) int64 { return l.off(2, 0) },
		},
		{
			name:   "bad_length_older",
			mutate: func(t *testing.T, l layout) { putUint32(t, l.path(2), l.off(2, 3), 1<<30-1) },
			keep:   map[uint64]int{2: 3},
			errSeg: 2,
			errOff: func(l layout) int64 { return l.off(2, 3) },
		},
		{
			name:   "torn_tail_older",
			mutate: func(t *testing.T, l layout) { editFile(t, l.path(1), func(b []byte) []byte { return b[:len(b)-5] }) },
			keep:   map[uint64]int{1: 7},
			errSeg: 1,
			errOff: func(l layout) int64 { return l.off(1, 7) },
		},
		{
			name: "zeroed_tail_older",
			mutate: func(t *testing.T, l layout) {
				editFile(t, l.path(1), func(b []byte) []byte { return append(b, make([]byte, 512)...) })
			},
			errSeg: 1,
			errOff: func(l layout) int64 { return l.size[1] },
		},
		{
			name:   "bad_header_older",
			mutate: func(t *testing.T, l layout) { flipBit(t, l.path(2), 3) },
			keep:   map[uint64]int{2: 0},
			errSeg: 2,
			errOff: func(layout) int64 { return 0 },
		},
		{
			name:   "short_file_older",
			mutate: func(t *testing.T, l layout) { editFile(t, l.path(2), func(b []byte) []byte { return b[:20] }) },
			keep:   map[uint64]int{2: 0},
			errSeg: 2,
			errOff: func(layout) int64 { return 0 },
		},
		{
			name: "segment_id_mismatch",
			mutate: func(t *testing.T, l layout) {
				if err := os.Rename(l.path(3), l.path(4)); err != nil {
					t.Fatal(err)
				}
			},
			keep:   map[uint64]int{3: 0, 4: 0},
			errSeg: 4,
			errOff: func(layout) int64 { return 0 },
		},
		{
			name:      "torn_file_header_newest",
			mutate:    func(t *testing.T, l layout) { writeFile(t, l.path(4), []byte("APRONWAL\x01\x00")) },
			truncated: func(layout) int64 { return 10 },
		},
		{
			name:      "empty_newest_file",
			mutate:    func(t *testing.T, l layout) { writeFile(t, l.path(4), nil) },
			truncated: func(layout) int64 { return 0 },
		},
		{
			name:      "zeroed_newest_file",
			mutate:    func(t *testing.T, l layout) { writeFile(t, l.path(4), make([]byte, 4096)) },
			truncated: func(layout) int64 { return 4096 },
		},
		{
			name:   "garbage_newest_file",
			mutate: func(t *testing.T, l layout) { writeFile(t, l.path(4), bytes.Repeat([]byte("garbage!"), 8)) },
			keep:   map[uint64]int{4: 0},
			errSeg: 4,
			errOff: func(layout) int64 { return 0 },
		},
	}
}

// expected returns the records a replay must deliver.
func (tc corruptionCase) expected(l layout, moveCorrupt bool) []rec {
	var want []rec
	for seg := uint64(1); seg <= 3; seg++ {
		if tc.errSeg != 0 && seg > tc.errSeg && !moveCorrupt {
			break
		}
		n := len(l.recs[seg])
		if k, ok := tc.keep[seg]; ok {
			n = k
		}
		want = append(want, l.recs[seg][:n]...)
	}
	return want
}

func checkRecords(t *testing.T, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].off != want[i].off || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("record %d: got segment %d offset %d, want segment %d offset %d (or payload differs)",
				i, got[i].seg, got[i].off, want[i].seg, want[i].off)
		}
	}
}

func TestReplayCorruption(t *testing.T) {
	for _, tc := range corruptionCases() {
		t.Run(tc.name, func(t *testing.T) {
			l := writeTestFiles(t)
			tc.mutate(t, l)
			got, stats, err := replayAll(t, wal.ReplayOptions{Dir: l.dir})
			checkRecords(t, got, tc.expected(l, false))

			if tc.errSeg == 0 {
				if err != nil {
					t.Fatalf("Replay: %v, want success", err)
				}
				if want := tc.truncated(l); stats.TruncatedBytes != want {
					t.Fatalf("truncated %d bytes, want %d", stats.TruncatedBytes, want)
				}
				// Repaired: the next replay finds the same and cuts nothing.
				got, stats, err := replayAll(t, wal.ReplayOptions{Dir: l.dir})
				if err != nil || stats.TruncatedBytes != 0 {
					t.Fatalf("second replay: %+v, %v", stats, err)
				}
				checkRecords(t, got, tc.expected(l, false))
				return
			}

			var cerr *wal.CorruptionError
			if !errors.As(err, &cerr) || !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Replay: %v, want a *CorruptionError", err)
			}
			wantPath := segPath(l.dir, tc.errSeg)
			if cerr.File != wantPath || cerr.Segment != tc.errSeg || cerr.Offset != tc.errOff(l) {
				t.Fatalf("CorruptionError at %s segment %d offset %d, want %s segment %d offset %d",
					cerr.File, cerr.Segment, cerr.Offset, wantPath, tc.errSeg, tc.errOff(l))
			}
			if msg := err.Error(); !strings.Contains(msg, wantPath) || !strings.Contains(msg, "--wal-move-corrupt") {
				t.Fatalf("error message %q does not name the file and the flag", msg)
			}
			if stats.TruncatedBytes != 0 {
				t.Fatalf("corruption truncated %d bytes", stats.TruncatedBytes)
			}
			// Nothing was changed: a second replay fails the same way.
			if _, _, err2 := replayAll(t, wal.ReplayOptions{Dir: l.dir}); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("second replay: %v, want %v", err2, err)
			}

			// MoveCorrupt sets the file aside and keeps its good prefix.
			before, rerr := os.ReadFile(wantPath)
			if rerr != nil {
				t.Fatal(rerr)
			}
			got, stats, err = replayAll(t, wal.ReplayOptions{Dir: l.dir, MoveCorrupt: true})
			if err != nil {
				t.Fatalf("Replay with MoveCorrupt: %v", err)
			}
			checkRecords(t, got, tc.expected(l, true))
			if len(stats.MovedAside) != 1 || stats.MovedAside[0] != wantPath+".corrupt" {
				t.Fatalf("MovedAside = %v", stats.MovedAside)
			}
			aside, rerr := os.ReadFile(wantPath + ".corrupt")
			if rerr != nil || !bytes.Equal(aside, before) {
				t.Fatalf(".corrupt file differs from the corrupt file (%v)", rerr)
			}
			got, stats, err = replayAll(t, wal.ReplayOptions{Dir: l.dir})
			if err != nil || stats.TruncatedBytes != 0 || len(stats.MovedAside) != 0 {
				t.Fatalf("replay after MoveCorrupt: %+v, %v", stats, err)
			}
			checkRecords(t, got, tc.expected(l, true))
			ids, _ := wal.ListSegments(nil, l.dir)
			if ents, _ := os.ReadDir(l.dir); len(ents) != len(ids)+1 {
				t.Fatalf("directory has %d entries after MoveCorrupt, want %d WAL files and one .corrupt", len(ents), len(ids))
			}
		})
	}
}

// TestReplayTornLastRecordAtEveryOffset cuts the last record after each of
// its bytes.
func TestReplayTornLastRecordAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	w := mustCreate(t, wal.Options{Dir: dir}, 5)
	payloads := [][]byte{payloadOf(1, 300), payloadOf(2, 17), payloadOf(3, 20)}
	var last *wal.Pending
	for _, p := range payloads {
		last = w.Append(p)
		if err := last.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(segPath(dir, 5))
	if err != nil {
		t.Fatal(err)
	}
	_, lastOff := last.Position()
	for keep := int64(0); keep < wal.RecordHeaderSize+20; keep++ {
		t.Run(fmt.Sprintf("keep_%02d_bytes", keep), func(t *testing.T) {
			d := t.TempDir()
			writeFile(t, segPath(d, 5), full[:lastOff+keep])
			got, stats, err := replayAll(t, wal.ReplayOptions{Dir: d})
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if len(got) != 2 || stats.TruncatedBytes != keep {
				t.Fatalf("replayed %d records, truncated %d bytes; want 2 and %d", len(got), stats.TruncatedBytes, keep)
			}
			if fi, err := os.Stat(segPath(d, 5)); err != nil || fi.Size() != lastOff {
				t.Fatalf("file not truncated to %d: %v %v", lastOff, fi.Size(), err)
			}
			got, stats, err = replayAll(t, wal.ReplayOptions{Dir: d})
			if err != nil || len(got) != 2 || stats.TruncatedBytes != 0 {
				t.Fatalf("second replay: %d records, %+v, %v", len(got), stats, err)
			}
		})
	}
}

// TestReplayLengthPastEOFAllocatesLittle is etcd #14098: a length field of
// almost 1 GiB in a small file must not make replay allocate it.
func TestReplayLengthPastEOFAllocatesLittle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length uint32
	}{
		{"length_1GiB_minus_1", 1<<30 - 1},
		{"length_max_uint32", 1<<32 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := mustCreate(t, wal.Options{Dir: dir}, 1)
			p := w.Append(payloadOf(1, 1000))
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, off := p.Position()
			putUint32(t, segPath(dir, 1), off, tc.length)

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			got, stats, err := replayAll(t, wal.ReplayOptions{Dir: dir})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if err != nil || len(got) != 0 || stats.TruncatedBytes != 1008 {
				t.Fatalf("replay: %d records, %+v, %v", len(got), stats, err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
				t.Fatalf("replay allocated %d bytes for a %d-byte file", alloc, off+1008)
			}
			if elapsed > 5*time.Second {
				t.Fatalf("replay took %v", elapsed)
			}
		})
	}
}

func TestReplayCallbackError(t *testing.T) {
	l := writeTestFiles(t)
	stop := errors.New("stop here")
	n := 0
	_, err := wal.Replay(wal.ReplayOptions{Dir: l.dir}, func(seg uint64, off int64, p []byte) error {
		n++
		if seg == 2 && off == l.off(2, 4) {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 13 || !strings.Contains(err.Error(), filepath.Base(l.path(2))) {
		t.Fatalf("Replay = %v after %d records", err, n)
	}
	if errors.Is(err, wal.ErrCorrupt) {
		t.Fatal("a callback error reported as corruption")
	}
}

func TestReplayRemovesLeftoverTempFiles(t *testing.T) {
	l := writeTestFiles(t)
	tmp := l.path(3) + ".tmp"
	writeFile(t, tmp, []byte("half-written rewrite"))
	other := filepath.Join(l.dir, "unrelated.tmp")
	writeFile(t, other, nil)
	if _, _, err := replayAll(t, wal.ReplayOptions{Dir: l.dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("leftover %s not removed: %v", tmp, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("unrelated file touched: %v", err)
	}
}

func TestReplayEmptyOrMissingDir(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		recs, stats, err := replayAll(t, wal.ReplayOptions{Dir: dir})
		if err != nil || len(recs) != 0 || stats.Files != 0 {
			t.Fatalf("Replay(%s) = %d records, %+v, %v", dir, len(recs), stats, err)
		}
	}
}
