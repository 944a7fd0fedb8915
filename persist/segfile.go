package persist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// segmentFileVersion is the format version of segment files (doc.go). Bump
// it for any change an older server could misread.
const segmentFileVersion = 1

// ErrSegmentFile is wrapped by errors about a segment file that cannot be
// read: startup refuses to guess which WAL files it covers.
var ErrSegmentFile = errors.New("bad segment file")

// File is one Parquet file of a persisted segment.
type File struct {
	// Path is the object name in the store, e.g.
	// dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet.
	Path string `json:"path"`
	// URI is where a reader outside the store can find it
	// (objstore.Store.URI); not stored in the segment file.
	URI       string `json:"-"`
	Size      int64  `json:"size"`
	CRC32C    uint32 `json:"crc32c"`
	Rows      int64  `json:"rows"`
	MinTime   int64  `json:"min_time"` // ns since the epoch, inclusive
	MaxTime   int64  `json:"max_time"`
	Database  string `json:"database"`
	Table     string `json:"table"`
	Partition string `json:"partition"` // the UTC day, YYYY-MM-DD
}

// Segment is a segment whose files are in the object store, as its
// segment file lists them.
type Segment struct {
	ID uint64 `json:"segment_id"`
	// CatalogVersion is the version of the persisted catalog
	// (catalogs/<version>.json) that describes every file's columns.
	CatalogVersion uint64 `json:"catalog_version"`
	// FirstSequence and LastSequence bound the WAL sequence numbers of the
	// segment's writes.
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	Rows          int64  `json:"rows"`
	Files         []File `json:"files"`
	// WriterID names the data dir that persisted the segment (its
	// writer-id file); startup refuses to delete a WAL file of a segment id
	// that another data dir persisted.
	WriterID string `json:"writer_id,omitempty"`
	// Compaction is set when this is not a segment but a compaction's
	// listing (compaction.go); not in a segment file.
	Compaction *CompactionInfo `json:"-"`
}

type segmentFile struct {
	FormatVersion int `json:"format_version"`
	Segment
}

// EncodeSegmentFile returns the segment file of s (doc.go).
func EncodeSegmentFile(s Segment) ([]byte, error) {
	out, err := json.MarshalIndent(segmentFile{FormatVersion: segmentFileVersion, Segment: s}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// DecodeSegmentFile reads the segment file stored as object name. Unknown
// fields, another format version, a segment id other than the name's and a
// file entry outside dbs/ are refused (ErrSegmentFile).
func DecodeSegmentFile(name string, data []byte) (Segment, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Segment{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if head.FormatVersion == nil || *head.FormatVersion != segmentFileVersion {
		return Segment{}, fmt.Errorf("%w %s: format_version %v, this server reads %d", ErrSegmentFile, name, head.FormatVersion, segmentFileVersion)
	}
	var f segmentFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Segment{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if id, ok := parseNumbered(name, SegmentsPrefix, ".json"); !ok || id != f.ID {
		return Segment{}, fmt.Errorf("%w %s: names segment %d", ErrSegmentFile, name, f.ID)
	}
	for _, pf := range f.Files {
		if !strings.HasPrefix(pf.Path, DBsPrefix) || pf.Rows < 0 || pf.Size < 0 {
			return Segment{}, fmt.Errorf("%w %s: bad file entry %+v", ErrSegmentFile, name, pf)
		}
	}
	return f.Segment, nil
}
