package buffer

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
	"github.com/apron-db/apron/wal/waltest"
)

// TestDiskFaults injects EIO and ENOSPC at every durable step the write
// path takes through its file system, one case at a time, and checks the
// documented outcome: what the caller sees, whether later writes work,
// and what a restart gives back (every acknowledged row exactly once).
//
//	step                        caller sees                      later writes     restart
//	WAL record write            ErrWAL naming the cause          ErrWAL (sticky)  acknowledged rows once
//	WAL fsync                   ErrWAL naming the cause          ErrWAL (sticky)  acknowledged rows once
//	next WAL file at rollover   ErrWAL naming the cause          ErrWAL (sticky)  acknowledged rows once
//	WAL directory sync (roll)   ErrWAL naming the cause          ErrWAL (sticky)  acknowledged rows once
//	catalog file (token change) the error; nothing in force      work             the token is absent
func TestDiskFaults(t *testing.T) {
	type step struct {
		name string
		op   waltest.Op
		// act runs the step that hits op; it returns the error the caller
		// sees.
		act func(b *WriteBuffer, rows []row) error
		// sticky: writes fail until a restart.
		sticky bool
	}
	writeRows := func(b *WriteBuffer, rows []row) error {
		rec := makeRecord(memory.NewGoAllocator(), cpuSchema, rows)
		defer rec.Release()
		_, err := b.Write(context.Background(), "db", "cpu", rec, catalog.WriteOptions{})
		return err
	}
	rollThenWrite := func(b *WriteBuffer, rows []row) error {
		b.mu.Lock()
		err := b.rollLocked(b.cfg.Now(), "test")
		b.mu.Unlock()
		if err != nil {
			return err
		}
		return writeRows(b, rows)
	}
	token := &catalog.Token{ID: "faulty", Hash: sha256.Sum256([]byte("t")), Admin: true, Created: time.Now()}
	changeTokens := func(b *WriteBuffer, _ []row) error {
		return b.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{token}})
	}
	steps := []step{
		{"WAL record write", waltest.OpWrite, writeRows, true},
		{"WAL fsync", waltest.OpSync, writeRows, true},
		{"next WAL file", waltest.OpCreate, rollThenWrite, true},
		{"WAL directory sync", waltest.OpSyncDir, rollThenWrite, true},
		{"catalog file write", waltest.OpWrite, changeTokens, false},
		{"catalog file fsync", waltest.OpSync, changeTokens, false},
		{"catalog file rename", waltest.OpRename, changeTokens, false},
		{"catalog directory sync", waltest.OpSyncDir, changeTokens, false},
	}
	for _, st := range steps {
		for _, cause := range []error{syscall.EIO, syscall.ENOSPC} {
			t.Run(st.name+"/"+cause.Error(), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				cfg := testConfig(t, mem)
				fs := waltest.New(wal.OSFS())
				cfg.WALFS = fs
				b := openBuffer(t, cfg)
				acked := genRows(t0.UnixNano(), 10, 1)
				write(t, b, "cpu", cpuSchema, acked)

				fs.FailNth(st.op, 1, cause)
				err := st.act(b, genRows(t0.UnixNano()+100, 10, 1))
				if !errors.Is(err, cause) {
					t.Fatalf("%s failing with %v: the caller got %v, want an error naming the cause", st.name, cause, err)
				}
				if st.sticky && !errors.Is(err, ErrWAL) {
					t.Fatalf("got %v, want ErrWAL", err)
				}
				later := genRows(t0.UnixNano()+200, 10, 1)
				err = writeRows(b, later)
				switch {
				case st.sticky && !errors.Is(err, ErrWAL):
					t.Fatalf("a write after the failure: %v, want ErrWAL until a restart", err)
				case st.sticky:
					select {
					case <-b.WALFailed():
					default:
						t.Fatal("WALFailed not closed after a WAL failure")
					}
				case err != nil:
					t.Fatalf("a write after a failed catalog write: %v, want it to work", err)
				default:
					acked = append(acked, later...)
				}
				if _, ok := b.Catalog().Snapshot().Token("faulty"); ok {
					t.Fatal("a token change whose file write failed is in force")
				}
				b.Close()

				cfg.WALFS = wal.OSFS()
				b = openBuffer(t, cfg)
				defer b.Close()
				seen := map[string]int{}
				for _, r := range readRows(t, b, "cpu") {
					seen[r.String()]++
				}
				for _, r := range acked {
					if seen[r.String()] != 1 {
						t.Fatalf("after restart, acknowledged row %s seen %d times", r, seen[r.String()])
					}
				}
				if _, ok := b.Catalog().Snapshot().Token("faulty"); ok && !st.sticky {
					// The write failed before the rename was known durable;
					// the file may hold it (an EIO at the directory sync
					// after the rename). Either is a consistent catalog.
					if !strings.Contains(st.name, "directory") {
						t.Fatal("a token whose catalog write failed came back at restart")
					}
				}
			})
		}
	}
}

// faultyTemp makes the persister's temporary files (persist.Config.
// CreateTemp) with os.CreateTemp, and fails their creation or their
// writes with cause while failing is set.
type faultyTemp struct {
	cause   error
	create  bool // fail the creation, else the writes
	failing atomic.Bool
	hits    atomic.Int64
}

func (f *faultyTemp) createTemp(dir, pattern string) (persist.TempHandle, error) {
	if f.create && f.failing.Load() {
		f.hits.Add(1)
		return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, pattern), Err: f.cause}
	}
	file, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultyTempFile{File: file, f: f}, nil
}

type faultyTempFile struct {
	*os.File
	f *faultyTemp
}

func (t *faultyTempFile) Write(p []byte) (int, error) {
	if !t.f.create && t.f.failing.Load() {
		t.f.hits.Add(1)
		return 0, &os.PathError{Op: "write", Path: t.Name(), Err: t.f.cause}
	}
	return t.File.Write(p)
}

// TestPersistTempFileFaults: EIO and ENOSPC at the persister's temporary
// Parquet files (<data-dir>/persist, written before the upload), at their
// creation and at their writes. They are not a durable step (the WAL
// holds the rows until the segment file is in the store), so the outcome
// is the persist's, not the writer's:
//
//	step                        caller sees     persist                                      restart
//	temp file create            nothing: works  step fails, counted, logged, retried;        every row once
//	temp file write             nothing: works  PersistHealth names the cause; converges     every row once
//	                                            once the cause is gone; no temp file left
func TestPersistTempFileFaults(t *testing.T) {
	for _, create := range []bool{true, false} {
		for _, cause := range []error{syscall.EIO, syscall.ENOSPC} {
			name := map[bool]string{true: "temp file create", false: "temp file write"}[create] + "/" + cause.Error()
			t.Run(name, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				store := objstore.NewMemory()
				defer store.Close()
				cfg := persistConfig(t, mem, store)
				ft := &faultyTemp{cause: cause, create: create}
				cfg.PersistCreateTemp = ft.createTemp
				b := openBuffer(t, cfg)
				acked := genRows(t0.UnixNano(), 50, 1)
				write(t, b, "cpu", cpuSchema, acked)

				ft.failing.Store(true)
				id := roll(t, b)
				waitFor(t, "failed persist attempts", func() bool {
					h := b.PersistHealth()
					return ft.hits.Load() >= 2 && h.Failures >= 2 && h.LastErr != nil
				})
				h := b.PersistHealth()
				if !strings.Contains(h.LastErr.Error(), cause.Error()) || h.Waiting != 1 {
					t.Fatalf("health while the temp files fail: %+v, want the segment waiting and the cause named", h)
				}
				if n := testutil.ToFloat64(b.metrics.persistFailures); n < 2 {
					t.Fatalf("apron_persist_failures_total = %v, want every failed attempt", n)
				}
				// Writes go on: the WAL is fine.
				more := genRows(t0.UnixNano()+1000, 50, 1)
				write(t, b, "cpu", cpuSchema, more)
				acked = append(acked, more...)
				if isPersisted(b, id) {
					t.Fatal("persisted while its temp files failed")
				}

				ft.failing.Store(false)
				waitFor(t, "the segment persisted once the cause is gone", func() bool { return isPersisted(b, id) })
				waitFor(t, "the report cleared", func() bool { return b.PersistHealth().LastErr == nil })
				checkStoreConsistent(t, b, store)
				b.Close()
				checkNoTemp(t, cfg.DataDir)

				b = openBuffer(t, cfg)
				defer b.Close()
				seen := map[string]int{}
				for _, r := range viewRows(t, b, "cpu") {
					seen[r.String()]++
				}
				for _, r := range acked {
					if seen[r.String()] != 1 {
						t.Fatalf("after restart, row %s seen %d times", r, seen[r.String()])
					}
				}
				if len(seen) != len(acked) {
					t.Fatalf("after restart, %d rows, want %d", len(seen), len(acked))
				}
			})
		}
	}
}
