package persist

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/wal"
)

// Store is one data dir's persisted side in an object store: it names
// objects (layout.go), uploads them by the rules of the persist protocol
// (upload.go) and reads them back at startup (startup.go). It decides
// nothing: the buffer's persister chooses what to persist and when, and
// retries each step. Safe for concurrent use.
type Store struct {
	objects objstore.Store
	log     *slog.Logger
	// tmpDir is <data-dir>/persist: Parquet files being written.
	tmpDir string
	// createTempFn is Config.CreateTemp.
	createTempFn func(dir, pattern string) (TempHandle, error)
	// slots bounds the goroutines encoding Parquet (encode_slots.go).
	slots *encodeSlots
	// writerID names this data dir in the segment files it persists, so
	// that startup can tell its own segments from another server's.
	writerID string
	retry    func(ctx context.Context, what string, fn func() error) error
	// catVersion is the newest catalog version in the store, as far as
	// this server knows: the newest listed at startup, then each upload.
	catVersion atomic.Uint64
	// nextGen is the generation of the next compaction (compaction.go);
	// the persister's.
	nextGen uint64
	// unlisted is the journal of the objects that may be in the store
	// unlisted (unlisted.go).
	unlisted *unlistedJournal
	// fullOrphanScan is Config.FullOrphanScan.
	fullOrphanScan bool
}

// Config configures a Store.
type Config struct {
	// Objects is the object store. The Store does not close it.
	Objects objstore.Store
	// DataDir holds the writer-id file and persist/, the temporary
	// Parquet files.
	DataDir string
	Logger  *slog.Logger
	// Retry runs fn until it succeeds or ctx ends; what names the attempt
	// for logs and errors. The startup steps (LoadCatalog, LoadSegments,
	// RemoveOrphans) run each store request through it; nil runs it once.
	// The other steps make one attempt: their caller retries them.
	Retry func(ctx context.Context, what string, fn func() error) error
	// CreateTemp, if set, makes the temporary files of persisting and
	// compacting (in <data-dir>/persist) instead of os.CreateTemp: tests
	// inject I/O errors with it.
	CreateTemp func(dir, pattern string) (TempHandle, error)
	// EncodeSlots is how many goroutines encode Parquet at once across
	// every persist and compaction while BoundEncoding says so
	// (encode_slots.go); 0 means one fewer than Cores, at least one.
	EncodeSlots int
	// Cores is how many goroutines encode Parquet at once otherwise: the
	// cores the server computes on, which may be fewer than GOMAXPROCS
	// (encode_slots.go says why); 0 means GOMAXPROCS.
	Cores int
	// BoundEncoding says whether the encoding is bound to EncodeSlots,
	// on threads of lower priority (encode_nice.go), now; nil: always.
	BoundEncoding func() bool
	// FS is the file system of the journal of unlisted objects in DataDir
	// (unlisted.go): the WAL's, so that its power-loss tests cover it;
	// nil is the OS's.
	FS wal.FS
	// FullOrphanScan makes RemoveOrphans also list every object under
	// dbs/ and delete the Parquet files no listing names, as it did
	// before the journal: for a data dir of an older version, or one
	// whose journal was lost. It takes a request per 1,000 objects.
	FullOrphanScan bool
}

// TempHandle is an open temporary file, as *os.File is one.
type TempHandle interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.Seeker
	io.Closer
	Name() string
}

// createTemp makes a temporary file in <data-dir>/persist.
func (s *Store) createTemp(pattern string) (TempHandle, error) {
	if s.createTempFn != nil {
		return s.createTempFn(s.tmpDir, pattern)
	}
	return os.CreateTemp(s.tmpDir, pattern)
}

// Open returns the Store of cfg.DataDir: it reads the data dir's writer id
// (making it at the first use) and its journal of unlisted objects, and
// empties <data-dir>/persist of the temporary files of an earlier run. It
// does not read the store.
func Open(cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, _ string, fn func() error) error { return fn() }
	}
	if cfg.FS == nil {
		cfg.FS = wal.OSFS()
	}
	s := &Store{objects: cfg.Objects, log: cfg.Logger, retry: cfg.Retry, createTempFn: cfg.CreateTemp,
		slots: newEncodeSlots(cfg.EncodeSlots, cfg.Cores, cfg.BoundEncoding), fullOrphanScan: cfg.FullOrphanScan}
	id, err := writerID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s.writerID = id
	if s.unlisted, err = openUnlisted(cfg.FS, cfg.DataDir); err != nil {
		return nil, err
	}
	s.tmpDir = filepath.Join(cfg.DataDir, "persist")
	if err := os.RemoveAll(s.tmpDir); err != nil {
		return nil, fmt.Errorf("persist: clearing %s: %w", s.tmpDir, err)
	}
	if err := os.MkdirAll(s.tmpDir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	return s, nil
}

// Objects is the object store.
func (s *Store) Objects() objstore.Store { return s.objects }

// WriterID is the id of the data dir, which the segment files it persists
// carry (Segment.WriterID).
func (s *Store) WriterID() string { return s.writerID }

// CatalogVersion is the newest catalog version in the store, 0 if none: the
// newest LoadCatalog found, or the last PutCatalog stored.
func (s *Store) CatalogVersion() uint64 { return s.catVersion.Load() }

// writeFileAtomic writes path so that a crash leaves the old or the new
// file: temp file, fsync, rename, fsync the directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// writerID returns the id of the data dir, made at its first use with
// persistence: <data-dir>/writer-id, 16 random bytes in hex.
func writerID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "writer-id")
	data, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if len(id) != 32 {
			return "", fmt.Errorf("persist: %s holds %q, not a writer id (32 hex digits)", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("persist: reading %s: %w", path, err)
	}
	var raw [16]byte
	if _, err := crand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := writeFileAtomic(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("persist: writing %s: %w", path, err)
	}
	return id, nil
}
