package persist

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apron-db/apron/objstore"
)

// The startup steps (doc.go), run before the WAL is replayed, in this
// order: LoadCatalog, LoadSegments, then (once the buffer has deleted the
// WAL files of persisted segments) RemoveOrphans and CleanTemporary. Each
// store request goes through Config.Retry; ctx bounds them all.

// LoadCatalog learns the newest catalog version in the store
// (CatalogVersion) and, when it is newer than local (the version of the
// local catalog file at path) or that file is missing, installs it at path
// and returns its object name; "" when the local file stands.
func (s *Store) LoadCatalog(ctx context.Context, path string, local uint64) (string, error) {
	store := s.objects
	var objs []objstore.ObjectInfo
	if err := s.retry(ctx, "listing catalogs", func() (err error) {
		objs, err = store.List(ctx, CatalogsPrefix)
		return err
	}); err != nil {
		return "", err
	}
	var newest uint64
	for _, o := range objs {
		if v, ok := parseNumbered(o.Name, CatalogsPrefix, ".json"); ok {
			newest = max(newest, v)
		}
	}
	s.catVersion.Store(newest)
	_, statErr := os.Stat(path)
	if newest == 0 || (newest <= local && statErr == nil) {
		return "", nil
	}
	name := CatalogObject(newest)
	var data []byte
	if err := s.retry(ctx, "reading "+name, func() error {
		r, err := store.Get(ctx, name)
		if err != nil {
			return err
		}
		defer r.Close()
		data, err = io.ReadAll(r)
		return err
	}); err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, data); err != nil {
		return "", fmt.Errorf("persist: installing catalog %s from the object store: %w", name, err)
	}
	return name, nil
}

// LoadSegments reads every segment file, in id order, with the files'
// URIs filled in. A segment file that cannot be read is an error
// (ErrSegmentFile): startup must not guess which WAL files it covers.
func (s *Store) LoadSegments(ctx context.Context) ([]Segment, error) {
	var segs []Segment
	err := s.readListings(ctx, SegmentsPrefix, "segment files", func(name string, data []byte) error {
		seg, err := DecodeSegmentFile(name, data)
		if err != nil {
			return err
		}
		for i := range seg.Files {
			seg.Files[i].URI = s.objects.URI(seg.Files[i].Path)
		}
		segs = append(segs, seg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(segs, func(x, y Segment) int { return cmp.Compare(x.ID, y.ID) })
	return segs, nil
}

// listingReads is how many listings (segment files, compaction files)
// startup reads at once: there is one per segment ever persisted (720 a
// month with one-hour segments), and one after the other a store's
// latency (~20-50 ms a request on GCS) made a start take minutes.
const listingReads = 32

// readListings reads every object <prefix><%020d>.json (segment files,
// compaction files: what is called what in logs), listingReads at a
// time, and hands each to decode in name order; an error of decode fails
// it.
func (s *Store) readListings(ctx context.Context, prefix, what string, decode func(name string, data []byte) error) error {
	store := s.objects
	var objs []objstore.ObjectInfo
	if err := s.retry(ctx, "listing "+what, func() (err error) {
		objs, err = store.List(ctx, prefix)
		return err
	}); err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o objstore.ObjectInfo) bool {
		if _, ok := parseNumbered(o.Name, prefix, ".json"); !ok {
			s.log.Warn("ignoring an unexpected object among "+what, "object", o.Name)
			return true
		}
		return false
	})
	datas := make([][]byte, len(objs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		readErr error
		next    atomic.Int64
	)
	for range min(listingReads, len(objs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(objs) || ctx.Err() != nil {
					return
				}
				name := objs[i].Name
				err := s.retry(ctx, "reading "+name, func() error {
					r, err := store.Get(ctx, name)
					if err != nil {
						return err
					}
					defer r.Close()
					datas[i], err = io.ReadAll(r)
					return err
				})
				if err != nil {
					errOnce.Do(func() { readErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if readErr != nil {
		return readErr
	}
	for i, o := range objs {
		if err := decode(o.Name, datas[i]); err != nil {
			return fmt.Errorf("persist: %w", err)
		}
		datas[i] = nil
	}
	return nil
}

// RemoveOrphans deletes the Parquet files that no segment of segs lists
// and that the journal of unlisted objects names (unlisted.go): the
// uploads of a persist that crashed before its segment file, the merged
// file of a compaction that crashed before its compaction file, the
// files a committed compaction replaced and a sweep unlisted but had not
// yet deleted. Nothing reads them (readers find files through listings
// only). It lists nothing under dbs/ (one request per 1,000 objects:
// months of files on GCS), unless Config.FullOrphanScan, which also
// deletes every unlisted Parquet file there.
//
// The files of the segments in pending (still in the WAL, to be
// persisted again) are kept, and stay in the journal (a full scan puts
// those it found there): the retry finds each one it would write with
// the same size and CRC32C and counts it done (putImmutable), instead of
// writing it again, and deletes those it does not write (their rows
// dropped or expired since; Store.UnlistedOf).
//
// When a segment file was written by another data dir (its writer_id is
// not ours: two servers share the store location, which Apron does not
// support), nothing is deleted: a name of ours may be the other server's
// upload in flight, whose segment file is still to come. It is logged,
// with what to do.
func (s *Store) RemoveOrphans(ctx context.Context, segs []Segment, pending map[uint64]bool) error {
	store := s.objects
	listed := map[string]bool{}
	var others []string
	for _, seg := range segs {
		for _, f := range seg.Files {
			listed[f.Path] = true
		}
		if seg.WriterID != "" && seg.WriterID != s.writerID && !slices.Contains(others, seg.WriterID) {
			others = append(others, seg.WriterID)
		}
	}
	if len(others) > 0 {
		s.log.Error("not deleting unlisted Parquet files: segment files of other data dirs are in this object store location, so an unlisted file may be another server's upload in flight. Give each server its own --gcs-prefix or bucket",
			"this_writer_id", s.writerID, "other_writer_ids", others)
		return nil
	}
	candidates := s.unlisted.list()
	if s.fullOrphanScan {
		var objs []objstore.ObjectInfo
		if err := s.retry(ctx, "listing Parquet files", func() (err error) {
			objs, err = store.List(ctx, DBsPrefix)
			return err
		}); err != nil {
			return err
		}
		for _, o := range objs {
			if ValidateFilePath(o.Name) == nil {
				candidates = append(candidates, o.Name)
			}
		}
		slices.Sort(candidates)
		candidates = slices.Compact(candidates)
		s.log.Info("full orphan scan: listed every object under "+DBsPrefix, "objects", len(objs))
	} else if !s.unlisted.found && len(segs) > 0 {
		s.log.Info("this data dir has no journal of unlisted objects yet (made by a version before it, or new over an existing store): Parquet files an earlier crash left unlisted, if any, stay in the store; start once with --full-orphan-scan to delete them")
	}
	var settled, kept []string
	removed := 0
	for _, name := range candidates {
		if listed[name] {
			settled = append(settled, name)
			continue
		}
		if seg, ok := segmentOfFile(name); ok && pending[seg] {
			kept = append(kept, name)
			continue
		}
		if err := s.retry(ctx, "deleting orphan "+name, func() error { return store.Delete(ctx, name) }); err != nil {
			return err
		}
		settled = append(settled, name)
		removed++
		s.log.Debug("removed a Parquet file that no listing names", "object", name)
	}
	if removed > 0 {
		s.log.Info("removed Parquet files that no listing names (left by an interrupted persist, compaction or deletion)", "files", removed)
	}
	if err := s.unlisted.add(kept...); err != nil {
		return err
	}
	return s.unlisted.remove(settled...)
}

// CleanTemporary removes the temporary files that a crash left in the
// object store, if it keeps any (the local store does). A failure is
// logged, not returned: nothing reads those files.
func (s *Store) CleanTemporary(ctx context.Context) {
	if c, ok := s.objects.(interface {
		Clean(context.Context, time.Duration) (int, error)
	}); ok {
		if n, err := c.Clean(ctx, 0); err != nil {
			s.log.Warn("removing temporary files of the object store failed", "err", err)
		} else if n > 0 {
			s.log.Info("removed temporary files left in the object store by a crash", "files", n)
		}
	}
}

// segmentOfFile is the segment id of a persisted file's name
// (…/<segment %020d>.parquet); false for any other name (a merged file).
func segmentOfFile(name string) (uint64, bool) {
	i := strings.LastIndexByte(name, '/')
	return parseNumbered(name[i+1:], "", ".parquet")
}
