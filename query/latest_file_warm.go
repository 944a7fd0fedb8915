//go:build duckdb_arrow

package query

import (
	"context"
	"sync"
	"time"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// Files' latest rows read ahead.
//
// A persist leaves a table's newest rows in a new file, and the next
// query of the latest row per key that needs it reads it whole
// (latest_file_rows.go: 490-507 ms for the peer benchmark's 5M rows),
// once after every persist: a dashboard's refresh every so often. So the
// engine remembers, for latestWantFor, the tables and key columns whose
// latest-row queries needed files, with the newest of the table's files
// then, and once every latestWarmEvery reads ahead those tables' newer
// files, one at a time and on one core (pqarrow's column readers not in
// parallel), leaving the other to writes and queries. Older files are
// left to the queries: newer ones usually hold every series, and the
// older are then left out unread (latest.go). A file is read ahead once:
// if its rows are evicted from the cache, or the read fails, the next
// query reads it.

const (
	latestWantFor   = 10 * time.Minute
	latestWarmEvery = time.Second
	// latestWarmedMax bounds the files remembered as read ahead; past
	// it the memory is cleared (a file may then be read ahead again).
	latestWarmedMax = 1 << 16
)

// latestWant is a table and key column (key columns: keySpec), as the
// catalog names them.
type latestWant struct{ db, table, col string }

// latestWarm is what the read-ahead remembers.
type latestWarm struct {
	mu     sync.Mutex
	wants  map[latestWant]wantState
	warmed map[fileKeysKey]bool // files read ahead, or tried

	// The hint of the files whose latest rows to read ahead after a
	// restart (latest_file_hint.go), only used by the read-ahead's
	// goroutine and by Close once it has returned.
	hintPath  string            // "" without a state directory
	hinted    []latestHintEntry // read at Open, read ahead first
	hintSaved []latestHintEntry // the last written
	hintDone  chan struct{}     // closed once the hint was read ahead
}

// wantState is when a query of a want last needed files, and the
// greatest time of the table's files it saw: files of later times are
// read ahead.
type wantState struct {
	at    time.Time
	since int64
}

// want notes that a latest-row query of w needed persisted files, the
// table's then reaching since.
func (l *latestWarm) want(w latestWant, since int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wants == nil {
		l.wants = make(map[latestWant]wantState)
	}
	l.wants[w] = wantState{at: now, since: since}
}

// current returns the wants of the last latestWantFor, forgetting older
// ones.
func (l *latestWarm) current(now time.Time) map[latestWant]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[latestWant]int64, len(l.wants))
	for w, st := range l.wants {
		if now.Sub(st.at) > latestWantFor {
			delete(l.wants, w)
			continue
		}
		out[w] = st.since
	}
	return out
}

// first says whether k was not read ahead before, and remembers it.
func (l *latestWarm) first(k fileKeysKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.warmed[k] {
		return false
	}
	if l.warmed == nil || len(l.warmed) >= latestWarmedMax {
		l.warmed = make(map[fileKeysKey]bool)
	}
	l.warmed[k] = true
	return true
}

// runLatestWarm reads ahead every latestWarmEvery until ctx is done.
// The hint of the files to read ahead after a restart is read ahead
// first, and written every latestHintEvery (latest_file_hint.go).
func (e *Engine) runLatestWarm(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	e.warmHinted(ctx)
	close(e.latestWarm.hintDone)
	tick := time.NewTicker(latestWarmEvery)
	defer tick.Stop()
	saved := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		e.warmLatest(ctx)
		if time.Since(saved) >= latestHintEvery {
			e.saveLatestHint()
			saved = time.Now()
		}
	}
}

// warmLatest reads the latest rows of the files of the wanted tables
// newer than their queries saw that are neither kept nor read ahead
// before.
func (e *Engine) warmLatest(ctx context.Context) {
	wants := e.latestWarm.current(time.Now())
	if len(wants) == 0 || e.cache == nil {
		return
	}
	view := e.wb.View()
	defer view.Release()
	for w, since := range wants {
		t, ok := view.Catalog().Table(w.db, w.table)
		if !ok {
			continue
		}
		// Not persistedFiles: its count of files pruned is the queries'.
		bounds := withCutoff(view, buffer.TableKey{Database: t.Database, Table: t.Name}, allTime)
		for _, ps := range view.Persisted {
			for _, f := range ps.Files {
				if ctx.Err() != nil {
					return
				}
				if f.Database != t.Database || f.Table != t.Name || f.MaxTime <= since || bounds.misses(f.Rows, f.MinTime, f.MaxTime) {
					continue
				}
				cols, ok := keyColumns(t, w.col)
				if !ok {
					continue
				}
				e.readAhead(ctx, f, cols, t)
			}
		}
	}
}

// readAhead reads f's latest rows of cols (of t) if they are neither kept
// nor read ahead before.
func (e *Engine) readAhead(ctx context.Context, f persist.File, cols []string, t *catalog.Table) {
	k := fileKeysKey{fileKey(f), keySpec(cols)}
	if _, kept := e.fileRows.peek(k); kept || !e.latestWarm.first(k) {
		return
	}
	defer e.recoverBackground("reading ahead a file's latest rows") // panics.go
	if h := panicTestHooks.Load(); h != nil && h.readAhead != nil {
		h.readAhead()
	}
	_, read, err := e.fileRowsOf(ctx, f, cols, t, false)
	if err != nil {
		e.log.Debug("reading ahead a file's latest rows failed; a query will read them", "file", f.Path, "err", err)
		return
	}
	if read {
		e.latestWarmed.Add(1)
	}
}
