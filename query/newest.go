//go:build duckdb_arrow

package query

import (
	"cmp"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// The newest rows first.
//
// A query of the shape
//
//	SELECT columns | * FROM table [WHERE bounds on time] ORDER BY time DESC LIMIT n
//
// (what a dashboard asks for the latest points) needs only the rows of
// the n largest times, yet DuckDB's top-n reads every row the scan hands
// it. Its scan hands it less: the chunks and files whose every row
// matches for certain (metaAgg.sure: inside the bounds' exact interval
// and after the retention cutoff) are taken newest first by their least
// time until they hold n rows; T is the least time of the last taken.
// At least n matching rows then have a time of T or later, so no row
// older than T is among the answer's, and the chunks and files whose
// every time is before T are left out. Those with rows at T or later are
// all kept, so every row the answer could hold is read, ties included:
// the answer is one the full scan could give.
//
// SELECT max(time) FROM table [WHERE …], with no ORDER BY or LIMIT, is
// pruned as LIMIT 1: the greatest time is among the rows kept for the
// newest row (and DuckDB, handed them, answers NULL when no row
// matches, as none is found and nothing is left out). So is
// arg_max(col, time), the latest value of a series, counting only the
// rows where col is not NULL: those are what arg_max picks among (a
// persisted file's are not known, and count for none).
//
// With string equalities in the WHERE besides the bounds (WHERE host =
// 'h7' [AND …]: the latest points of a series), a chunk's sure rows are
// those of its rows whose columns hold the values (countCertain: a count
// over the chunk's dictionary indices, newest chunks first, so that the
// answer's few rows cost a chunk or two); a persisted file's are not
// known without reading it, and count for none, which prunes less but
// never wrongly.

// newestPrune is the pruning of one such query.
type newestPrune struct {
	key   buffer.TableKey // lower-cased
	n     int64
	exact timeBounds
	// equals, if set, are the values columns must hold besides (by
	// lower-cased column name; a row matches if each column holds one of
	// its values).
	equals map[string][]string
	// nonNull, if set, are the columns (lower-cased) a row must hold a
	// value in to count: those arg_max reads (newestAggregates).
	nonNull []string
}

// newestOf returns the pruning of the statement tree, nil if its shape
// is not the one above. exact, exactEq and equals are scanBounds'.
func newestOf(tree map[string]any, db string, exact, exactEq map[buffer.TableKey]timeBounds, equals map[buffer.TableKey]map[string][]string) *newestPrune {
	sel, ok := plainTableSelect(tree, db, exact)
	var eq map[string][]string
	if !ok {
		if sel, ok = plainTableSelect(tree, db, exactEq); !ok {
			return nil
		}
		if eq = equals[sel.key]; len(eq) == 0 {
			return nil
		}
	}
	node, key, b := sel.node, sel.key, sel.exact
	sh := &shapeCheck{alias: sel.alias, table: sel.table}
	// Only columns: a function in the list could be an aggregate or a
	// window, which reads every row.
	list, _ := node["select_list"].([]any)
	if len(list) == 0 {
		return nil
	}
	mods, _ := node["modifiers"].([]any)
	if nonNull, ok := newestAggregates(sh, list); ok {
		// SELECT max(time) FROM t WHERE host = 'h7' (when a series last
		// reported): the time of the newest matching row, which the
		// rows kept for LIMIT 1 hold, ties included; arg_max(col, time),
		// the newest matching row's col that is not NULL, is held by the
		// rows kept for LIMIT 1 of the rows where col is not NULL.
		if len(mods) > 0 {
			return nil
		}
		return &newestPrune{key: key, n: 1, exact: b, equals: eq, nonNull: nonNull}
	}
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m == nil {
			return nil
		}
		switch m["class"] {
		case "COLUMN_REF":
			if _, ok := sh.colRef(m); !ok {
				return nil
			}
		case "STAR":
			if !rowwiseStar(m) {
				return nil
			}
		default:
			return nil
		}
	}
	n, ok := sh.newestLimit(mods)
	if !ok {
		return nil
	}
	return &newestPrune{key: key, n: n, exact: b, equals: eq}
}

// newestAggregates says whether list is aggregates of the newest row
// alone: max(time), arg_max(time, time), arg_max_null(col, time), and
// arg_max (max_by) of columns by time, which pass over the rows whose
// column is NULL: those columns are nonNull (lower-cased).
func newestAggregates(sh *shapeCheck, list []any) (nonNull []string, ok bool) {
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m == nil || m["class"] != "FUNCTION" {
			return nil, false
		}
		col, ok := sh.lastAggregate(m)
		if !ok {
			return nil, false
		}
		if col != "" && !slices.Contains(nonNull, col) {
			nonNull = append(nonNull, col)
		}
	}
	return nonNull, true
}

// prune leaves out of chunks and files those whose rows are all older
// than the n newest that match for certain; it returns the rest and how
// many it left out. Chunks left out are released.
func (p *newestPrune) prune(chunks []buffer.Chunk, files []persist.File, cutoff int64) (_ []buffer.Chunk, _ []persist.File, nchunks, nfiles int) {
	sure := metaAgg{exact: p.exact}
	type span struct {
		min, rows int64
		rec       arrow.RecordBatch // with equals: its rows are to be counted
		series    map[string]buffer.SeriesIDs
	}
	var spans []span
	for _, c := range chunks {
		if n := c.Rec.NumRows(); n > 0 && sure.sure(c.MinTime, c.MaxTime, cutoff) {
			if p.equals != nil || p.nonNull != nil {
				spans = append(spans, span{min: c.MinTime, rec: c.Rec, series: c.Series})
			} else {
				spans = append(spans, span{min: c.MinTime, rows: n})
			}
		}
	}
	for _, f := range files {
		// A file's rows of a NULL column are not known: it counts none.
		if f.Rows > 0 && p.equals == nil && p.nonNull == nil && sure.sure(f.MinTime, f.MaxTime, cutoff) {
			spans = append(spans, span{min: f.MinTime, rows: f.Rows})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(b.min, a.min) })
	var rows int64
	threshold, found := int64(0), false
	memo := newSelectMemo()
	work := 0
	for _, s := range spans {
		if s.rec != nil {
			if work > newestCountBudget {
				break // a rare series: the full scan is cheaper than counting on
			}
			var w int
			s.rows, w = countCertain(s.rec, s.series, p.equals, p.nonNull, memo)
			work += w
		}
		if rows += s.rows; rows >= p.n {
			threshold, found = s.min, true
			break
		}
	}
	if !found {
		return chunks, files, 0, 0
	}
	keptChunks := chunks[:0]
	for _, c := range chunks {
		if c.Rec.NumRows() > 0 && c.MaxTime < threshold {
			c.Rec.Release()
			nchunks++
			continue
		}
		keptChunks = append(keptChunks, c)
	}
	keptFiles := files[:0]
	for _, f := range files {
		if f.Rows > 0 && f.MaxTime < threshold {
			nfiles++
			continue
		}
		keptFiles = append(keptFiles, f)
	}
	return keptChunks, keptFiles, nchunks, nfiles
}

// newestCountBudget bounds the work of counting a series' rows in the
// newest chunks (dictionary entries and rows looked at): about a
// millisecond.
const newestCountBudget = 1 << 22

// countCertain counts the rows of rec (a buffered chunk) whose columns
// hold one of the values equals gives them (selectRows; nil: every row)
// and that hold a value in every column of nonNull. A column it cannot
// test (missing from rec, not a string) makes the count 0: an undercount
// only prunes less. memo is the pruning's (its chunks are retained while
// it runs); work is the rows and dictionary entries looked at. series
// are the chunk's series ids (nil: none).
func countCertain(rec arrow.RecordBatch, series map[string]buffer.SeriesIDs, equals map[string][]string, nonNull []string, memo *selectMemo) (count int64, work int) {
	var cols []arrow.Array // of nonNull, those with a NULL
	for _, name := range nonNull {
		a, ok := uniqueColumn(rec, name)
		if !ok {
			return 0, 1 // every row NULL there
		}
		if a.NullN() > 0 {
			cols = append(cols, a)
		}
	}
	held := func(r int) bool {
		for _, a := range cols {
			if a.IsNull(r) {
				return false
			}
		}
		return true
	}
	if equals == nil {
		n := int(rec.NumRows())
		if len(cols) == 0 {
			return int64(n), 1
		}
		for r := range n {
			if held(r) {
				count++
			}
		}
		return count, n
	}
	searched := memo.searched
	sel, _, every := selectRows(rec, series, equals, memo)
	work = int(rec.NumRows()) + memo.searched - searched
	if !every {
		return 0, work
	}
	for _, r := range sel {
		if held(int(r)) {
			count++
		}
	}
	return count, work
}
