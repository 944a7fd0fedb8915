package persist

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apron-db/apron/objstore"
)

// slowStore answers each Get after latency, as a remote store does, and
// fails the Get of failName; it counts the Gets running at once.
type slowStore struct {
	objstore.Store
	latency       time.Duration
	failName      string
	running, peak atomic.Int64
}

func (s *slowStore) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	select {
	case <-time.After(s.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if name == s.failName {
		return nil, errors.New("injected: the store failed this read")
	}
	return s.Store.Get(ctx, name)
}

func putSegments(t testing.TB, s *Store, n int) {
	t.Helper()
	for id := uint64(1); id <= uint64(n); id++ {
		data, err := EncodeSegmentFile(Segment{ID: id, CatalogVersion: 1, FirstSequence: id, LastSequence: id, Rows: int64(id),
			Files: []File{{Path: ParquetObject("db", "cpu", 20000, id), Size: 1, Rows: int64(id), Database: "db", Table: "cpu", Partition: "2024-10-04"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutSegmentFile(context.Background(), id, data); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadSegmentsReadsAtOnce: segment files are read several at a time
// and come back whole, in id order; one that cannot be read fails the
// load.
func TestLoadSegmentsReadsAtOnce(t *testing.T) {
	objects := objstore.NewMemory()
	defer objects.Close()
	slow := &slowStore{Store: objects, latency: 5 * time.Millisecond}
	s := openStore(t, slow, t.TempDir())
	const n = 200
	putSegments(t, s, n)
	segs, err := s.LoadSegments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != n {
		t.Fatalf("%d segments, want %d", len(segs), n)
	}
	for i, seg := range segs {
		if seg.ID != uint64(i+1) || seg.Rows != int64(i+1) || len(seg.Files) != 1 || seg.Files[0].URI == "" {
			t.Fatalf("segment %d: %+v", i, seg)
		}
	}
	if p := slow.peak.Load(); p < 2 || p > listingReads {
		t.Fatalf("%d segment files read at once, want 2 to %d", p, listingReads)
	}
	slow.failName = SegmentObject(77)
	if _, err := s.LoadSegments(context.Background()); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("a segment file that cannot be read: %v", err)
	}
}

// BenchmarkLoadSegments: startup's read of 720 segment files (a month of
// one-hour segments) from a store answering each read in 20 ms.
func BenchmarkLoadSegments(b *testing.B) {
	objects := objstore.NewMemory()
	defer objects.Close()
	slow := &slowStore{Store: objects, latency: 20 * time.Millisecond}
	s, err := Open(Config{Objects: slow, DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	putSegments(b, s, 720)
	b.ResetTimer()
	for range b.N {
		if segs, err := s.LoadSegments(context.Background()); err != nil || len(segs) != 720 {
			b.Fatal(len(segs), err)
		}
	}
}

// TestRemoveOrphansOtherWriter: when the segment files show another data
// dir writing to the same location, no unlisted file is deleted (it may
// be that server's upload in flight).
func TestRemoveOrphansOtherWriter(t *testing.T) {
	ctx := context.Background()
	objects := objstore.NewMemory()
	defer objects.Close()
	s := openStore(t, objects, t.TempDir())
	unlisted := ParquetObject("db", "cpu", 1, 9)
	if err := s.NoteUnlisted(unlisted); err != nil {
		t.Fatal(err)
	}
	if err := objects.Put(ctx, unlisted, strings.NewReader("x"), 1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	mine := Segment{ID: 1, WriterID: s.WriterID()}
	other := Segment{ID: 2, WriterID: "0123456789abcdef0123456789abcdef"}
	if err := s.RemoveOrphans(ctx, []Segment{mine, other}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := objects.Attributes(ctx, unlisted); err != nil {
		t.Fatalf("an unlisted file was deleted while another writer shares the store: %v", err)
	}
	if err := s.RemoveOrphans(ctx, []Segment{mine}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := objects.Attributes(ctx, unlisted); err == nil {
		t.Fatal("with no other writer, the orphan was kept")
	}
}
