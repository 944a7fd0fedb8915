//go:build duckdb_arrow

package query

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
)

// fileCache keeps whole copies of persisted Parquet files in a local
// directory, at most limit bytes of them (files in use may push it over
// for as long as they are in use); the least recently used go first.
//
// A file is fetched whole with Get into a temporary file, checked against
// the size and CRC32C its segment file lists, and renamed into place under
// its object name. Concurrent fetches of one file are one fetch. A scan
// pins the files it reads; a pinned file is never evicted. Objects whose
// URI is file:// (the Local store) are read in place, not copied.
type fileCache struct {
	dir   string
	limit int64
	store objstore.Store

	mu      sync.Mutex
	entries map[string]*cacheEntry // by object name
	lru     *list.List             // of *cacheEntry not pinned, most recent first
	size    int64                  // bytes of ready entries

	hits, fetches, evictions, fetchedBytes atomic.Int64
}

type cacheEntry struct {
	name  string
	local string
	size  int64
	crc   uint32
	pins  int
	elem  *list.Element // in lru while not pinned and ready
	ready chan struct{} // closed once the fetch ended
	err   error         // of the fetch; the entry is gone then
}

const fetchTempPrefix = ".fetch-"

// newFileCache opens the cache in dir, adopting the files a previous run
// left there (their size is checked against the segment file when used).
func newFileCache(dir string, limit int64, store objstore.Store) (*fileCache, error) {
	c := &fileCache{dir: dir, limit: limit, store: store, entries: map[string]*cacheEntry{}, lru: list.New()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("query: cache dir: %w", err)
	}
	type found struct {
		name string
		fi   fs.FileInfo
	}
	var files []found
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), fetchTempPrefix) {
			return os.Remove(path) // an interrupted fetch
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, found{filepath.ToSlash(rel), fi})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query: reading cache dir: %w", err)
	}
	// Oldest first, so that the newest end up most recent.
	sort.Slice(files, func(i, j int) bool { return files[i].fi.ModTime().Before(files[j].fi.ModTime()) })
	for _, f := range files {
		en := &cacheEntry{name: f.name, local: filepath.Join(dir, filepath.FromSlash(f.name)), size: f.fi.Size(), crc: 0, ready: make(chan struct{})}
		close(en.ready)
		en.elem = c.lru.PushFront(en)
		c.entries[f.name] = en
		c.size += en.size
	}
	c.mu.Lock()
	rm := c.evictLocked()
	c.mu.Unlock()
	removeFiles(rm)
	return c, nil
}

// inPlace returns the local path of an object the store keeps as a local
// file, if it does.
func inPlace(store objstore.Store, f persist.File) (string, bool) {
	uri := f.URI
	if uri == "" {
		uri = store.URI(f.Path)
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", false
	}
	return filepath.FromSlash(u.Path), true
}

// acquire returns a local path holding f's bytes, pinned until release is
// called (once).
func (c *fileCache) acquire(ctx context.Context, f persist.File) (path string, release func(), err error) {
	if p, ok := inPlace(c.store, f); ok {
		fi, err := os.Stat(p)
		if err != nil {
			return "", nil, fmt.Errorf("persisted file %s: %w", f.Path, err)
		}
		if fi.Size() != f.Size {
			return "", nil, fmt.Errorf("persisted file %s is %d bytes, its segment file says %d", f.Path, fi.Size(), f.Size)
		}
		c.hits.Add(1)
		return p, func() {}, nil
	}
	for {
		c.mu.Lock()
		en, ok := c.entries[f.Path]
		if ok {
			select {
			case <-en.ready:
				if en.size != f.Size || (en.crc != 0 && en.crc != f.CRC32C) {
					// Left by an earlier run, or not the file listed now.
					c.dropLocked(en)
					c.mu.Unlock()
					os.Remove(en.local)
					continue
				}
			default:
			}
			c.pinLocked(en)
			c.mu.Unlock()
			select {
			case <-en.ready:
			case <-ctx.Done():
				c.unpin(en)
				return "", nil, ctx.Err()
			}
			if en.err != nil {
				c.unpin(en)
				if ctx.Err() != nil {
					return "", nil, ctx.Err()
				}
				continue // the fetcher's own context ended, or it failed: try again
			}
			c.hits.Add(1)
			return en.local, c.releaser(en), nil
		}
		en = &cacheEntry{name: f.Path, local: filepath.Join(c.dir, filepath.FromSlash(f.Path)), pins: 1, ready: make(chan struct{})}
		c.entries[f.Path] = en
		c.mu.Unlock()

		err := c.fetch(ctx, f, en.local)
		c.mu.Lock()
		if err != nil {
			en.err = err
			delete(c.entries, f.Path)
		} else {
			en.size, en.crc = f.Size, f.CRC32C
			c.size += en.size
		}
		close(en.ready)
		rm := c.evictLocked()
		c.mu.Unlock()
		removeFiles(rm)
		if err != nil {
			return "", nil, err
		}
		return en.local, c.releaser(en), nil
	}
}

func (c *fileCache) releaser(en *cacheEntry) func() {
	var once sync.Once
	return func() { once.Do(func() { c.unpin(en) }) }
}

func (c *fileCache) pinLocked(en *cacheEntry) {
	en.pins++
	if en.elem != nil {
		c.lru.Remove(en.elem)
		en.elem = nil
	}
}

func (c *fileCache) unpin(en *cacheEntry) {
	c.mu.Lock()
	en.pins--
	if en.pins == 0 && en.err == nil && c.entries[en.name] == en {
		en.elem = c.lru.PushFront(en)
	}
	rm := c.evictLocked()
	c.mu.Unlock()
	removeFiles(rm)
}

func (c *fileCache) dropLocked(en *cacheEntry) {
	if en.elem != nil {
		c.lru.Remove(en.elem)
		en.elem = nil
	}
	delete(c.entries, en.name)
	c.size -= en.size
}

// evictLocked drops unpinned entries, least recently used first, until
// the cache fits its limit, and returns their files to remove.
func (c *fileCache) evictLocked() []string {
	var rm []string
	for c.size > c.limit {
		back := c.lru.Back()
		if back == nil {
			break // the rest is pinned
		}
		en := back.Value.(*cacheEntry)
		c.dropLocked(en)
		rm = append(rm, en.local)
		c.evictions.Add(1)
	}
	return rm
}

func removeFiles(paths []string) {
	for _, p := range paths {
		os.Remove(p) // a reader with it open keeps reading it
	}
}

// fetch copies f from the store to local, checking size and CRC32C.
func (c *fileCache) fetch(ctx context.Context, f persist.File, local string) (err error) {
	c.fetches.Add(1)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return fmt.Errorf("caching %s: %w", f.Path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), fetchTempPrefix+"*")
	if err != nil {
		return fmt.Errorf("caching %s: %w", f.Path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	r, err := c.store.Get(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", f.Path, err)
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	r.Close()
	if err != nil {
		return fmt.Errorf("fetching %s: %w", f.Path, err)
	}
	if n != f.Size || h.Sum32() != f.CRC32C {
		return fmt.Errorf("fetching %s: got %d bytes with CRC32C %08x, the segment file lists %d bytes %08x",
			f.Path, n, h.Sum32(), f.Size, f.CRC32C)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("caching %s: %w", f.Path, err)
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return fmt.Errorf("caching %s: %w", f.Path, err)
	}
	c.fetchedBytes.Add(n)
	return nil
}

// usage is the bytes and files in the cache now.
func (c *fileCache) usage() (bytes int64, files int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, len(c.entries)
}

var errNoStore = errors.New("persisted files but no object store")
