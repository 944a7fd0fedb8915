//go:build duckdb_arrow

package query

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/apron-db/apron/buffer"
)

// A selective query (one series, a recent time range) wants a few
// thousand rows of a row group of 128Ki (a segment's file) or 1Mi (a
// merged one), and decompressing every page of the group was most of its
// time. Apron's files are sorted by their string columns, then time, so
// the rows of one series are one run of the group, in time order. The
// native decoder reads only the rows [lo, hi) that can match (rowRange):
//
//   - the run of the lead column (the first sort column) holding the
//     values the query wants of it (tableRef.equals), found by decoding
//     that column alone: dictionary indices in long runs, a page or two;
//   - within it, the pages of the time column whose statistics (the
//     column index) can meet the query's time bounds.
//
//   - within those, the rows from the first to the last whose time lies
//     within the bounds, by decoding the time column (timeRows).
//
// Every column then starts at lo through the offset index (pqColumn.seek:
// the pages before lo are not read) and stops at hi. Outside [lo, hi) no
// row can match, so DuckDB, which applies the WHERE clause itself, gets
// the same answer. Files written before page indexes, columns without
// one, or a lead column not in runs of dictionary indices: the whole
// group is read, as before.

// pqNarrow is what a scan's query lets its files' row groups be narrowed
// by.
type pqNarrow struct {
	want   map[string][]string // tableRef.equals: column (lower-cased) → values, sorted
	bounds timeBounds
}

func (g *scanGlobal) narrowing() pqNarrow {
	return pqNarrow{want: g.equals, bounds: g.bounds}
}

// rowRange is the rows [lo, hi) of row group u that can match the query,
// and the offset index of each of the file's columns when it is narrower
// than the group (else nil: read it all).
func (f *pqFile) rowRange(rg *file.RowGroupReader, u pqUnit, rows int, dicts *pqDictCache) (lo, hi int, pages map[int][]*metadata.PageLocation, err error) {
	lo, hi = 0, rows
	n := f.narrow
	if len(n.want) == 0 && n.bounds == allTime {
		return lo, hi, nil, nil
	}
	idx := f.pageIndexOf(u)
	if idx == nil {
		return lo, hi, nil, nil
	}
	md := f.p.pf.MetaData()
	if sc := rg.MetaData().SortingColumns(); len(sc) > 0 && len(n.want) > 0 {
		leaf := int(sc[0].ColumnIdx)
		if leaf >= 0 && leaf < md.Schema.NumColumns() && md.Schema.Column(leaf).LogicalType() != nil &&
			md.Schema.Column(leaf).LogicalType().Equals(schema.StringLogicalType{}) {
			if want, ok := n.want[strings.ToLower(md.Schema.Column(leaf).Name())]; ok {
				l, h, known, err := leadRange(rg, u, idx, leaf, md.Schema.Column(leaf).MaxDefinitionLevel() > 0, dicts, rows, want)
				if err != nil {
					return 0, 0, nil, err
				}
				if known {
					lo, hi = l, h
				}
			}
		}
	}
	tc := md.Schema.ColumnIndexByName(buffer.TimeColumn)
	if lo < hi && n.bounds != allTime && tc >= 0 {
		lo, hi = timeRange(idx, tc, lo, hi, rows, n.bounds)
	}
	if lo >= hi {
		return 0, 0, nil, nil
	}
	if lo == 0 && hi == rows {
		return lo, hi, nil, nil
	}
	pages = map[int][]*metadata.PageLocation{}
	for _, p := range f.plan {
		if p.leaf < 0 {
			continue
		}
		if _, ok := pages[p.leaf]; ok {
			continue
		}
		oi := idx.offsets[p.leaf]
		if oi == nil || len(oi.GetPageLocations()) == 0 {
			return 0, rows, nil, nil // a column without one: read the group whole
		}
		pages[p.leaf] = oi.GetPageLocations()
	}
	if n.bounds != allTime && tc >= 0 {
		if lo, hi, err = f.timeRows(rg, u, tc, pages[tc], lo, hi, n.bounds); err != nil {
			return 0, 0, nil, err
		}
		if lo >= hi {
			return 0, 0, nil, nil
		}
	}
	return lo, hi, pages, nil
}

// timeRows narrows [lo, hi) to the rows from the first to the last whose
// time lies within b, by decoding the time column over it. The column
// index (timeRange) knows pages, 8Ki rows of a float column: one host's
// last 10 minutes (173 rows) came with up to a page of rows before them,
// all decoded and handed to DuckDB to be filtered out. The rows before
// the first within b, and after the last, cannot match whatever the
// order of the rest (a NULL time matches no bound either). The time
// pages it decodes are decoded again by the scan: a page or two, against
// the rows of every column it keeps out of DuckDB. Only when the
// time column is read (its plan is the scan's), as DuckDB's nanoseconds;
// else [lo, hi) as it is.
func (f *pqFile) timeRows(rg *file.RowGroupReader, u pqUnit, tc int, pages []*metadata.PageLocation, lo, hi int, b timeBounds) (int, int, error) {
	var plan *pqColPlan
	for i := range f.plan {
		if p := &f.plan[i]; p.leaf == tc && (p.kind == pqCopy || p.kind == pqScale) && p.width == 8 {
			plan = p
			break
		}
	}
	if plan == nil || len(pages) == 0 {
		return lo, hi, nil
	}
	c := newPQColumn(*plan, u.pager(rg, tc), nil)
	defer c.close()
	if err := c.seek(lo, pages); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 8*vectorSize)
	first, last := -1, -1
	for pos := lo; pos < hi; {
		n, levels, nv, err := c.nextRun(min(hi-pos, vectorSize))
		if err != nil {
			return 0, 0, err
		}
		if err := c.values(buf[:8*nv], nv); err != nil {
			return 0, 0, err
		}
		vals, j := asInt64s(buf[:8*nv]), 0
		for i := range n {
			if levels != nil && levels[i] == 0 {
				continue // NULL: no bound holds
			}
			if v := vals[j]; v >= b.min && v <= b.max {
				if first < 0 {
					first = pos + i
				}
				last = pos + i
			}
			j++
		}
		c.left -= n
		pos += n
	}
	if first < 0 {
		return lo, lo, nil
	}
	return first, last + 1, nil
}

// leadRange decodes the row group's lead column (leaf) to find the hull
// [lo, hi) of the rows holding a value of want; known is false when it
// cannot tell (a page not dictionary-encoded, or indices not in runs it
// can read), and lo == hi when no row holds one.
func leadRange(rg *file.RowGroupReader, u pqUnit, idx *rgIndex, leaf int, nullable bool, dicts *pqDictCache, rows int, want []string) (lo, hi int, known bool, err error) {
	c := newPQColumn(pqColPlan{leaf: leaf, kind: pqBytes, width: 16, nullable: nullable}, u.pager(rg, leaf), dicts)
	defer c.close()
	// Through the offset index, its pages come from the page cache.
	if oi := idx.offsets[leaf]; oi != nil && len(oi.GetPageLocations()) > 0 {
		if err := c.seek(0, oi.GetPageLocations()); err != nil {
			return 0, 0, false, err
		}
	}
	lo, hi = -1, -1
	matches := map[uint32]bool{}
	checked := map[uint32]bool{}
	match := func(v uint32) bool {
		if !checked[v] {
			checked[v] = true
			matches[v] = hasValue(want, string(c.strs.value(v)))
		}
		return matches[v]
	}
	for pos := 0; pos < rows; {
		v, run, err := c.constRun()
		if err != nil {
			return 0, 0, false, err
		}
		if !c.indexed || c.strs == nil {
			return 0, 0, false, nil // plain strings: not worth decoding here
		}
		if run > 0 {
			if match(v) {
				if lo < 0 {
					lo = pos
				}
				hi = pos + run
			}
			if got, err := c.idx.skip(run); err != nil || got < run {
				return 0, 0, false, fmt.Errorf("%w: %w", errCorrupt, err)
			}
			if c.p.nullable {
				c.defs.skip(run)
			}
			c.left -= run
			pos += run
			continue
		}
		// A NULL, or indices bit-packed (short runs): one row.
		_, nv, err := c.defsOf(1)
		if err != nil {
			return 0, 0, false, err
		}
		if nv == 1 {
			ind, err := c.indices(1)
			if err != nil {
				return 0, 0, false, err
			}
			if int(ind[0]) >= c.strs.n() {
				return 0, 0, false, fmt.Errorf("%w: a dictionary index out of range", errCorrupt)
			}
			if match(ind[0]) {
				if lo < 0 {
					lo = pos
				}
				hi = pos + 1
			}
		}
		c.left--
		pos++
	}
	if lo < 0 {
		return 0, 0, true, nil
	}
	return lo, hi, true, nil
}

// timeRange narrows [lo, hi) to the hull of the time column's pages
// (leaf tc) within it whose statistics can meet b; the column is never
// NULL. Without a column index it is left as it is.
func timeRange(idx *rgIndex, tc, lo, hi, rows int, b timeBounds) (int, int) {
	ci, oi := idx.columns[tc], idx.offsets[tc]
	if ci == nil || oi == nil {
		return lo, hi
	}
	locs, mins, maxs, nulls := oi.GetPageLocations(), ci.GetMinValues(), ci.GetMaxValues(), ci.GetNullPages()
	if len(locs) == 0 || len(mins) != len(locs) || len(maxs) != len(locs) || len(nulls) != len(locs) {
		return lo, hi
	}
	nlo, nhi := hi, lo
	for i, loc := range locs {
		start, end := int(loc.FirstRowIndex), rows
		if i+1 < len(locs) {
			end = int(locs[i+1].FirstRowIndex)
		}
		if end <= lo || start >= hi {
			continue
		}
		if !nulls[i] && len(mins[i]) == 8 && len(maxs[i]) == 8 {
			pmin, pmax := int64(binary.LittleEndian.Uint64(mins[i])), int64(binary.LittleEndian.Uint64(maxs[i]))
			if pmax < b.min || pmin > b.max {
				continue
			}
		}
		nlo, nhi = min(nlo, max(start, lo)), max(nhi, min(end, hi))
	}
	return nlo, nhi
}
