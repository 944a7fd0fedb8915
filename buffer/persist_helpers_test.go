package buffer

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
	"github.com/apron-db/apron/persist"
)

// storeKinds are the stores the persist tests run against.
var storeKinds = []struct {
	name string
	new  func(t *testing.T) objstore.Store
}{
	{"memory", func(t *testing.T) objstore.Store { return objstore.NewMemory() }},
	{"local", func(t *testing.T) objstore.Store {
		s, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func persistConfig(t *testing.T, mem memory.Allocator, store objstore.Store) Config {
	cfg := testConfig(t, mem)
	cfg.Store = store
	cfg.PersistRetryMin = time.Millisecond
	cfg.PersistRetryMax = 20 * time.Millisecond
	cfg.StartupStoreTimeout = 5 * time.Second
	cfg.PersistConcurrency = 2
	return cfg
}

// roll closes the open segment now, as a rollover would.
func roll(t *testing.T, b *WriteBuffer) uint64 {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.mu.open.id
	if err := b.rollLocked(b.cfg.Now(), "test"); err != nil {
		t.Fatal(err)
	}
	return id
}

func isPersisted(b *WriteBuffer, id uint64) bool {
	for _, p := range b.Persisted() {
		if p.ID == id {
			_, err := os.Stat(walFileName(b.walDir, id))
			return os.IsNotExist(err)
		}
	}
	return false
}

// waitFor polls cond for up to 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitAllPersisted waits until no closed segment is left to persist.
func waitAllPersisted(t *testing.T, b *WriteBuffer) {
	t.Helper()
	waitFor(t, "all closed segments persisted", func() bool {
		b.mu.Lock()
		var ids []uint64
		for _, s := range b.mu.closed {
			ids = append(ids, s.id)
		}
		b.mu.Unlock()
		for _, id := range ids {
			if !isPersisted(b, id) {
				return false
			}
		}
		return true
	})
}

// readParquet reads a whole Parquet object back as rows.
func readParquet(t *testing.T, store objstore.Store, name string, mem memory.Allocator) []row {
	t.Helper()
	data := objstoretest.MustGet(t, store, name)
	rec := readParquetBytes(t, data, mem)
	defer rec.Release()
	return rowsOf(t, rec)
}

// readParquetBytes reads a Parquet file into one record batch.
func readParquetBytes(t testing.TB, data []byte, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var recs []arrow.RecordBatch
	for tr.Next() {
		r := tr.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if len(recs) == 1 {
		return recs[0]
	}
	// Concatenate (rare in tests: files under a row group).
	out := concatRecords(t, tbl.Schema(), recs, mem)
	for _, r := range recs {
		r.Release()
	}
	return out
}

func concatRecords(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		var err error
		if len(parts) == 0 {
			cols[i] = array.MakeArrayOfNull(mem, schema.Field(i).Type, 0)
			continue
		}
		if cols[i], err = array.Concatenate(parts, mem); err != nil {
			t.Fatal(err)
		}
	}
	out := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	return out
}

// viewRows reads every row of db.table through a View: buffered segments
// from memory, persisted ones from their Parquet files.
func viewRows(t *testing.T, b *WriteBuffer, table string) []row {
	t.Helper()
	v := b.View()
	defer v.Release()
	tbl, ok := b.Catalog().Table("db", table)
	if !ok {
		return nil
	}
	var out []row
	for _, seg := range v.Buffered {
		for _, c := range seg.Snapshot("db", table) {
			rec, err := Project(c, tbl.ArrowSchema(), b.Allocator())
			c.Rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rowsOf(t, rec)...)
			rec.Release()
		}
	}
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database == "db" && f.Table == table {
				out = append(out, readParquet(t, b.Store(), f.Path, b.Allocator())...)
			}
		}
	}
	return out
}

// checkStoreConsistent checks that every Parquet object is listed by a
// segment file (no orphans), that every listed file exists with its size,
// and that no WAL file of a persisted segment is left.
func checkStoreConsistent(t *testing.T, b *WriteBuffer, store objstore.Store) {
	t.Helper()
	ctx := context.Background()
	listed := map[string]persist.File{}
	for _, ps := range b.Persisted() {
		for _, f := range ps.Files {
			listed[f.Path] = f
		}
		if _, err := os.Stat(walFileName(b.walDir, ps.ID)); !os.IsNotExist(err) {
			t.Errorf("WAL file of persisted segment %d still there (%v)", ps.ID, err)
		}
	}
	objs, err := store.List(ctx, persist.DBsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		f, ok := listed[o.Name]
		if !ok {
			t.Errorf("orphan %s", o.Name)
			continue
		}
		seen[o.Name] = true
		if f.Size != o.Size || f.CRC32C != o.CRC32C {
			t.Errorf("%s: size/crc %d/%08x in the store, %d/%08x in its segment file", o.Name, o.Size, o.CRC32C, f.Size, f.CRC32C)
		}
	}
	for name := range listed {
		if !seen[name] {
			t.Errorf("%s listed by a segment file but missing", name)
		}
	}
}

// checkNoTemp checks, after Close, that no temporary Parquet file is left.
func checkNoTemp(t *testing.T, dataDir string) {
	t.Helper()
	tmp, _ := os.ReadDir(filepath.Join(dataDir, "persist"))
	for _, e := range tmp {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}

var _ io.Reader = (*bytes.Reader)(nil)
