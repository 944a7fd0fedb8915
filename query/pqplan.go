//go:build duckdb_arrow

package query

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// pqKind is how a Parquet column's values become a DuckDB vector's.
type pqKind uint8

const (
	pqCopy     pqKind = iota // same width and bits (INT32, INT64, FLOAT, DOUBLE)
	pqNarrow8                // INT32 to TINYINT / UTINYINT
	pqNarrow16               // INT32 to SMALLINT / USMALLINT
	pqScale                  // INT64 timestamp to another unit
	pqBool                   // BOOLEAN, bit-packed, to one byte a value
	pqBytes                  // BYTE_ARRAY to VARCHAR / BLOB
)

// pqColPlan is how one projected column of a file is decoded.
type pqColPlan struct {
	leaf  int // the file's column; -1 when the file predates it (NULLs)
	kind  pqKind
	width int // bytes a value in DuckDB's vector (pqBytes: 16, unused)
	// pqScale: values are multiplied by mul, or divided by div.
	mul, div int64
	blob     bool // pqBytes: BLOB, else VARCHAR (dictionary<int32, utf8> declared)
	nullable bool // the file's column has definition levels
}

// pqPlan decides whether the native decoder reads the columns of g.proj
// from the file's row groups groups, and how: the columns' types and
// encodings must be ones it knows (the ones Apron's writer uses) in every
// row group. Otherwise the whole file goes through pqarrow: this is
// decided before anything is read, never half-way. cols has an entry per
// output column; an output column that is no table column (a row id) has
// leaf -2.
func (g *scanGlobal) pqPlan(md *metadata.FileMetaData, groups []int) (cols []pqColPlan, ok bool) {
	if pqDisabled.Load() {
		return nil, false
	}
	cols = make([]pqColPlan, len(g.proj))
	for i, tc := range g.proj {
		if tc < 0 {
			cols[i].leaf = -2
			continue
		}
		want := g.bind.fields[tc]
		leaf := md.Schema.ColumnIndexByName(want.Name)
		if leaf < 0 {
			cols[i].leaf = -1
			continue
		}
		descr := md.Schema.Column(leaf)
		p, ok := pqColumnPlan(want.Type, descr)
		if !ok {
			return nil, false
		}
		p.leaf = leaf
		for _, rg := range groups {
			cc, err := md.RowGroup(rg).ColumnChunk(leaf)
			if err != nil || !pqEncodingsKnown(cc, p.kind) {
				return nil, false
			}
		}
		cols[i] = p
	}
	return cols, true
}

// pqColumnPlan returns how a column declared as want is decoded from the
// Parquet column descr, if it can be: the physical type Apron's writer
// (pqarrow) stores want as, flat, at most optional.
func pqColumnPlan(want arrow.DataType, descr *schema.Column) (pqColPlan, bool) {
	if descr.MaxRepetitionLevel() != 0 || descr.MaxDefinitionLevel() > 1 {
		return pqColPlan{}, false
	}
	p := pqColPlan{nullable: descr.MaxDefinitionLevel() == 1}
	phys := descr.PhysicalType()
	need := parquet.Types.Int32
	switch dt := want.(type) {
	case *arrow.Int8Type, *arrow.Uint8Type:
		p.kind, p.width = pqNarrow8, 1
	case *arrow.Int16Type, *arrow.Uint16Type:
		p.kind, p.width = pqNarrow16, 2
	case *arrow.Int32Type, *arrow.Uint32Type, *arrow.Date32Type, *arrow.Date64Type:
		// Dates are days in DuckDB and in Parquet (pqarrow writes date64
		// as days too).
		p.kind, p.width = pqCopy, 4
	case *arrow.Int64Type, *arrow.Uint64Type:
		p.kind, p.width, need = pqCopy, 8, parquet.Types.Int64
	case *arrow.Float32Type:
		p.kind, p.width, need = pqCopy, 4, parquet.Types.Float
	case *arrow.Float64Type:
		p.kind, p.width, need = pqCopy, 8, parquet.Types.Double
	case *arrow.BooleanType:
		p.kind, p.width, need = pqBool, 1, parquet.Types.Boolean
	case *arrow.TimestampType:
		ts, ok := descr.LogicalType().(interface{ TimeUnit() schema.TimeUnitType })
		if !ok {
			return pqColPlan{}, false
		}
		var have int64 // the file's unit, in ns
		switch ts.TimeUnit() {
		case schema.TimeUnitMillis:
			have = 1e6
		case schema.TimeUnitMicros:
			have = 1e3
		case schema.TimeUnitNanos:
			have = 1
		default:
			return pqColPlan{}, false
		}
		// DuckDB's unit for the declared type: its own for a timestamp
		// without a zone (TIMESTAMP_S, _MS, TIMESTAMP, _NS), µs with
		// one (TIMESTAMPTZ).
		duckUnit := int64(1e3)
		if dt.TimeZone == "" {
			duckUnit = int64(dt.Unit.Multiplier())
		}
		p.width, need = 8, parquet.Types.Int64
		switch {
		case duckUnit == have:
			p.kind = pqCopy
		case duckUnit > have:
			p.kind, p.div = pqScale, duckUnit/have
		default:
			p.kind, p.mul = pqScale, have/duckUnit
		}
	case *arrow.DictionaryType:
		if dt.ValueType.ID() != arrow.STRING {
			return pqColPlan{}, false
		}
		p.kind, p.width, need = pqBytes, 16, parquet.Types.ByteArray
	case *arrow.StringType:
		p.kind, p.width, need = pqBytes, 16, parquet.Types.ByteArray
	case *arrow.BinaryType:
		p.kind, p.width, p.blob, need = pqBytes, 16, true, parquet.Types.ByteArray
	default:
		return pqColPlan{}, false
	}
	if phys != need {
		return pqColPlan{}, false
	}
	return p, true
}

// pqEncodingsKnown says whether the decoder knows every encoding of the
// column chunk cc: PLAIN values, dictionaries (PLAIN dictionary pages,
// RLE_DICTIONARY / PLAIN_DICTIONARY indices), RLE levels and RLE
// booleans. The pages' own encodings are checked again as they are read
// (a file whose pages contradict its metadata is corrupt: an error).
func pqEncodingsKnown(cc *metadata.ColumnChunkMetaData, kind pqKind) bool {
	if cc.CryptoMetadata() != nil {
		return false
	}
	valueOK := func(e parquet.Encoding) bool {
		switch e {
		case parquet.Encodings.Plain, parquet.Encodings.PlainDict, parquet.Encodings.RLEDict:
			return true
		case parquet.Encodings.RLE:
			return kind == pqBool
		}
		return false
	}
	if stats := cc.EncodingStats(); len(stats) > 0 {
		for _, s := range stats {
			switch s.PageType {
			case file.PageTypeDictionaryPage:
				if s.Encoding != parquet.Encodings.Plain && s.Encoding != parquet.Encodings.PlainDict {
					return false
				}
			case file.PageTypeDataPage, file.PageTypeDataPageV2:
				if !valueOK(s.Encoding) {
					return false
				}
			default:
				return false
			}
		}
	}
	// The chunk's list also names the levels' encodings: RLE is the one
	// known (BIT_PACKED, deprecated, is not).
	for _, e := range cc.Encodings() {
		if !valueOK(e) && e != parquet.Encodings.RLE {
			return false
		}
	}
	return true
}
