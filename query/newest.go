//go:build duckdb_arrow

package query

import (
	"cmp"
	"slices"

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

// newestPrune is the pruning of one such query.
type newestPrune struct {
	key   buffer.TableKey // lower-cased
	n     int64
	exact timeBounds
}

// newestOf returns the pruning of the statement tree, nil if its shape
// is not the one above. exact is scanBounds'.
func newestOf(tree map[string]any, db string, exact map[buffer.TableKey]timeBounds) *newestPrune {
	sel, ok := plainTableSelect(tree, db, exact)
	if !ok {
		return nil
	}
	node, key, b := sel.node, sel.key, sel.exact
	sh := &shapeCheck{alias: sel.alias, table: sel.table}
	// Only columns: a function in the list could be an aggregate or a
	// window, which reads every row.
	list, _ := node["select_list"].([]any)
	if len(list) == 0 {
		return nil
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
	mods, _ := node["modifiers"].([]any)
	n, ok := sh.newestLimit(mods)
	if !ok {
		return nil
	}
	return &newestPrune{key: key, n: n, exact: b}
}

// prune leaves out of chunks and files those whose rows are all older
// than the n newest that match for certain; it returns the rest and how
// many it left out. Chunks left out are released.
func (p *newestPrune) prune(chunks []buffer.Chunk, files []persist.File, cutoff int64) (_ []buffer.Chunk, _ []persist.File, nchunks, nfiles int) {
	sure := metaAgg{exact: p.exact}
	type span struct{ min, rows int64 }
	var spans []span
	for _, c := range chunks {
		if n := c.Rec.NumRows(); n > 0 && sure.sure(c.MinTime, c.MaxTime, cutoff) {
			spans = append(spans, span{c.MinTime, n})
		}
	}
	for _, f := range files {
		if f.Rows > 0 && sure.sure(f.MinTime, f.MaxTime, cutoff) {
			spans = append(spans, span{f.MinTime, f.Rows})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(b.min, a.min) })
	var rows int64
	threshold, found := int64(0), false
	for _, s := range spans {
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
