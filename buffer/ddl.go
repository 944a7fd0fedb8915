package buffer

import (
	"fmt"

	"github.com/apron-db/apron/catalog"
)

// DDL: CREATE and DROP of tables and databases. Each is durable in the
// data dir's catalog file before it returns (catalog/ddl.go), then in the
// object store, where the persister uploads the new catalog.
//
// A drop runs under mu, so it is ordered with writes: a write planned
// before it is in a segment the drop hides, one planned after it creates
// a new table. The open segment is rolled over first if it has taken any
// write since it opened, so that every row of the dropped table is in a
// segment below the open one, and the drop hides exactly those. A
// dropped table's rows then stay where they are, unseen: Views
// leave them out (View.Chunks, and the persisted files of a View), the
// persister does not write them, and the WAL replay skips their records.
// A query that took its View before the drop still reads them, so it
// finishes with the rows of its snapshot.

// CreateDatabase creates a database. created is false if it existed and
// ifNotExists is set.
func (b *WriteBuffer) CreateDatabase(db string, ifNotExists bool) (created bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	created, err = b.cat.CreateDatabase(b.catPath, db, ifNotExists)
	if created {
		b.kickPersister()
	}
	return created, err
}

// CreateTable creates a table with the given columns (one of them time).
func (b *WriteBuffer) CreateTable(db, table string, cols []catalog.ColumnDef, ifNotExists bool) (created bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	created, err = b.cat.CreateTable(b.catPath, db, table, cols, ifNotExists)
	if created {
		b.kickPersister()
	}
	return created, err
}

// DropTable drops a table: its rows disappear from every View taken from
// now on. dropped is false if it did not exist and ifExists is set.
func (b *WriteBuffer) DropTable(db, table string, ifExists bool) (dropped bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	if err := b.cat.Snapshot().ReplaceConflict(db, table); err != nil {
		return false, err
	}
	if _, ok := b.cat.Table(db, table); !ok {
		// Nothing to roll over for; the catalog gives the answer.
		return b.cat.DropTable(b.catPath, db, table, 0, ifExists)
	}
	liveFrom, err := b.rollForDropLocked(fmt.Sprintf("drop of table %s.%s", db, table))
	if err != nil {
		return false, err
	}
	dropped, err = b.cat.DropTable(b.catPath, db, table, liveFrom, ifExists)
	if dropped {
		b.log.Info("table dropped", "database", db, "table", table, "live_from_segment", liveFrom)
		b.forgetDroppedLocked()
		b.kickPersister()
	}
	return dropped, err
}

// DropDatabase drops a database, and with cascade its tables.
func (b *WriteBuffer) DropDatabase(db string, cascade, ifExists bool) (dropped bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	if err := b.cat.Snapshot().ReplaceConflict(db, ""); err != nil {
		return false, err
	}
	d, ok := b.cat.Database(db)
	if !ok || (len(d.Tables) > 0 && !cascade) {
		// Refused or nothing to do: the catalog gives the answer.
		return b.cat.DropDatabase(b.catPath, db, 0, cascade, ifExists)
	}
	liveFrom := b.mu.open.id
	if len(d.Tables) > 0 {
		if liveFrom, err = b.rollForDropLocked("drop of database " + db); err != nil {
			return false, err
		}
	}
	dropped, err = b.cat.DropDatabase(b.catPath, db, liveFrom, cascade, ifExists)
	if dropped {
		b.log.Info("database dropped", "database", db, "tables", len(d.Tables), "live_from_segment", liveFrom)
		b.forgetDroppedLocked()
		b.kickPersister()
	}
	return dropped, err
}

func (b *WriteBuffer) ddlAllowedLocked() error {
	if b.mu.closing {
		return ErrClosed
	}
	if err := b.mu.w.Err(); err != nil {
		// The catalog could change, but the WAL replay after the restart
		// this failure needs would have to agree with it; refuse.
		return fmt.Errorf("%w: %w", ErrWAL, err)
	}
	return nil
}

// rollForDropLocked rolls the open segment over and returns the id of the
// new one: no row written before the drop is in it or in any later one,
// and no View taken before lists it.
//
// It rolls over even when the open segment has taken no write. Every View
// state published lists the open segment, and a View reads a segment's
// rows by table name as they are when it reads them, not as they were
// when it was taken: rows the change lets into the segment listed (a
// replace's new table, a table of the dropped one's name made again)
// would be read by a View taken before, with the catalog of before, as
// the old table's. TestReplaceReadersNeverMix caught it: a reader saw
// the 30 rows of a replace that had begun in an empty open segment as
// rows of the table it was replacing.
func (b *WriteBuffer) rollForDropLocked(why string) (uint64, error) {
	if err := b.rollLocked(b.cfg.Now(), why); err != nil {
		return 0, err
	}
	return b.mu.open.id, nil
}

// Chunks returns the chunks of db.table in s, a segment of the View,
// retained; none if the table's rows in s were dropped before the View
// was taken.
func (v *View) Chunks(s *Segment, db, table string) []Chunk {
	if v.dropped(s, db, table) {
		return nil
	}
	return s.Snapshot(db, table)
}

// ChunksWhere is Chunks of the chunks keep admits (Segment.SnapshotWhere).
func (v *View) ChunksWhere(s *Segment, db, table string, keep func(ChunkStat) bool) []Chunk {
	if v.dropped(s, db, table) {
		return nil
	}
	return s.SnapshotWhere(db, table, keep)
}

// LatestChunksWhere is ChunksWhere for the latest row per value of
// string column col within times at most upper (Segment.SnapshotLatest):
// with how many chunks it left out that cannot hold one.
func (v *View) LatestChunksWhere(s *Segment, db, table, col string, upper int64, keep func(ChunkStat) bool) ([]Chunk, int) {
	if v.dropped(s, db, table) {
		return nil, 0
	}
	return s.SnapshotLatest(db, table, col, upper, keep)
}

// ChunkSummaries is ChunkStats summed by partition (Segment.Summaries),
// with how many chunks they sum.
func (v *View) ChunkSummaries(s *Segment, db, table string, dst []ChunkStat) ([]ChunkStat, int) {
	if v.dropped(s, db, table) {
		return dst, 0
	}
	return s.Summaries(db, table, dst)
}

// ChunkStats appends to dst the rows and time range of each chunk Chunks
// would return, retaining none: a count of rows answered from a
// snapshot of them, with 5M rows buffered (~600 chunks), spent a fifth
// of its CPU retaining and releasing them and collecting their lists.
func (v *View) ChunkStats(s *Segment, db, table string, dst []ChunkStat) []ChunkStat {
	if v.dropped(s, db, table) {
		return dst
	}
	return s.Stats(db, table, dst)
}

// HasTable says whether s, a segment of the View, holds rows (or a
// schema) of db.table that were not dropped before the View was taken.
func (v *View) HasTable(s *Segment, db, table string) bool {
	return !v.dropped(s, db, table) && s.HasTable(db, table)
}

func (v *View) dropped(s *Segment, db, table string) bool {
	return v.cat != nil && v.cat.Hidden(db, table, s.id)
}

// Catalog is the catalog as it was when the View was taken.
func (v *View) Catalog() *catalog.Snapshot { return v.cat }
