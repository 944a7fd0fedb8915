package persist

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

func openStore(t *testing.T, objects objstore.Store, dataDir string) *Store {
	t.Helper()
	s, err := Open(Config{Objects: objects, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWriterID: a data dir keeps its writer id; Open empties persist/.
func TestWriterID(t *testing.T) {
	dir := t.TempDir()
	objects := objstore.NewMemory()
	defer objects.Close()
	s := openStore(t, objects, dir)
	if len(s.WriterID()) != 32 {
		t.Fatalf("writer id %q", s.WriterID())
	}
	left := filepath.Join(dir, "persist", "part-1.parquet")
	if err := os.WriteFile(left, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := openStore(t, objects, dir); again.WriterID() != s.WriterID() {
		t.Fatalf("writer id %q, then %q", s.WriterID(), again.WriterID())
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("temporary file left by an earlier run still there (%v)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "writer-id"), []byte("short\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Objects: objects, DataDir: dir}); err == nil || !strings.Contains(err.Error(), "not a writer id") {
		t.Fatalf("Open with a bad writer-id file: %v", err)
	}
}

// TestPutImmutable: an upload that finds its object there with the same
// bytes is done; with other bytes, it is an error for a catalog or segment
// file, and the Parquet file (an orphan) is replaced.
func TestPutImmutable(t *testing.T) {
	ctx := context.Background()
	objects := objstore.NewMemory()
	defer objects.Close()
	s := openStore(t, objects, t.TempDir())

	if err := s.PutCatalog(ctx, 3, []byte("catalog 3")); err != nil {
		t.Fatal(err)
	}
	if s.CatalogVersion() != 3 {
		t.Fatalf("CatalogVersion %d, want 3", s.CatalogVersion())
	}
	if err := s.PutCatalog(ctx, 3, []byte("catalog 3")); err != nil {
		t.Fatalf("the same catalog again: %v", err)
	}
	if err := s.PutCatalog(ctx, 3, []byte("another 3")); err == nil || !strings.Contains(err.Error(), "exists with other content") {
		t.Fatalf("another catalog of the same version: %v", err)
	}
	if err := s.PutSegmentFile(ctx, 5, []byte("segment 5")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSegmentFile(ctx, 5, []byte("segment 5")); err != nil {
		t.Fatalf("the same segment file again: %v", err)
	}
	if err := s.PutSegmentFile(ctx, 5, []byte("segment 5'")); err == nil {
		t.Fatal("another segment file of the same segment was taken")
	}

	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rows := genRows(t0.UnixNano(), 300, 1)
	chunks := makeChunks(t, mem, batch{rows: rows})
	defer releaseChunks(chunks)
	p := Part{Segment: 5, Database: "db", Table: "cpu", Day: t0.Unix() / 86400, Schema: cpuTable(false), Chunks: chunks}
	name := p.Object()
	if err := objects.Put(ctx, name, strings.NewReader("orphan"), 6, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tmp, err := s.WriteTemp(ctx, p, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Remove()
	for range 2 { // replaces the orphan, then finds its own upload
		if err := s.UploadParquet(ctx, tmp); err != nil {
			t.Fatal(err)
		}
	}
	f := tmp.File()
	a, err := objects.Attributes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != name || f.URI != objects.URI(name) || a.Size != f.Size || a.CRC32C != f.CRC32C || f.Rows != 300 ||
		f.MinTime != rows[0].Time || f.MaxTime != rows[299].Time || f.Partition != "2026-11-29" {
		t.Fatalf("file %+v, object %+v", f, a)
	}
	rec := readParquetBytes(t, objstoretest.MustGet(t, objects, name), mem)
	got := rowsOf(t, rec)
	rec.Release()
	assertRows(t, got, rows)
}

// TestStartup: LoadCatalog installs the newest catalog when the local one
// is older or missing, LoadSegments reads the segment files in id order,
// and RemoveOrphans deletes the Parquet files none lists.
func TestStartup(t *testing.T) {
	ctx := context.Background()
	objects := objstore.NewMemory()
	defer objects.Close()
	dir := t.TempDir()
	s := openStore(t, objects, dir)
	for v := range uint64(3) {
		if err := s.PutCatalog(ctx, v+1, []byte{'0' + byte(v+1)}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(name string) {
		t.Helper()
		if err := objects.Put(ctx, name, strings.NewReader(name), int64(len(name)), objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	listed := []string{ParquetObject("db", "cpu", 1, 2), ParquetObject("db", "cpu", 1, 1)}
	orphan := ParquetObject("db", "cpu", 1, 3)
	pendingFile := ParquetObject("db", "cpu", 1, 4) // of a segment still in the WAL
	merged := CompactedObject("db", "cpu", "1970-01-02", 7)
	// Uploads note their names in the journal of unlisted objects first;
	// stray is in the store without that (another writer's upload in
	// flight, or a file an older version left): startup leaves it alone
	// unless asked to list everything.
	stray := ParquetObject("db", "cpu", 1, 5)
	for _, name := range append(slices.Clone(listed), orphan, pendingFile, merged) {
		if err := s.NoteUnlisted(name); err != nil {
			t.Fatal(err)
		}
		put(name)
	}
	put(stray)
	for i, name := range listed {
		id := uint64(2 - i)
		data, err := EncodeSegmentFile(Segment{ID: id, Files: []File{{Path: name, Size: int64(len(name))}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutSegmentFile(ctx, id, data); err != nil {
			t.Fatal(err)
		}
	}
	put(SegmentsPrefix + "notes.txt")

	s = openStore(t, objects, dir)
	catPath := filepath.Join(dir, "catalog.json")
	name, err := s.LoadCatalog(ctx, catPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	if name != CatalogObject(3) || s.CatalogVersion() != 3 {
		t.Fatalf("LoadCatalog: %q, version %d", name, s.CatalogVersion())
	}
	if data, err := os.ReadFile(catPath); err != nil || string(data) != "3" {
		t.Fatalf("installed catalog %q (%v)", data, err)
	}
	if name, err := s.LoadCatalog(ctx, catPath, 3); err != nil || name != "" {
		t.Fatalf("LoadCatalog with the local catalog as new: %q, %v", name, err)
	}
	segs, err := s.LoadSegments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].ID != 1 || segs[1].ID != 2 || segs[0].Files[0].URI != objects.URI(listed[1]) {
		t.Fatalf("segments %+v", segs)
	}
	// RemoveOrphans lists nothing: it finds the orphans in the journal.
	counted := objstoretest.NewFaulty(objects)
	s, err = Open(Config{Objects: counted, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveOrphans(ctx, segs, map[uint64]bool{4: true, 7: true}); err != nil {
		t.Fatal(err)
	}
	for _, op := range counted.Log() {
		if strings.HasPrefix(op, "list") {
			t.Fatalf("RemoveOrphans made a listing: %v", counted.Log())
		}
	}
	if got := s.UnlistedOf(4); !slices.Equal(got, []string{pendingFile}) {
		t.Fatalf("segment 4's files kept in the journal: %q, want %q", got, pendingFile)
	}
	if got := s.UnlistedOf(7); len(got) != 0 {
		t.Fatalf("segment 7's files in the journal: %q, want none", got)
	}
	listed = append(listed, pendingFile) // kept for the retry of segment 4's persist
	stored := func() []string {
		t.Helper()
		objs, err := objects.List(ctx, DBsPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.Name)
		}
		slices.Sort(names)
		return names
	}
	slices.Sort(listed)
	if got, want := stored(), append(slices.Clone(listed), stray); !slices.Equal(got, want) {
		t.Fatalf("Parquet files %q after RemoveOrphans, want %q", got, want)
	}
	// The journal keeps the pending segment's file (its retry settles it)
	// and nothing else, across a reopen.
	s = openStore(t, objects, dir)
	if got := s.Unlisted(); !slices.Equal(got, []string{pendingFile}) {
		t.Fatalf("journal of unlisted objects %q after RemoveOrphans, want %q", got, pendingFile)
	}
	// A full scan deletes stray too, and puts the file of a pending
	// segment that only the listing found (no journal named it) in the
	// journal, for that segment's retry.
	strayPending := ParquetObject("db", "cpu", 1, 6)
	put(strayPending)
	full, err := Open(Config{Objects: objects, DataDir: dir, FullOrphanScan: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := full.RemoveOrphans(ctx, segs, map[uint64]bool{4: true, 6: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := stored(), append(slices.Clone(listed), strayPending); !slices.Equal(got, want) {
		t.Fatalf("Parquet files %q after a full orphan scan, want %q", got, want)
	}
	if got := openStore(t, objects, dir).Unlisted(); !slices.Equal(got, []string{pendingFile, strayPending}) {
		t.Fatalf("journal after a full orphan scan: %q, want %q and %q", got, pendingFile, strayPending)
	}
}

func TestIndex(t *testing.T) {
	var x Index
	if x.Segments() != nil || x.Without(nil) != nil {
		t.Fatal("the zero Index is not empty")
	}
	x.Add(Segment{ID: 3}, Segment{ID: 1})
	x.Add(Segment{ID: 2})
	ids := func(segs []Segment) []uint64 {
		var out []uint64
		for _, s := range segs {
			out = append(out, s.ID)
		}
		return out
	}
	if got := ids(x.Segments()); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("Segments: %v", got)
	}
	if got := ids(x.Without(map[uint64]bool{2: true})); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("Without(2): %v", got)
	}
}
