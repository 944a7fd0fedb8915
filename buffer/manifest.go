package buffer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// segmentFileVersion is the format version of segment files (doc.go). Bump
// it for any change an older server could misread.
const segmentFileVersion = 1

// Object name prefixes in the store (doc.go).
const (
	catalogsPrefix = "catalogs/"
	segmentsPrefix = "segments/"
	dbsPrefix      = "dbs/"
)

// ErrSegmentFile is wrapped by errors about a segment file that cannot be
// read: startup refuses to guess which WAL files it covers.
var ErrSegmentFile = errors.New("bad segment file")

// PersistedFile is one Parquet file of a persisted segment.
type PersistedFile struct {
	// Path is the object name in the store, e.g.
	// dbs/metrics/cpu/2026-11-29/00000000000000000012.parquet.
	Path string `json:"path"`
	// URI is where a reader outside the store can find it (Store.URI); not
	// stored in the segment file.
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

// PersistedSegment is a segment whose files are in the object store, as its
// segment file lists them.
type PersistedSegment struct {
	ID uint64 `json:"segment_id"`
	// CatalogVersion is the version of the persisted catalog
	// (catalogs/<version>.json) that describes every file's columns.
	CatalogVersion uint64 `json:"catalog_version"`
	// FirstSequence and LastSequence bound the WAL sequence numbers of the
	// segment's writes.
	FirstSequence uint64          `json:"first_sequence"`
	LastSequence  uint64          `json:"last_sequence"`
	Rows          int64           `json:"rows"`
	Files         []PersistedFile `json:"files"`
	// WriterID names the data dir that persisted the segment (its
	// writer-id file); startup refuses to delete a WAL file of a segment id
	// that another data dir persisted.
	WriterID string `json:"writer_id,omitempty"`
}

type segmentFile struct {
	FormatVersion int `json:"format_version"`
	PersistedSegment
}

func encodeSegmentFile(s PersistedSegment) ([]byte, error) {
	out, err := json.MarshalIndent(segmentFile{FormatVersion: segmentFileVersion, PersistedSegment: s}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func decodeSegmentFile(name string, data []byte) (PersistedSegment, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return PersistedSegment{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if head.FormatVersion == nil || *head.FormatVersion != segmentFileVersion {
		return PersistedSegment{}, fmt.Errorf("%w %s: format_version %v, this server reads %d", ErrSegmentFile, name, head.FormatVersion, segmentFileVersion)
	}
	var f segmentFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return PersistedSegment{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if id, ok := parseNumbered(name, segmentsPrefix, ".json"); !ok || id != f.ID {
		return PersistedSegment{}, fmt.Errorf("%w %s: names segment %d", ErrSegmentFile, name, f.ID)
	}
	for _, pf := range f.Files {
		if !strings.HasPrefix(pf.Path, dbsPrefix) || pf.Rows < 0 || pf.Size < 0 {
			return PersistedSegment{}, fmt.Errorf("%w %s: bad file entry %+v", ErrSegmentFile, name, pf)
		}
	}
	return f.PersistedSegment, nil
}

func catalogObject(version uint64) string {
	return fmt.Sprintf("%s%020d.json", catalogsPrefix, version)
}
func segmentObject(id uint64) string { return fmt.Sprintf("%s%020d.json", segmentsPrefix, id) }

// partitionName is the UTC day of a partition key.
func partitionName(day int64) string {
	return time.Unix(day*86400, 0).UTC().Format(time.DateOnly)
}

// parquetObject names a segment's file of one table and day. Table names
// may hold any printable character: they are path-escaped (url.PathEscape,
// so '/' is %2F), and a leading '.' becomes %2E. Database names are letters,
// digits, '_' and '-' only.
func parquetObject(db, table string, day int64, segment uint64) string {
	return fmt.Sprintf("%s%s/%s/%s/%020d.parquet", dbsPrefix, escapeSegment(db), escapeSegment(table), partitionName(day), segment)
}

func escapeSegment(s string) string {
	e := url.PathEscape(s)
	if strings.HasPrefix(e, ".") {
		e = "%2E" + e[1:]
	}
	return e
}

// parseNumbered parses <prefix><%020d><suffix>.
func parseNumbered(name, prefix, suffix string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, suffix); !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}
