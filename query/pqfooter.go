//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/apron-db/apron/persist"
)

// A persisted file's footer is parsed once, not by every query that opens
// the file: decoding the thrift of a 5M-row file's 39 row groups took
// 0.7 ms, a tenth of a selective query over it. Files never change under
// a name once listed, but a retried persist may rewrite one (another
// encoding of the same rows), so the key holds the size and checksum the
// listing gives.
type footerKey struct {
	path string
	size int64
	crc  uint32
}

// fileKey is f's key in the caches of what was decoded of persisted
// files (footers, statistics, pages).
func fileKey(f persist.File) footerKey { return footerKey{path: f.Path, size: f.Size, crc: f.CRC32C} }

const (
	// defaultFooterCacheBytes bounds the cached footers, by
	// footerCostFactor times their size in the file: the decoded
	// structures take several times the bytes they were decoded from.
	defaultFooterCacheBytes = 64 << 20
	footerCostFactor        = 4
)

// openFooter opens the local copy at path of f, with its footer from the
// cache when an earlier open parsed it. The metadata is shared between
// readers: arrow-go's readers only read it (RowGroup builds new objects
// on each call), and Apron's files are not encrypted (an encrypted footer
// is not kept).
func (e *Engine) openFooter(path string, f persist.File) (*file.Reader, error) {
	key := fileKey(f)
	opts := []file.ReadOption{file.WithReadProps(e.parquetReadProps())}
	if md, ok := e.footers.get(key); ok {
		opts = append(opts, file.WithMetadata(md))
	}
	pf, err := file.OpenParquetFile(path, false, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", f.Path, err)
	}
	if md := pf.MetaData(); !md.IsSetEncryptionAlgorithm() {
		e.footers.put(key, md, int64(md.Size())*footerCostFactor)
	}
	return pf, nil
}

// groupStatsOf returns the row group statistics of f, whose footer is md,
// decoded by an earlier query when it can.
func (e *Engine) groupStatsOf(f persist.File, md *metadata.FileMetaData) *groupStats {
	key := fileKey(f)
	if gs, ok := e.groupStats.get(key); ok {
		return gs
	}
	gs := decodeGroupStats(md)
	if !md.IsSetEncryptionAlgorithm() {
		e.groupStats.put(key, gs, gs.cost())
	}
	return gs
}

// readPersisted calls read with f opened from its local copy (the file
// cache's, fetched from the object store if need be), its footer from
// the footer cache.
func (e *Engine) readPersisted(ctx context.Context, f persist.File, read func(*file.Reader) error) error {
	if e.cache == nil {
		return fmt.Errorf("table %s.%s: %w", f.Database, f.Table, errNoStore)
	}
	path, unpin, err := e.cache.acquire(ctx, f)
	if err != nil {
		return err
	}
	defer unpin()
	pf, err := e.openFooter(path, f)
	if err != nil {
		return err
	}
	defer pf.Close()
	return read(pf)
}
