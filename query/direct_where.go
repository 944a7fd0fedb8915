//go:build duckdb_arrow

package query

import (
	"errors"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/buffer"
)

// A filtered direct scan is a direct scan (direct.go) with a WHERE clause
// made of nothing but comparisons of time with constants and equalities
// of string columns with string constants, joined by AND: what a
// dashboard asks of one series lately,
//
//	SELECT * FROM cpu WHERE host = 'host-7' AND time >= now() - INTERVAL 10 MINUTE
//
// DuckDB adds nothing to it but its scheduling: it ran such a query in a
// pipeline task that its worker thread, woken for every task, often took
// from the query's own thread, and on a busy machine that hand-over was
// most of the query's p99 (README, "Tail latency of a selective query").
// The scan filters the rows itself, exactly as DuckDB would:
//
//   - time: every bound is evaluated to the ns value DuckDB compares the
//     column with. DuckDB compares a TIMESTAMP_NS column with a
//     TIMESTAMP, a TIMESTAMP_NS or a string (cast to TIMESTAMP_NS) at ns;
//     those constants' values come from evalTimes (evaluated.exact).
//     now() ± INTERVAL n unit (whole numbers of fixed-length units) is
//     evaluated from one reading of the Go clock: DuckDB does not run,
//     so that reading is the query's now(), like the transaction start
//     it stands for. Anything else (dates, functions, fractions, NULL)
//     is left to DuckDB.
//   - strings: a row matches `col = 'v'` if its value is v, byte for
//     byte (DuckDB's default collation); NULL never matches; a chunk
//     without the column has NULLs there. Only columns of string type in
//     the catalog (a number compared with a string is compared as a
//     number).
//
// Persisted files the bounds leave to read are read through the scan
// DuckDB would call, which narrows their row groups to the series' pages
// (pqrange.go, from the page cache: pqpages.go), and filtered the same way
// (direct_files.go).

// directWhere is the WHERE clause of a filtered direct scan.
type directWhere struct {
	bounds []directBound
	equals map[string][]string
}

// directBound is one comparison of time with a bound: time >= x (or >
// when strict) for a lower one, time <= x (or <) for an upper one.
type directBound struct {
	x       any    // the bound expression (parsed)
	key     string // its key in boundValues (boundKey)
	hasFunc bool   // evaluated at now (nowBound), not a kept constant
	upper   bool
	strict  bool
}

// directWhereOf recognizes the WHERE clause of a direct scan of from;
// false: it is something else (DuckDB runs the query).
func directWhereOf(where any, from *fromTable, alias, name string) (*directWhere, bool) {
	r := &tableRef{}
	(&walker{}).bounds(where, alias, name, r)
	if r.other || len(r.lower)+len(r.upper)+len(r.equals) == 0 {
		return nil, false
	}
	for col := range r.equals {
		i, ok := from.byName[col]
		if !ok || from.table.Columns[i].Type.ID() != arrow.STRING {
			return nil, false
		}
	}
	w := &directWhere{equals: r.equals}
	add := func(exprs []any, strict []bool, upper bool) bool {
		for i, x := range exprs {
			key, hasFunc := boundKey(x)
			if hasFunc && !wholeIntervals(x) {
				return false
			}
			w.bounds = append(w.bounds, directBound{x: x, key: key, hasFunc: hasFunc, upper: upper, strict: strict[i]})
		}
		return true
	}
	if !add(r.lower, r.lowerStrict, false) || !add(r.upper, r.upperStrict, true) {
		return nil, false
	}
	return w, true
}

// wholeIntervals says whether every interval constructor in e has a whole
// number of its unit (INTERVAL 10 MINUTE parses to
// to_minutes(CAST(trunc(CAST(10 AS DOUBLE)) AS BIGINT)), INTERVAL 600
// SECOND to to_seconds(CAST(600 AS DOUBLE))): the interval is then exact
// in Go as in DuckDB, where a fraction of a second could round.
func wholeIntervals(e any) bool {
	m, _ := e.(map[string]any)
	if m == nil {
		return true
	}
	if m["class"] == "FUNCTION" {
		name, _ := m["function_name"].(string)
		children, _ := m["children"].([]any)
		if _, ok := intervalUnits[name]; ok {
			if len(children) != 1 {
				return false
			}
			n, ok := number(children[0])
			return ok && n == math.Trunc(n)
		}
		for _, c := range children {
			if !wholeIntervals(c) {
				return false
			}
		}
	}
	return true
}

// interval is the times the clause admits, [min, max], evaluated at now;
// false when a bound's exact value is not known here.
func (w *directWhere) interval(e *Engine, now time.Time) (timeBounds, bool) {
	b := allTime
	for _, d := range w.bounds {
		var v int64
		ok := false
		if d.hasFunc {
			v, _, ok = nowBound(d.x, now)
		} else if ev, kept := e.boundValues.peek(d.key); kept && ev.ok && ev.exact {
			v, ok = ev.at, true
		}
		if !ok {
			return b, false
		}
		switch {
		case d.strict && !d.upper && v == math.MaxInt64, d.strict && d.upper && v == math.MinInt64:
			return emptyTime, true // > the last time, < the first
		case d.strict && !d.upper:
			v++
		case d.strict:
			v--
		}
		if d.upper {
			b.max = min(b.max, v)
		} else {
			b.min = max(b.min, v)
		}
	}
	return b, true
}

// directFilter keeps the rows of chunks that a filtered direct scan's
// clause admits.
type directFilter struct {
	b      timeBounds
	equals map[string][]string
	memo   *selectMemo
}

// rows returns the rows of c the filter keeps: c itself (retained) when
// all are, nil when none is, else a new batch of them.
func (f *directFilter) rows(c buffer.Chunk, mem memory.Allocator) (arrow.RecordBatch, error) {
	rec := c.Rec
	n := int(rec.NumRows())
	if f.b.misses(int64(n), c.MinTime, c.MaxTime) {
		return nil, nil
	}
	var sel []int32
	tested := false
	if len(f.equals) > 0 {
		for col := range f.equals {
			if _, ok := uniqueColumn(rec, col); !ok {
				return nil, nil // the column is NULL in this chunk
			}
		}
		var every bool
		sel, tested, every = selectRows(rec, c.Series, f.equals, f.memo)
		if !every {
			return nil, errFilterUnknown
		}
		if len(sel) == 0 {
			return nil, nil
		}
	}
	if c.MinTime < f.b.min || c.MaxTime > f.b.max {
		col, ok := uniqueColumn(rec, buffer.TimeColumn)
		ts, isTS := col.(*array.Timestamp)
		if !ok || !isTS || ts.NullN() > 0 {
			return nil, errFilterUnknown
		}
		times := ts.TimestampValues()
		keep := func(i int) bool { t := int64(times[i]); return t >= f.b.min && t <= f.b.max }
		sel, tested = selectBy(n, keep, sel, tested), true
		if len(sel) == 0 {
			return nil, nil
		}
	}
	if !tested || len(sel) == n {
		rec.Retain()
		return rec, nil
	}
	cols, err := takeColumns(mem, rec.Columns(), sel)
	if err != nil {
		return nil, err
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(len(sel)))
	for _, a := range cols {
		a.Release()
	}
	return out, nil
}

// errFilterUnknown: a chunk holds a column in a form the filter does not
// know (the clause's columns are checked against the catalog first, so
// this would be a bug; the query fails rather than answer wrong).
var errFilterUnknown = errors.New("query: a buffered chunk holds the time or a compared column in a form the direct scan cannot filter (a bug: please report it with the table's schema); the same query with another condition DuckDB evaluates, such as AND random() >= 0, runs on DuckDB")
