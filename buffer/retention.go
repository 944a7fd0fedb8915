package buffer

import (
	"math"
	"time"

	"github.com/apron-db/apron/catalog"
)

// Retention (catalog/retention.go): a database's rows older than now
// minus its retention are left out of every read. A View fixes "now" when
// it is taken, so all the scans of one query cut at the same instant
// (View.Cutoff); the persister writes no file of a partition whose rows
// are all expired.

// SetRetention sets a database's retention (0: the server's default,
// catalog.RetentionNone: forever), durable before it returns; rows it
// expires disappear from every View taken after it.
func (b *WriteBuffer) SetRetention(db string, r time.Duration) (changed bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ddlAllowedLocked(); err != nil {
		return false, err
	}
	changed, err = b.cat.SetRetention(b.catPath, db, r)
	if changed {
		b.log.Info("retention changed", "database", db, "retention", catalog.FormatRetention(r),
			"effective", catalog.FormatRetention(b.EffectiveRetention(b.cat.Snapshot(), db)))
		b.kickPersister()
		b.kickSweep()
	}
	return changed, err
}

// EffectiveRetention is how long db's rows are kept in snapshot s: its
// own retention, else the server's default; catalog.RetentionNone when
// they are kept forever (never 0, which catalog.FormatRetention names
// "default").
func (b *WriteBuffer) EffectiveRetention(s *catalog.Snapshot, db string) time.Duration {
	r := b.cfg.Retention
	if d, ok := s.Database(db); ok && d.Retention != 0 {
		r = d.Retention
	}
	if r <= 0 {
		return catalog.RetentionNone
	}
	return r
}

// cutoffAt is the oldest time (ns) kept in db at now; math.MinInt64 when
// nothing expires.
func (b *WriteBuffer) cutoffAt(s *catalog.Snapshot, db string, now time.Time) int64 {
	r := b.EffectiveRetention(s, db)
	if r <= 0 {
		return math.MinInt64
	}
	return now.Add(-r).UnixNano()
}

// Cutoff is the oldest time (ns since the epoch) of a row of db the View
// shows: older rows are expired. math.MinInt64 when nothing expires.
func (v *View) Cutoff(db string) int64 {
	if v.cat == nil {
		return math.MinInt64
	}
	return v.b.cutoffAt(v.cat, db, v.now)
}

// expiredChunks says whether every row of chunks is older than cutoff.
func expiredChunks(chunks []Chunk, cutoff int64) bool {
	if cutoff == math.MinInt64 {
		return false
	}
	for _, c := range chunks {
		if c.Rec.NumRows() > 0 && c.MaxTime >= cutoff {
			return false
		}
	}
	return true
}
