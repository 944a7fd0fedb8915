//go:build duckdb_arrow

package query

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/persist"
)

// The key values a persisted file can hold, for the latest row per key
// (latest.go): the values of the dictionary pages of the key column's
// chunks, when every data page of each is dictionary-encoded (Apron
// writes string columns of few values with one dictionary a file:
// persist/parquet.go), and NULL when a chunk's statistics count nulls or
// do not say. Anything else (a chunk of plain pages, no encoding
// statistics, the column missing) and the set is not known: the file is
// read. A superset is enough: it only keeps a file that could have been
// left out.

// fileKeySet is what fileKeysOf found.
type fileKeySet struct {
	values []string
	null   bool
	known  bool
}

// fileKeysKey names a file's key set, or its latest rows: the file as
// the footer caches know it, and the column (the key columns, keySpec).
type fileKeysKey struct {
	file footerKey
	col  string
}

// keySpec names key columns in a fileKeysKey, a latestWant and the
// read-ahead hint: one column's name, or several joined by NUL, which no
// column name holds (catalog.ValidateColumnName: printable only).
func keySpec(cols []string) string { return strings.Join(cols, "\x00") }

// keyColumns is the columns spec names, as t names them; false when one
// is not t's.
func keyColumns(t *catalog.Table, spec string) ([]string, bool) {
	cols := strings.Split(spec, "\x00")
	for i, c := range cols {
		var ok bool
		if cols[i], ok = findColumn(t, c); !ok {
			return nil, false
		}
	}
	return cols, true
}

// defaultFileKeysBytes bounds the cached key sets, by their values' bytes
// and 16 more a value.
const defaultFileKeysBytes = 16 << 20

// fileKeysOf returns the key values of f's column col, from the cache
// when an earlier query read them; it reads f's footer and the
// dictionary pages (through the page cache) otherwise.
func (e *Engine) fileKeysOf(ctx context.Context, f persist.File, col string) (*fileKeySet, error) {
	k := fileKeysKey{fileKey(f), col}
	if s, ok := e.fileKeys.get(k); ok {
		return s, nil
	}
	var s *fileKeySet
	err := e.readPersisted(ctx, f, func(pf *file.Reader) (err error) {
		s, err = readFileKeys(pf, col, e.pages, fileKey(f))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the values of %q in %s: %w", col, f.Path, err)
	}
	cost := int64(64)
	for _, v := range s.values {
		cost += int64(len(v)) + 16
	}
	e.fileKeys.put(k, s, cost)
	return s, nil
}

// fileKeysFunc is fileKeysOf of col as latestPrune.prune takes it: nil
// for a file whose values could not be read, logged with what happens
// instead.
func (e *Engine) fileKeysFunc(ctx context.Context, col, instead string) func(persist.File) *fileKeySet {
	return func(f persist.File) *fileKeySet {
		ks, err := e.fileKeysOf(ctx, f, col)
		if err != nil {
			e.log.Debug("latest row per key: a file's key values not read; "+instead, "file", f.Path, "err", err)
			return nil
		}
		return ks
	}
}

func readFileKeys(pf *file.Reader, col string, pages *lru[pqPageKey, *pqPage], key footerKey) (*fileKeySet, error) {
	md := pf.MetaData()
	ci := md.Schema.ColumnIndexByName(col)
	if ci < 0 || md.Schema.Column(ci).PhysicalType() != parquet.Types.ByteArray {
		return &fileKeySet{}, nil
	}
	s := &fileKeySet{known: true}
	seen := map[string]bool{}
	for g := range md.NumRowGroups() {
		rgm := md.RowGroup(g)
		if rgm.NumRows() == 0 {
			continue
		}
		cc, err := rgm.ColumnChunk(ci)
		if err != nil {
			return nil, err
		}
		if !dictionaryOnly(cc) {
			return &fileKeySet{}, nil
		}
		if st, err := cc.Statistics(); err != nil || st == nil || !st.HasNullCount() || st.NullCount() > 0 {
			s.null = true
		}
		pager := newPQPager(pf.RowGroup(g), ci, pages, pqPageKey{file: key, rg: int32(g)})
		known, err := dictionaryValues(pager, s, seen)
		// Closed after the values are read: without a page cache the
		// page is the reader's buffer.
		pager.close()
		if err != nil || !known {
			return &fileKeySet{}, err
		}
	}
	return s, nil
}

// dictionaryValues adds to s the values of the dictionary page pager
// reads that seen does not hold; known is false when the chunk has no
// dictionary page of PLAIN values.
func dictionaryValues(pager *pqPager, s *fileKeySet, seen map[string]bool) (known bool, err error) {
	pg, err := pager.dictionary()
	if err != nil {
		return false, err
	}
	if pg == nil || pg.enc != parquet.Encodings.Plain && pg.enc != parquet.Encodings.PlainDict {
		return false, nil
	}
	err = plainByteArrays(pg.data, pg.nvals, func(_, start, end int) {
		if v := pg.data[start:end]; !seen[string(v)] {
			seen[string(v)] = true
			s.values = append(s.values, string(v))
		}
	})
	return err == nil, err
}

// dictionaryOnly says whether every data page of cc is dictionary-encoded
// and it has a dictionary page, as its encoding statistics tell.
func dictionaryOnly(cc *metadata.ColumnChunkMetaData) bool {
	stats := cc.EncodingStats()
	if len(stats) == 0 || cc.CryptoMetadata() != nil {
		return false
	}
	dict := false
	for _, s := range stats {
		switch s.PageType {
		case file.PageTypeDictionaryPage:
			dict = true
		case file.PageTypeDataPage, file.PageTypeDataPageV2:
			if s.Encoding != parquet.Encodings.RLEDict && s.Encoding != parquet.Encodings.PlainDict {
				return false
			}
		default:
			return false
		}
	}
	return dict
}
