package persist

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Object name prefixes in the store (doc.go).
const (
	CatalogsPrefix = "catalogs/"
	SegmentsPrefix = "segments/"
	DBsPrefix      = "dbs/"
)

// CatalogObject names the catalog file of a version in the store.
func CatalogObject(version uint64) string {
	return fmt.Sprintf("%s%020d.json", CatalogsPrefix, version)
}

// SegmentObject names the segment file of a segment.
func SegmentObject(id uint64) string { return fmt.Sprintf("%s%020d.json", SegmentsPrefix, id) }

// partitionName is the UTC day of a partition key.
func partitionName(day int64) string {
	return time.Unix(day*86400, 0).UTC().Format(time.DateOnly)
}

// ParquetObject names a segment's file of one table and day (days since
// the epoch, UTC). Table names may hold any printable character: they are
// path-escaped (url.PathEscape, so '/' is %2F), and a leading '.' becomes
// %2E. Database names are letters, digits, '_' and '-' only.
func ParquetObject(db, table string, day int64, segment uint64) string {
	return fmt.Sprintf("%s%s/%s/%s/%020d.parquet", DBsPrefix, escapeSegment(db), escapeSegment(table), partitionName(day), segment)
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

// parseDay is the day (since the epoch, UTC) of a partition name.
func parseDay(partition string) (int64, error) {
	t, err := time.Parse(time.DateOnly, partition)
	if err != nil {
		return 0, fmt.Errorf("persist: partition %q: %w", partition, err)
	}
	return t.Unix() / 86400, nil
}
