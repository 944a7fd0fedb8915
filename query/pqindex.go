//go:build duckdb_arrow

package query

import (
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// A row group's page index (the offset index of each column, to seek it;
// the column index, whose per-page min and max narrow the time range) is
// decoded once per file, not by every query that narrows the group:
// arrow-go's reader reads the index's bytes and decodes their thrift at
// each open of the file, and in a loop of one host's last 10 minutes over
// persisted files that was 5% of the server's CPU (GetOffsetIndex and
// GetColumnIndex in a profile) and 40 MB of garbage in 2,800 queries.
// Decoded indexes are only read (page locations, min and max bytes), by
// any number of queries at once. Kept by the file's key (its path, size
// and checksum, as footers are) and the row group.

// pqIndexKey names a row group of a persisted file.
type pqIndexKey struct {
	file footerKey
	rg   int32
}

// rgIndex is a row group's decoded page index, per leaf column; nil
// where the file has none (or it could not be read: the group is then
// read whole, as when the file has no index).
type rgIndex struct {
	offsets []metadata.OffsetIndex
	columns []metadata.ColumnIndex
}

// defaultPageIndexCacheBytes bounds the decoded page indexes kept, by
// their estimated size (rgIndex.cost): a 5M-row day of one table is a
// few hundred KiB.
const defaultPageIndexCacheBytes = 16 << 20

// pageIndexOf returns the page index of row group u, decoded by an earlier
// query when the cache holds it; nil when the file has none.
func (f *pqFile) pageIndexOf(u pqUnit) *rgIndex {
	key := pqIndexKey{file: fileKey(f.p.f), rg: int32(u.rg)}
	if f.indexes != nil {
		if x, ok := f.indexes.get(key); ok {
			return x
		}
	}
	pir := f.p.pf.GetPageIndexReader()
	if pir == nil {
		return nil
	}
	idx, err := pir.RowGroup(u.rg)
	if err != nil || idx == nil {
		return nil
	}
	md := f.p.pf.MetaData()
	n := md.Schema.NumColumns()
	x := &rgIndex{offsets: make([]metadata.OffsetIndex, n), columns: make([]metadata.ColumnIndex, n)}
	failed := false // a read or decode error: used by this query, not kept
	for leaf := range n {
		oi, err := idx.GetOffsetIndex(leaf)
		if err == nil && oi != nil {
			x.offsets[leaf] = oi
		}
		failed = failed || err != nil
		ci, err := idx.GetColumnIndex(leaf)
		if err == nil && ci != nil {
			x.columns[leaf] = ci
		}
		failed = failed || err != nil
	}
	if f.indexes != nil && !failed && !md.IsSetEncryptionAlgorithm() {
		f.indexes.put(key, x, x.cost())
	}
	return x
}

// cost is about what x takes in memory: a page location is three words
// and a pointer; a column index holds each page's min and max bytes and a
// few words besides.
func (x *rgIndex) cost() int64 {
	c := int64(128)
	for _, oi := range x.offsets {
		if oi != nil {
			c += 48 + int64(len(oi.GetPageLocations()))*40
		}
	}
	for _, ci := range x.columns {
		if ci == nil {
			continue
		}
		c += 96
		for i, m := range ci.GetMinValues() {
			c += int64(len(m)) + 32
			if i < len(ci.GetMaxValues()) {
				c += int64(len(ci.GetMaxValues()[i])) + 24
			}
		}
	}
	return c
}
