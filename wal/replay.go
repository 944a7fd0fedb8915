package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	Dir    string
	FS     FS           // nil: the OS file system
	Logger *slog.Logger // nil: discard
	// MoveCorrupt sets a corrupt file aside (as <name>.corrupt) and keeps
	// only its records before the corruption, instead of failing. It is
	// what the server's --wal-move-corrupt flag sets.
	MoveCorrupt bool
}

// ReplayStats tell what Replay read and repaired.
type ReplayStats struct {
	Files   int   // files read
	Records int   // records delivered to fn
	Bytes   int64 // bytes of the records delivered, framing included
	// TruncatedBytes were cut off torn tails (and torn headers).
	TruncatedBytes int64
	// MovedAside lists the .corrupt files written by MoveCorrupt.
	MovedAside []string
}

// CorruptionError reports bytes in a WAL file that do not decode and are
// not a torn tail. It matches ErrCorrupt.
type CorruptionError struct {
	File    string
	Segment uint64
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: file %s segment %d offset %d: %v; start with --wal-move-corrupt to move the file aside and start without its records after that offset",
		e.File, e.Segment, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// ListSegments returns the ids of the WAL files in dir, sorted. Other files
// (.corrupt, .tmp, anything else) are ignored. A missing dir has none.
func ListSegments(fsys FS, dir string) ([]uint64, error) {
	if fsys == nil {
		fsys = OSFS()
	}
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var ids []uint64
	for _, e := range entries {
		if id, ok := parseSegmentFileName(e.Name()); ok && !e.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func parseSegmentFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".wal")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

// Replay reads every WAL file in opts.Dir in segment-id order and calls fn
// for each valid record, with the offset of its record header. payload is
// valid only during the call. A torn tail of the newest file is truncated;
// corruption returns a *CorruptionError (after the good records of that file
// were delivered) unless opts.MoveCorrupt is set. An error from fn stops
// replay and is returned wrapped with file and offset.
//
// Replay must run before a Writer creates the file of the next segment.
func Replay(opts ReplayOptions, fn func(segmentID uint64, offset int64, payload []byte) error) (ReplayStats, error) {
	r := &replayer{opts: opts, fs: opts.FS, logger: opts.Logger, fn: fn}
	if r.fs == nil {
		r.fs = OSFS()
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if err := r.removeTemps(); err != nil {
		return r.stats, err
	}
	ids, err := ListSegments(r.fs, opts.Dir)
	if err != nil {
		return r.stats, err
	}
	for i, id := range ids {
		if err := r.replayFile(id, i == len(ids)-1); err != nil {
			return r.stats, err
		}
		r.stats.Files++
	}
	return r.stats, nil
}

type replayer struct {
	opts   ReplayOptions
	fs     FS
	logger *slog.Logger
	fn     func(uint64, int64, []byte) error
	stats  ReplayStats
}

// removeTemps removes the .tmp files left by a crash during a rewrite.
func (r *replayer) removeTemps() error {
	entries, err := r.fs.ReadDir(r.opts.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", r.opts.Dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if base, ok := strings.CutSuffix(name, ".tmp"); ok && !e.IsDir() && strings.Contains(base, ".wal") {
			if _, isSeg := parseSegmentFileName(base[:min(len(base), 24)]); !isSeg {
				continue
			}
			path := filepath.Join(r.opts.Dir, name)
			r.logger.Warn("wal: removing leftover temporary file", "file", path)
			if err := r.fs.Remove(path); err != nil {
				return fmt.Errorf("wal: remove %s: %w", path, err)
			}
		}
	}
	return nil
}

func (r *replayer) replayFile(id uint64, newest bool) (err error) {
	path := filepath.Join(r.opts.Dir, SegmentFileName(id))
	f, err := r.fs.Open(path)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", path, err)
	}
	closed := false
	closeFile := func() error {
		if closed {
			return nil
		}
		closed = true
		return f.Close()
	}
	defer func() {
		if cerr := closeFile(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: close %s: %w", path, cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: stat %s: %w", path, err)
	}
	size := fi.Size()

	rr := newRecordReader(f, size, 0)
	hdrID, herr := rr.readFileHeader()
	if herr == nil && hdrID != id {
		herr = fmt.Errorf("file header names segment %d", hdrID)
	}
	if herr != nil {
		if newest {
			torn, err := tornHeader(f, size)
			if err != nil {
				return fmt.Errorf("wal: read %s: %w", path, err)
			}
			if torn {
				if err := closeFile(); err != nil {
					return fmt.Errorf("wal: close %s: %w", path, err)
				}
				r.logger.Warn("wal: torn file header in the newest file (crash right after it was created); writing a fresh header",
					"file", path, "segment", id, "dropped_bytes", size, "reason", herr.Error())
				if err := rewriteFile(r.fs, r.opts.Dir, path, id, nil, 0); err != nil {
					return err
				}
				r.stats.TruncatedBytes += size
				return nil
			}
		}
		return r.corrupt(f, closeFile, path, id, 0, herr)
	}

	for {
		off := rr.off
		payload, err := rr.next()
		if err == io.EOF {
			return nil
		}
		var rerr *recordError
		if errors.As(err, &rerr) {
			if newest && rerr.torn() {
				if err := closeFile(); err != nil {
					return fmt.Errorf("wal: close %s: %w", path, err)
				}
				return r.truncate(path, id, off, size, rerr)
			}
			return r.corrupt(f, closeFile, path, id, off, rerr)
		}
		if err != nil {
			return fmt.Errorf("wal: file %s segment %d offset %d: %w", path, id, off, err)
		}
		r.stats.Records++
		r.stats.Bytes += RecordHeaderSize + int64(len(payload))
		if err := r.fn(id, off, payload); err != nil {
			return fmt.Errorf("wal: file %s segment %d offset %d: %w", path, id, off, err)
		}
	}
}

// tornHeader reports whether a newest file whose header is bad is a crash
// right after creation: shorter than a header, or all zeros.
func tornHeader(f File, size int64) (bool, error) {
	if size < FileHeaderSize {
		return true, nil
	}
	rr := newRecordReader(f, size, 0)
	return rr.restIsZero()
}

func (r *replayer) truncate(path string, id uint64, off, size int64, cause error) error {
	f, err := r.fs.OpenRW(path)
	if err != nil {
		return fmt.Errorf("wal: open %s to truncate torn tail: %w", path, err)
	}
	if paddingOnly(f, off, size) {
		// What direct writes leave in a file that was not closed (doc.go,
		// Direct I/O): nothing was lost.
		r.logger.Info("wal: zero padding after the last record of the newest file (the server did not stop cleanly); truncating it",
			"file", path, "segment", id, "offset", off, "dropped_bytes", size-off)
	} else {
		r.logger.Warn("wal: torn tail in the newest file (unfinished write); truncating to the last whole record",
			"file", path, "segment", id, "offset", off, "dropped_bytes", size-off, "reason", cause.Error())
	}
	if err := f.Truncate(off); err != nil {
		_ = f.Close()
		return fmt.Errorf("wal: truncate %s to %d: %w", path, off, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("wal: sync %s after truncation: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", path, err)
	}
	r.stats.TruncatedBytes += size - off
	return nil
}

// paddingOnly says whether bytes [off, size) of f are the zero padding of
// a direct write: zeros up to a block boundary, less than a block.
func paddingOnly(f File, off, size int64) bool {
	if size%DirectBlockSize != 0 || size-off >= DirectBlockSize || size <= off {
		return false
	}
	tail := make([]byte, size-off)
	if _, err := f.ReadAt(tail, off); err != nil {
		return false
	}
	return !slices.ContainsFunc(tail, func(b byte) bool { return b != 0 })
}

// corrupt returns a *CorruptionError, or with MoveCorrupt copies the file
// aside, rewrites its good prefix [header, off) and returns nil.
func (r *replayer) corrupt(f File, closeFile func() error, path string, id uint64, off int64, cause error) error {
	cerr := &CorruptionError{File: path, Segment: id, Offset: off, Err: cause}
	if !r.opts.MoveCorrupt {
		return cerr
	}
	aside, err := r.freeName(path + ".corrupt")
	if err != nil {
		return errors.Join(cerr, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return errors.Join(cerr, fmt.Errorf("wal: stat %s: %w", path, err))
	}
	if err := copyFile(r.fs, r.opts.Dir, f, fi.Size(), aside); err != nil {
		return errors.Join(cerr, err)
	}
	good := max(off, FileHeaderSize)
	if err := rewriteFile(r.fs, r.opts.Dir, path, id, f, good); err != nil {
		return errors.Join(cerr, err)
	}
	if err := closeFile(); err != nil {
		return fmt.Errorf("wal: close %s: %w", path, err)
	}
	r.logger.Warn("wal: corrupt file moved aside; its records after the corruption are dropped",
		"file", path, "segment", id, "offset", off, "moved_to", aside, "dropped_bytes", fi.Size()-good, "reason", cause.Error())
	r.stats.MovedAside = append(r.stats.MovedAside, aside)
	return nil
}

// freeName returns name, or name.1, name.2, … whichever does not exist.
func (r *replayer) freeName(name string) (string, error) {
	for i := 0; ; i++ {
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s.%d", name, i)
		}
		f, err := r.fs.Open(n)
		if errors.Is(err, fs.ErrNotExist) {
			return n, nil
		}
		if err != nil {
			return "", fmt.Errorf("wal: check %s: %w", n, err)
		}
		_ = f.Close()
	}
}

// copyFile copies src (size bytes) to a new file dst: temp file, fsync,
// rename, fsync directory.
func copyFile(fsys FS, dir string, src File, size int64, dst string) error {
	return writeAtomically(fsys, dir, dst, func(w io.Writer) error {
		_, err := io.Copy(w, io.NewSectionReader(src, 0, size))
		return err
	})
}

// rewriteFile replaces path with a file of a fresh header for segment id
// followed by bytes [FileHeaderSize, end) of src (nothing if src is nil).
func rewriteFile(fsys FS, dir, path string, id uint64, src File, end int64) error {
	return writeAtomically(fsys, dir, path, func(w io.Writer) error {
		if _, err := w.Write(appendFileHeader(nil, id)); err != nil {
			return err
		}
		if src == nil || end <= FileHeaderSize {
			return nil
		}
		_, err := io.Copy(w, io.NewSectionReader(src, FileHeaderSize, end-FileHeaderSize))
		return err
	})
}

// writeAtomically writes name through name.tmp: write, fsync, rename,
// fsync the directory.
func writeAtomically(fsys FS, dir, name string, write func(io.Writer) error) error {
	tmp := name + ".tmp"
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: remove %s: %w", tmp, err)
	}
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", tmp, err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return fmt.Errorf("wal: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return fmt.Errorf("wal: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("wal: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("wal: rename %s to %s: %w", tmp, name, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("wal: sync directory %s: %w", dir, err)
	}
	return nil
}
