package persist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/apron-db/apron/wal"
)

// The journal of unlisted objects: the Parquet files of this data dir
// that may be in the store while no listing (segment file, compaction
// file) names them. Readers and startup find files through listings only,
// so such a file is garbage unless a persist retried from the WAL writes
// it again; this journal is how startup finds them without listing
// every object under dbs/ (months of files on GCS) and without touching
// what another writer uploads (RemoveOrphans).
//
// A name goes in, durably (wal.WriteFileAtomic on the WAL's FS, so that
// the power-loss tests cover it), before the step that can leave it
// unlisted:
//
//   - before a Parquet file is uploaded (a persist's files all at once
//     first, NoteUnlisted; UploadParquet notes its own as well);
//   - before a compaction file unlists the files it merges;
//   - before the sweep rewrites a listing without the files it dooms.
//
// A name comes out once it cannot be an unlisted object any more: its
// file is listed (the segment file or compaction file that names it is
// stored) or deleted (DeleteFile): SettleUnlisted. Taking one out late is
// harmless (startup finds it listed, or deletes what is gone already), so
// those rewrites need not come first; putting one in late would lose an
// orphan, so those do.
//
// The file is <data-dir>/unlisted-objects.json: {"format":1,"objects":[…]}.

const (
	unlistedFile   = "unlisted-objects.json"
	unlistedFormat = 1
)

// unlistedJournal is the journal in memory and on disk. Safe for
// concurrent use.
type unlistedJournal struct {
	fsys wal.FS
	path string

	mu    sync.Mutex
	names map[string]bool
	// found: the file existed when opened (a data dir of an older version
	// has none, and may have orphans only a full listing finds).
	found bool
}

type unlistedJSON struct {
	Format  int      `json:"format"`
	Objects []string `json:"objects"`
}

// openUnlisted reads the journal of dataDir; a missing file is an empty
// journal.
func openUnlisted(fsys wal.FS, dataDir string) (*unlistedJournal, error) {
	j := &unlistedJournal{fsys: fsys, path: filepath.Join(dataDir, unlistedFile), names: map[string]bool{}}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persist: reading the journal of unlisted objects: %w", err)
	}
	var f unlistedJSON
	if err := json.Unmarshal(data, &f); err != nil || f.Format != unlistedFormat {
		if err == nil {
			err = fmt.Errorf("format %d, want %d", f.Format, unlistedFormat)
		}
		return nil, fmt.Errorf("persist: %s is not a journal of unlisted objects (%w): move it aside and start with --full-orphan-scan, which finds what it would have named by listing the store", j.path, err)
	}
	for _, n := range f.Objects {
		if err := ValidateFilePath(n); err != nil {
			return nil, fmt.Errorf("persist: %s names %q, which is not a Parquet file of the layout: move it aside and start with --full-orphan-scan", j.path, n)
		}
		j.names[n] = true
	}
	j.found = true
	return j, nil
}

// add puts names in the journal, durably, before it returns; it writes
// only when one is new.
func (j *unlistedJournal) add(names ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var added []string
	for _, n := range names {
		if !j.names[n] {
			j.names[n] = true
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return nil
	}
	if err := j.writeLocked(); err != nil {
		// Not in the file, so not in the journal: the step it was to come
		// before must not run.
		for _, n := range added {
			delete(j.names, n)
		}
		return err
	}
	return nil
}

// remove takes names out of the journal. A failed write is returned but
// leaves them out in memory: the next write takes them out on disk, and
// until then startup finds them listed or gone.
func (j *unlistedJournal) remove(names ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	changed := false
	for _, n := range names {
		if j.names[n] {
			delete(j.names, n)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return j.writeLocked()
}

// list is the names in the journal, sorted.
func (j *unlistedJournal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sortedLocked()
}

func (j *unlistedJournal) sortedLocked() []string {
	out := slices.Collect(maps.Keys(j.names))
	slices.Sort(out)
	return out
}

func (j *unlistedJournal) writeLocked() error {
	data, err := json.Marshal(unlistedJSON{Format: unlistedFormat, Objects: j.sortedLocked()})
	if err != nil {
		return err
	}
	if err := wal.WriteFileAtomic(j.fsys, j.path, data); err != nil {
		return fmt.Errorf("persist: writing the journal of unlisted objects %s: %w", j.path, err)
	}
	return nil
}

// NoteUnlisted puts the Parquet files names in the journal of unlisted
// objects, durably, before it returns: call it before the step that can
// leave them in the store unlisted (their upload, a listing rewritten
// without them). An error means the step must not run yet.
func (s *Store) NoteUnlisted(names ...string) error {
	for _, n := range names {
		if err := ValidateFilePath(n); err != nil {
			return err
		}
	}
	return s.unlisted.add(names...)
}

// SettleUnlisted takes names out of the journal of unlisted objects: the
// listing that names them is stored. A failure is logged, not returned
// (see unlistedJournal.remove).
func (s *Store) SettleUnlisted(names ...string) {
	if err := s.unlisted.remove(names...); err != nil {
		s.log.Warn("taking listed or deleted files out of the journal of unlisted objects failed; the next write of the journal does", "err", err)
	}
}

// Unlisted is the names in the journal of unlisted objects (tests,
// diagnostics).
func (s *Store) Unlisted() []string { return s.unlisted.list() }

// UnlistedOf is the names in the journal of unlisted objects of segment
// id's files (…/<id>.parquet): what an earlier attempt of its persist
// may have uploaded.
func (s *Store) UnlistedOf(id uint64) []string {
	var out []string
	for _, n := range s.unlisted.list() {
		if seg, ok := segmentOfFile(n); ok && seg == id {
			out = append(out, n)
		}
	}
	return out
}

// UnlistedCount is how many names the journal of unlisted objects holds.
func (s *Store) UnlistedCount() int {
	s.unlisted.mu.Lock()
	defer s.unlisted.mu.Unlock()
	return len(s.unlisted.names)
}
