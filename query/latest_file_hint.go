//go:build duckdb_arrow

package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apron-db/apron/persist"
)

// Files' latest rows after a restart.
//
// The latest rows of persisted files are kept in memory only (e.fileRows),
// so after a restart a dashboard's first latest-row query over a table
// read its newest files whole again (~0.5 s for the peer benchmark's 5M
// rows), and the read-ahead (latest_file_warm.go) could not help: it
// knows only what queries asked since the start. So the engine writes
// down in Config.StateDir which files' latest rows it keeps, and of which key
// column: every latestHintEvery when that changed, and at Close. Once
// open, the read-ahead reads those of them still persisted first, one at
// a time on its goroutine, and their tables are wanted as if a query had
// just needed their files (newer files are read ahead too).
//
// The list is a hint. A missing, torn or stale one costs the reads it
// would have saved and nothing more (it is written to a temporary file
// and renamed, without fsync); its paths are only compared with the
// View's files, never opened; and it holds at most latestHintMax files.

const (
	latestHintName  = "latest-rows.json"
	latestHintEvery = time.Minute
	latestHintMax   = 4096
	// latestHintMaxBytes bounds the file read: latestHintMax entries of
	// paths of up to 1 KiB and more.
	latestHintMaxBytes = 8 << 20
	// latestHintVersion is the format written; another is ignored.
	latestHintVersion = 1
)

// latestHint is the file's content.
type latestHint struct {
	Version int               `json:"version"`
	Files   []latestHintEntry `json:"files"`
}

// latestHintEntry is a file (as footerKey names it) and the key column
// whose latest rows were kept.
type latestHintEntry struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
	Col  string `json:"col"`
}

// latestHintPath is where the hint of an engine with state directory dir
// is kept; "" without one.
func latestHintPath(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, latestHintName)
}

// loadLatestHint reads the hint at path; nil if there is none or it cannot
// be used (logged). The temporary files of writes cut short (a crash
// between their creation and their rename) are removed.
func (e *Engine) loadLatestHint(path string) []latestHintEntry {
	if path == "" {
		return nil
	}
	if stale, err := filepath.Glob(path + ".*.tmp"); err == nil {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var h latestHint
	if err == nil && fi.Size() > latestHintMaxBytes {
		err = fmt.Errorf("%d bytes, more than the %d a list of %d files takes", fi.Size(), latestHintMaxBytes, latestHintMax)
	}
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			err = json.Unmarshal(b, &h)
		}
	}
	if err == nil && h.Version != latestHintVersion {
		err = fmt.Errorf("version %d, this server writes %d", h.Version, latestHintVersion)
	}
	if err != nil {
		e.log.Warn("the list of files whose latest rows to read ahead after a restart is unusable: queries will read those files, and the list is written anew within a minute of their reads",
			"path", path, "err", err)
		return nil
	}
	if len(h.Files) > latestHintMax {
		h.Files = h.Files[:latestHintMax]
	}
	return h.Files
}

// latestHintNow is the hint of what e.fileRows keeps now, most recently
// used first.
func (e *Engine) latestHintNow() []latestHintEntry {
	keys := e.fileRows.keys()
	out := make([]latestHintEntry, 0, min(len(keys), latestHintMax))
	for _, k := range keys {
		if len(out) == latestHintMax {
			break
		}
		if r, ok := e.fileRows.peek(k); ok && r.unusable != nil {
			continue
		}
		out = append(out, latestHintEntry{Path: k.file.path, Size: k.file.size, CRC: k.file.crc, Col: k.col})
	}
	return out
}

// saveLatestHint writes the hint of what e.fileRows keeps, if it changed
// since the last one written, and keeps nothing to read ahead: an engine
// closed before its read-ahead ran leaves the hint it was given.
func (e *Engine) saveLatestHint() {
	w := &e.latestWarm
	if w.hintPath == "" {
		return
	}
	now := e.latestHintNow()
	if len(now) == 0 || slices.Equal(now, w.hintSaved) {
		return
	}
	if err := writeLatestHint(w.hintPath, now); err != nil {
		e.log.Warn("writing the list of files whose latest rows to read ahead after a restart failed", "path", w.hintPath, "err", err)
		return
	}
	w.hintSaved = now
}

func writeLatestHint(path string, files []latestHintEntry) error {
	b, err := json.Marshal(latestHint{Version: latestHintVersion, Files: files})
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, latestHintName+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// warmHinted reads ahead the latest rows the hint read at Open lists, of
// the files still persisted, and wants their tables; once.
func (e *Engine) warmHinted(ctx context.Context) {
	w := &e.latestWarm
	hinted := w.hinted
	w.hinted = nil
	if len(hinted) == 0 || e.cache == nil {
		return
	}
	view := e.wb.View()
	defer view.Release()
	files := make(map[footerKey]persist.File)
	newest := make(map[latestWant]int64)
	for _, ps := range view.Persisted {
		for _, f := range ps.Files {
			files[fileKey(f)] = f
		}
	}
	now := time.Now()
	for _, h := range hinted {
		if ctx.Err() != nil {
			return
		}
		f, ok := files[footerKey{path: h.Path, size: h.Size, crc: h.CRC}]
		if !ok {
			continue
		}
		t, ok := view.Catalog().Table(f.Database, f.Table)
		if !ok {
			continue
		}
		cols, ok := keyColumns(t, h.Col)
		if !ok {
			continue
		}
		e.readAhead(ctx, f, cols, t)
		want := latestWant{t.Database, t.Name, keySpec(cols)}
		if since, ok := newest[want]; !ok || f.MaxTime > since {
			newest[want] = f.MaxTime
		}
	}
	for want, since := range newest {
		w.want(want, since, now)
	}
}
