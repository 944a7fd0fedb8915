//go:build duckdb_arrow

package query

import (
	"strings"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/apron-db/apron/buffer"
)

// The statistics of a persisted file's row groups that pruning reads
// (time minima and maxima, string columns' minima and maxima) are decoded
// once per file, like its footer (pqfooter.go), not by every query that
// opens it: arrow-go builds a row group's column chunk and decodes its
// statistics anew on each call, which took 1.9 ms of every selective
// query over one 16M-row file (125 row groups), more than the rows it
// read.

// groupStats are the statistics of each row group of one file.
type groupStats struct {
	rows []int64
	// time: the time column's statistics (timeOK false: none).
	timeLo, timeHi []int64
	timeOK         []bool
	// strings: by lower-cased name, the top-level string columns that no
	// other column's name equals but for case.
	strings map[string]*stringStats
}

// stringStats are one string column's minima and maxima by row group
// (ok false: none recorded).
type stringStats struct {
	col    int // its index in the file's schema
	lo, hi []string
	ok     []bool
}

// decodeGroupStats decodes the row group statistics of md.
func decodeGroupStats(md *metadata.FileMetaData) *groupStats {
	n := md.NumRowGroups()
	gs := &groupStats{rows: make([]int64, n), timeLo: make([]int64, n), timeHi: make([]int64, n), timeOK: make([]bool, n)}
	timeCol := md.Schema.ColumnIndexByName(buffer.TimeColumn)
	cols := map[string]int{}
	for i := range md.Schema.NumColumns() {
		c := md.Schema.Column(i)
		if c.ColumnPath().String() != c.Name() {
			continue
		}
		name := strings.ToLower(c.Name())
		if _, dup := cols[name]; dup {
			cols[name] = -1 // two columns differing in case only: not sure which
			continue
		}
		if lt := c.LogicalType(); lt == nil || !lt.Equals(schema.StringLogicalType{}) {
			cols[name] = -1
			continue
		}
		cols[name] = i
	}
	for name, idx := range cols {
		if idx >= 0 {
			if gs.strings == nil {
				gs.strings = map[string]*stringStats{}
			}
			gs.strings[name] = &stringStats{col: idx, lo: make([]string, n), hi: make([]string, n), ok: make([]bool, n)}
		}
	}
	for g := range n {
		rg := md.RowGroup(g)
		gs.rows[g] = rg.NumRows()
		if timeCol >= 0 {
			gs.timeLo[g], gs.timeHi[g], gs.timeOK[g] = int64MinMax(rg, timeCol)
		}
		for _, st := range gs.strings {
			st.lo[g], st.hi[g], st.ok[g] = stringMinMax(rg, st.col)
		}
	}
	return gs
}

// cost is about the bytes gs takes.
func (gs *groupStats) cost() int64 {
	c := int64(len(gs.rows)) * 25
	for name, st := range gs.strings {
		c += int64(len(name)) + int64(len(st.ok))*33
		for g := range st.lo {
			c += int64(len(st.lo[g]) + len(st.hi[g]))
		}
	}
	return c + 64
}

// excludedByEquals says whether the statistics of row group g show that
// none of its rows holds, in some column of equals, one of the values the
// query wants (a file sorted by its string columns, as Apron's are, has
// row groups of a few series each: a query of one series skips the
// others). Apron's writer records exact minima and maxima or none (it
// never truncates them); a column without them prunes nothing.
func (gs *groupStats) excludedByEquals(g int, equals map[string][]string) bool {
	for col, vals := range equals {
		st := gs.strings[strings.ToLower(col)]
		if st == nil || !st.ok[g] {
			continue
		}
		inside := false
		for _, v := range vals {
			if st.lo[g] <= v && v <= st.hi[g] {
				inside = true
				break
			}
		}
		if !inside {
			return true
		}
	}
	return false
}

// chunkMinMax returns the min and max statistics of column col of rg, if
// it has them and they are of type S.
func chunkMinMax[S interface{ HasMinMax() bool }](rg *metadata.RowGroupMetaData, col int) (S, bool) {
	var zero S
	cc, err := rg.ColumnChunk(col)
	if err != nil {
		return zero, false
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return zero, false
	}
	s, ok := st.(S)
	return s, ok
}

// stringMinMax returns the min and max statistics of a string column
// chunk.
func stringMinMax(rg *metadata.RowGroupMetaData, col int) (lo, hi string, ok bool) {
	s, ok := chunkMinMax[*metadata.ByteArrayStatistics](rg, col)
	if !ok {
		return "", "", false
	}
	return string(s.Min()), string(s.Max()), true
}

// int64MinMax returns the min and max statistics of an INT64 column chunk.
func int64MinMax(rg *metadata.RowGroupMetaData, col int) (lo, hi int64, ok bool) {
	s, ok := chunkMinMax[*metadata.Int64Statistics](rg, col)
	if !ok {
		return 0, 0, false
	}
	return s.Min(), s.Max(), true
}
