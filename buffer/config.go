package buffer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	"github.com/apron-db/apron/wal"
)

// Config configures a WriteBuffer. Flags of `apron serve` map onto it in
// cmd/apron only.
type Config struct {
	// DataDir holds the catalog file and the wal/ directory.
	DataDir string
	// SegmentDuration is how long the open segment takes writes before it
	// rolls over.
	SegmentDuration time.Duration
	// MemLimit bounds the bytes buffered in memory, open and closed
	// segments together. The open segment rolls over at half of it, so that
	// a closed segment can be persisted while the next one fills; writes
	// past it wait for room up to FullWait while closed segments are being
	// persisted, and are refused with ErrBufferFull after that, or at once
	// when memory is not coming back (full_wait.go).
	MemLimit int64
	// FullWait is how long a write waits for room at MemLimit while closed
	// segments are being persisted (--buffer-full-wait); 0 refuses it at
	// once.
	FullWait time.Duration
	// WriteSlowdown paces writes from seven eighths of MemLimit while a
	// segment is being persisted, so that they slow down rather than stop
	// at the limit (--buffer-slowdown, slowdown.go).
	WriteSlowdown bool
	// WALSync says whether a write waits for fsync of its WAL record.
	WALSync wal.SyncMode
	// WALMoveCorrupt moves aside a WAL file with a bad record in its middle
	// instead of refusing to start (see wal.ReplayOptions).
	WALMoveCorrupt bool
	// Limits bound the catalog.
	Limits catalog.Limits
	// ChunkRows is the number of rows at which a partition's open chunk is
	// sealed into an immutable record batch.
	ChunkRows int
	// MaxValueSize bounds one string or binary value of a write, in bytes
	// (--max-value-size); 0 means no limit. Clients read rows back in
	// gRPC messages of at most 4 to 16 MiB by default: a bigger value
	// could be written but never read.
	MaxValueSize int64

	// Store is where closed segments are persisted (doc.go). nil disables
	// persistence: closed segments then stay in memory and in the WAL.
	// The buffer does not close it.
	Store objstore.Store
	// PersistConcurrency is how many Parquet files are written and uploaded
	// at once (--persist-concurrency).
	PersistConcurrency int
	// Cores is the most goroutines Parquet encoding (persists and
	// compactions together) takes at once, one fewer while writes come in
	// and memory is plentiful (persist.Config.Cores); 0 means GOMAXPROCS.
	Cores int
	// ReleasePersisted drops a segment from memory once it is persisted;
	// readers then find its rows in the store (see View). When false,
	// persisted segments stay in memory (and count against MemLimit), but
	// their WAL file is deleted all the same.
	ReleasePersisted bool

	// Retention is the default retention of a database that has none of
	// its own (catalog.Database.Retention); 0 keeps rows forever
	// (retention.go).
	Retention time.Duration
	// SweepInterval is how often the persister looks for persisted files
	// to delete (expired ones; those of dropped tables it is told of).
	SweepInterval time.Duration
	// CompactionInterval is how often the persister looks for persisted
	// files to merge (compact.go); 0 turns compaction off.
	CompactionInterval time.Duration
	// CompactionMinFiles is how many files of one table and day make a
	// compaction.
	CompactionMinFiles int
	// CompactionShare is the most of a core's time a compaction takes
	// while writes arrive, and its share of the persister's time while
	// segments keep waiting (compact_pace.go), in (0, 1]: 0 is the
	// default, DefaultCompactionShare; 1 never holds it back.
	CompactionShare float64
	// PersistRetryMin and PersistRetryMax bound the backoff between
	// attempts of a failed persist step (exponential, with jitter; retried
	// until Close).
	PersistRetryMin, PersistRetryMax time.Duration
	// PersistAttemptTimeout bounds one attempt of one object store request
	// of a persist (an upload that hangs, a store that stopped answering):
	// this long, plus a second per MiB uploaded (so that a large file on a
	// slow link is not cut off), then the attempt fails, is counted and
	// logged, and is retried.
	PersistAttemptTimeout time.Duration
	// PersistCreateTemp, if set, makes the temporary Parquet files of
	// persisting and compacting (persist.Config.CreateTemp): tests inject
	// I/O errors with it. nil is os.CreateTemp.
	PersistCreateTemp func(dir, pattern string) (persist.TempHandle, error)
	// StartupStoreTimeout bounds how long Open retries the object store
	// (listing catalogs, segment files and orphans) before failing.
	StartupStoreTimeout time.Duration
	// FullOrphanScan makes startup list every object under dbs/ to find
	// the unlisted Parquet files to delete, besides those the data dir's
	// journal names (persist.Config.FullOrphanScan).
	FullOrphanScan bool

	// ReplayProgress, when set, is updated while Open replays the WAL, so
	// that another goroutine can report how far it has come.
	ReplayProgress *ReplayProgress

	// WALRemovePace is how the WAL file of a persisted segment is
	// shrunk before it is removed, so that freeing its blocks does not
	// stall the WAL's fsyncs (wal.RemovePaced). DefaultConfig sets
	// wal.DefaultRemovePace; the zero value removes files at once.
	WALRemovePace wal.RemovePace

	WALFS      wal.FS // nil: the OS file system
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Allocator  memory.Allocator
	// ChunkAllocator is where sealed chunks' memory comes from, one
	// block per chunk (sealed.go): the server's is internal/offheap's,
	// outside the Go heap. nil: the Go heap, like open chunks.
	ChunkAllocator memory.Allocator
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns the configuration `apron serve` starts with.
func DefaultConfig() Config {
	return Config{
		DataDir:         "./apron-data",
		SegmentDuration: time.Hour,
		MemLimit:        2 << 30,
		FullWait:        time.Minute,
		WriteSlowdown:   true,
		WALSync:         wal.SyncFsync,
		WALRemovePace:   wal.DefaultRemovePace,
		Limits:          catalog.DefaultLimits(),
		ChunkRows:       8192,
		MaxValueSize:    DefaultMaxValueSize,

		PersistConcurrency:    4,
		PersistRetryMin:       100 * time.Millisecond,
		PersistRetryMax:       30 * time.Second,
		StartupStoreTimeout:   2 * time.Minute,
		PersistAttemptTimeout: 30 * time.Second,
		SweepInterval:         time.Minute,
		CompactionInterval:    time.Minute,
		CompactionMinFiles:    4,
	}
}

// DefaultMaxValueSize is the MaxValueSize `apron serve` starts with: 8 MiB,
// under the 16 MiB message limit of the ADBC Flight SQL driver and of
// pyarrow (the Flight SQL JDBC driver's is larger) with room for the rest
// of a row.
const DefaultMaxValueSize = 8 << 20

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is empty (--data-dir)"))
	}
	if c.SegmentDuration < time.Second {
		errs = append(errs, fmt.Errorf("segment duration %s is under 1s (--segment-duration)", c.SegmentDuration))
	}
	if c.MemLimit < 1<<20 {
		errs = append(errs, fmt.Errorf("buffer memory limit %d bytes is under 1 MiB (--buffer-mem-limit)", c.MemLimit))
	}
	if c.MaxValueSize < 0 {
		errs = append(errs, fmt.Errorf("max value size %d bytes is negative (--max-value-size)", c.MaxValueSize))
	}
	if c.ChunkRows < 1 {
		errs = append(errs, fmt.Errorf("chunk rows %d must be positive", c.ChunkRows))
	}
	if c.CompactionShare < 0 || c.CompactionShare > 1 || c.CompactionShare != c.CompactionShare {
		errs = append(errs, fmt.Errorf("compaction CPU share %g must be in (0, 1] (--compaction-cpu-share)", c.CompactionShare))
	}
	if c.Store != nil {
		if c.PersistConcurrency < 1 {
			errs = append(errs, fmt.Errorf("persist concurrency %d must be positive (--persist-concurrency)", c.PersistConcurrency))
		}
		if c.PersistRetryMin <= 0 || c.PersistRetryMax < c.PersistRetryMin {
			errs = append(errs, fmt.Errorf("persist retry backoff [%s, %s] must be positive and ordered", c.PersistRetryMin, c.PersistRetryMax))
		}
		if c.PersistAttemptTimeout <= 0 {
			errs = append(errs, fmt.Errorf("persist attempt timeout %s must be positive (--persist-attempt-timeout)", c.PersistAttemptTimeout))
		}
		if c.StartupStoreTimeout <= 0 {
			errs = append(errs, fmt.Errorf("startup store timeout %s must be positive", c.StartupStoreTimeout))
		}
	}
	if c.Limits.MaxDatabases < 1 || c.Limits.MaxTables < 1 || c.Limits.MaxColumnsPerTable < 2 {
		errs = append(errs, fmt.Errorf("limits %+v: each must be positive, and a table needs room for time and one column", c.Limits))
	}
	return errors.Join(errs...)
}

// DefaultGOGC is the Go GC target `apron serve` runs with (--gogc), Go's
// default. Alone it would let the heap grow to twice the live data, which
// is mostly this buffer: the process is held near the buffer's memory by
// the soft memory limit instead (DefaultGCMemoryLimit), under which the
// GC runs more often only as the heap nears it.
//
// It was 15, which bounded the heap at 1.15x the live data (a 1 GB segment
// persisted with peak RSS 1.46-1.48x its buffered bytes), but collected
// so often that writes paid for it: with one writer of 1,000-row batches
// while a segment persisted, a trace showed its goroutines in GC mark
// assists of up to 506 ms, and BenchmarkAckWhilePersisting (128 MiB
// segment, no fsync, 2 cores) counted 27-33 collections and 52-361 ms of
// assist CPU during the persist at 15, 6-9 and 6-46 ms at 100 with the
// limit. BenchmarkPersist runs under it.
const DefaultGOGC = 100

// DefaultGCMemoryLimit is the Go soft memory limit (debug.SetMemoryLimit)
// `apron serve` sets for a buffer of memLimit bytes (--gc-memory-limit
// auto): the buffer, plus half of it or 256 MiB, whichever is more, for
// everything else: a persist's encoding takes up to ~0.5x the segment
// (BenchmarkPersist), and a segment is at most half the buffer; decoded
// writes and query results on their way out take the rest. Under it the
// GC runs at GOGC's pace; as the heap nears it, more often, so that the
// heap stays about there. At a full buffer that is about where GOGC=15
// held it (1.15x of the buffer plus a persist's working set). With
// ChunkAllocator outside the Go heap (the server's default), sealed
// chunks do not count toward it: it then binds only if the rest of the
// heap nears it.
func DefaultGCMemoryLimit(memLimit int64) int64 {
	return memLimit + max(memLimit/2, 256<<20)
}
