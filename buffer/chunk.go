package buffer

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TimeColumn is the name of the column every table has: timestamp[ns], no
// time zone, UTC by convention.
const TimeColumn = "time"

var timeType = &arrow.TimestampType{Unit: arrow.Nanosecond}

// Chunk is an immutable batch of buffered rows of one table and partition,
// with the range of its time column. Columns are those the partition had
// when the chunk was built, in the table's column order; strings are
// dictionary<int32, utf8>.
type Chunk struct {
	Rec              arrow.RecordBatch
	MinTime, MaxTime int64 // ns since the epoch, inclusive
	// Series are the series ids of the dictionaries of string columns,
	// by column name, for those that have them (series.go).
	Series map[string]SeriesIDs
}

// ChunkStat is a chunk's rows and time range, without its data: what a
// count or the extremes of time are answered from.
type ChunkStat struct {
	Rows             int64
	MinTime, MaxTime int64 // ns since the epoch, inclusive
}

// addStat is the stat of the rows of a and b (the zero stat: none).
func addStat(a, b ChunkStat) ChunkStat {
	if a.Rows == 0 {
		return b
	}
	if b.Rows == 0 {
		return a
	}
	return ChunkStat{Rows: a.Rows + b.Rows, MinTime: min(a.MinTime, b.MinTime), MaxTime: max(a.MaxTime, b.MaxTime)}
}

// openChunk is the chunk of a partition that takes appends until it holds
// chunkRows rows and is sealed.
type openChunk struct {
	dicts  map[string]*stringDict // the partition's, by column name
	series map[string]*SeriesSpace
	fields []arrow.Field
	cols   []column
	byName map[string]int
	n      int
	rows   int // rows it is expected to take, for reserve
	minT   int64
	maxT   int64
}

// newOpenChunk returns an empty chunk over a partition's dictionaries and
// series spaces that expects about rows rows.
func newOpenChunk(dicts map[string]*stringDict, series map[string]*SeriesSpace, rows int) *openChunk {
	return &openChunk{dicts: dicts, series: series, rows: rows, byName: make(map[string]int), minT: math.MaxInt64, maxT: math.MinInt64}
}

// addColumn adds a column, null in the rows already there.
func (c *openChunk) addColumn(name string, logical arrow.DataType) (int, error) {
	var dict *stringDict
	if logical.ID() == arrow.STRING {
		if dict = c.dicts[name]; dict == nil {
			dict = newStringDict()
			c.dicts[name] = dict
			sp := c.series[name]
			if sp == nil {
				sp = newSeriesSpace()
				c.series[name] = sp
			}
			if !sp.full {
				sp.begin(dict)
			}
		}
	}
	col, err := newColumn(logical, dict)
	if err != nil {
		return 0, err
	}
	col.reserve(c.rows)
	if c.n > 0 {
		col.appendNulls(c.n)
	}
	typ := logical
	if logical.ID() == arrow.STRING {
		typ = stringDictType
	}
	c.fields = append(c.fields, arrow.Field{Name: name, Type: typ, Nullable: name != TimeColumn})
	c.cols = append(c.cols, col)
	c.byName[name] = len(c.cols) - 1
	return len(c.cols) - 1, nil
}

// append appends rows [off, off+n) of b.
func (c *openChunk) append(b *batch, off, n int) error {
	if c.n == 0 && len(c.cols) == 0 {
		if _, err := c.addColumn(TimeColumn, timeType); err != nil {
			return err
		}
	}
	seen := 0
	for i, f := range b.rec.Schema().Fields() {
		ci, ok := c.byName[f.Name]
		if !ok {
			var err error
			if ci, err = c.addColumn(f.Name, b.logical[i]); err != nil {
				return err
			}
		}
		if err := c.cols[ci].appendFrom(b.rec.Column(i), off, n); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
		seen++
	}
	if seen < len(c.cols) {
		for ci, f := range c.fields {
			if b.rec.Schema().HasField(f.Name) {
				continue
			}
			c.cols[ci].appendNulls(n)
		}
	}
	for _, t := range b.times[off : off+n] {
		c.minT = min(c.minT, t)
		c.maxT = max(c.maxT, t)
	}
	c.n += n
	return nil
}

// chunk returns the rows so far as a Chunk. own means the open chunk is
// being sealed and is not appended to again.
func (c *openChunk) chunk(own bool) Chunk {
	arrs := make([]arrow.Array, len(c.cols))
	var series map[string]SeriesIDs
	for i, col := range c.cols {
		arrs[i] = col.array(c.n, own)
		if sc, ok := col.(*stringColumn); ok {
			if ids, ok := sc.seriesIDs(); ok {
				if series == nil {
					series = make(map[string]SeriesIDs)
				}
				series[c.fields[i].Name] = ids
			}
		}
	}
	fields := c.fields[:len(c.fields):len(c.fields)]
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(c.n))
	for _, a := range arrs {
		a.Release()
	}
	return Chunk{Rec: rec, MinTime: c.minT, MaxTime: c.maxT, Series: series}
}

func (c *openChunk) size() int64 {
	var s int64
	for _, col := range c.cols {
		s += col.size()
	}
	return s
}
