package catalog

import (
	"sync"
	"sync/atomic"

	"github.com/apron-db/apron/wal"
)

// Catalog is the live catalog. It is safe for concurrent use: readers load
// the current Snapshot without locking; Apply is serialized by a mutex and
// publishes a new snapshot.
type Catalog struct {
	limits Limits
	fs     wal.FS // what Save writes through; nil: the OS
	snap   atomic.Pointer[Snapshot]

	// applyMu serializes Apply so that two changes never build on the
	// same snapshot and lose one another.
	applyMu sync.Mutex

	save struct {
		sync.Mutex
		path    string // last path saved to or loaded from
		version uint64 // version stored at path
		valid   bool
	}
}

// New returns an empty catalog. Zero fields of limits take their default.
func New(limits Limits) *Catalog {
	c := &Catalog{limits: limits.withDefaults()}
	c.snap.Store(emptySnapshot())
	return c
}

func (c *Catalog) fsys() wal.FS {
	if c.fs == nil {
		return wal.OSFS()
	}
	return c.fs
}

// Limits returns the limits in force.
func (c *Catalog) Limits() Limits { return c.limits }

// Snapshot returns the current immutable view.
func (c *Catalog) Snapshot() *Snapshot { return c.snap.Load() }

// Version returns the current catalog version.
func (c *Catalog) Version() uint64 { return c.snap.Load().version }

// Database returns the named database from the current snapshot.
func (c *Catalog) Database(db string) (*Database, bool) { return c.snap.Load().Database(db) }

// Table returns the named table from the current snapshot.
func (c *Catalog) Table(db, table string) (*Table, bool) { return c.snap.Load().Table(db, table) }

// Databases returns all databases sorted by name.
func (c *Catalog) Databases() []*Database { return c.snap.Load().Databases() }

// Tables returns the tables of db sorted by name.
func (c *Catalog) Tables(db string) []*Table { return c.snap.Load().Tables(db) }
