//go:build duckdb_arrow

package query

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/apron-db/apron/buffer"
)

// Persisted files read by DuckDB's own read_parquet.
//
// Each table's view is
//
//	SELECT * FROM apron_scan('db', 't', n) UNION ALL SELECT * FROM temp.main.apron_files_<id>()
//
// where apron_files_<id> is a TEMP table macro: private to each
// connection. Before a query is prepared, the macro of every table the
// query names is made, on the query's connection, to read that table's
// persisted files of the query's View (those that can match its time
// bounds, fetched into the cache and pinned until the query ends) with
// read_parquet; every other table's macro is an empty SELECT of the
// view's column types. apron_scan reads the persisted files of a table
// only when its macro does not (queryState.native), so each row of the
// View is read once.

// nativeCol is one column of a view: its name in DuckDB, the Apron
// column it comes from, and its DuckDB type.
type nativeCol struct{ name, src, typ string }

// macroName is the temp macro a view's persisted files are read through.
func macroName(id int) string { return fmt.Sprintf("apron_files_%d", id) }

// emptyBody is the SELECT of no rows of the view's columns.
func emptyBody(cols []nativeCol) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "CAST(NULL AS %s) AS %s", c.typ, quoteIdent(c.name))
	}
	b.WriteString(" WHERE false")
	return b.String()
}

func macroSQL(name, body string) string {
	return "CREATE OR REPLACE TEMP MACRO " + name + "() AS TABLE " + body
}

// footer is what the engine keeps of a persisted file's footer.
type footer struct {
	cols   map[string]bool
	groups []groupStats
}

type groupStats struct {
	rows   int64
	lo, hi int64
	ok     bool
}

// footers caches footers by local path and size (files never change).
type footerCache struct {
	mu sync.Mutex
	m  map[string]*footer
}

func (fc *footerCache) get(path string, size int64) (*footer, error) {
	key := fmt.Sprintf("%s\x00%d", path, size)
	fc.mu.Lock()
	f, ok := fc.m[key]
	fc.mu.Unlock()
	if ok {
		return f, nil
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	md := pf.MetaData()
	f = &footer{cols: map[string]bool{}}
	for i := range md.Schema.NumColumns() {
		f.cols[md.Schema.Column(i).Name()] = true
	}
	timeCol := md.Schema.ColumnIndexByName(buffer.TimeColumn)
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		g := groupStats{rows: rg.NumRows()}
		if timeCol >= 0 {
			g.lo, g.hi, g.ok = int64MinMax(rg, timeCol)
		}
		f.groups = append(f.groups, g)
	}
	fc.mu.Lock()
	if fc.m == nil || len(fc.m) > 100_000 {
		fc.m = map[string]*footer{}
	}
	fc.m[key] = f
	fc.mu.Unlock()
	return f, nil
}

// allowedDirs are the directories DuckDB may read: the cache's and a
// local store's.
func (e *Engine) allowedDirs() []string {
	var dirs []string
	add := func(d string) {
		if d == "" {
			return
		}
		if a, err := filepath.Abs(d); err == nil {
			if r, err := filepath.EvalSymlinks(a); err == nil {
				a = r
			}
			dirs = append(dirs, strings.TrimSuffix(a, string(filepath.Separator))+string(filepath.Separator))
		}
	}
	if e.cache != nil {
		add(e.cache.dir)
		if d, ok := e.cache.store.(interface{ Dir() string }); ok {
			add(d.Dir())
		}
	}
	return dirs
}

// nativePath returns the path DuckDB is to read a local file by, if it
// may (within an allowed directory, no glob characters).
func (e *Engine) nativePath(p string) (string, bool) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		a = r
	}
	if strings.ContainsAny(a, "*?[]{}'\\") {
		return "", false
	}
	for _, d := range e.nativeDirs {
		if strings.HasPrefix(a, d) {
			return a, true
		}
	}
	return "", false
}

// setFiles makes the file macros of connection c match the query state
// qs: the tables the query names (refs) read their files natively when
// possible; every other macro is empty. The caller holds the views' bind
// lock (read).
func (e *Engine) setFiles(c *conn, qs *queryState, refs map[buffer.TableKey]bool) error {
	if c.macros == nil {
		c.macros = map[string]string{}
	}
	native := map[buffer.TableKey]bool{}
	var byTable map[buffer.TableKey][]buffer.PersistedFile
	for _, v := range e.views.mu.views {
		if v.id == 0 {
			continue
		}
		name := macroName(v.id)
		body := v.empty
		key := lowerKey(v.db, v.table)
		if refs[key] && e.cache != nil {
			if byTable == nil {
				byTable = map[buffer.TableKey][]buffer.PersistedFile{}
				for _, ps := range qs.view.Persisted {
					for _, f := range ps.Files {
						k := buffer.TableKey{Database: f.Database, Table: f.Table}
						byTable[k] = append(byTable[k], f)
					}
				}
			}
			b, ok, err := e.filesBody(qs, v, byTable[buffer.TableKey{Database: v.db, Table: v.table}])
			if err != nil {
				return err
			}
			if ok {
				native[key] = true
				if b != "" {
					body = b
				}
			}
		}
		if c.macros[name] == body {
			continue
		}
		if err := exec(c.c, macroSQL(name, body)); err != nil {
			delete(c.macros, name)
			return fmt.Errorf("query: setting the files of %q.%q: %w", v.db, v.table, err)
		}
		c.macros[name] = body
	}
	// Stored again: the scans that load it see native.
	qs.native = native
	e.qstate.Store(c.id, qs)
	return nil
}

// filesBody returns the SELECT reading the table's files that can match
// the query's bounds ("" when none can), fetching and pinning them; false
// when they cannot all be read natively (the scan reads them then).
func (e *Engine) filesBody(qs *queryState, v view, files []buffer.PersistedFile) (string, bool, error) {
	b := qs.boundsOf(buffer.TableKey{Database: v.db, Table: v.table})
	type local struct {
		path string
		ft   *footer
	}
	var locals []local
	var unpins []func()
	fail := func() {
		for _, u := range unpins {
			u()
		}
	}
	pruned := 0
	var scanned, groupsScanned, groupsPruned int64
	for _, f := range files {
		if f.Rows == 0 || f.MaxTime < b.min || f.MinTime > b.max {
			pruned++
			continue
		}
		p, unpin, err := e.cache.acquire(qs.ctx, f)
		if err != nil {
			fail()
			return "", false, err
		}
		np, ok := e.nativePath(p)
		if !ok {
			unpin()
			fail()
			return "", false, nil
		}
		ft, err := e.footers.get(np, f.Size)
		if err != nil {
			unpin()
			fail()
			return "", false, fmt.Errorf("reading %s: %w", f.Path, err)
		}
		n := 0
		for _, g := range ft.groups {
			if g.rows == 0 {
				continue
			}
			if b != allTime && g.ok && (g.hi < b.min || g.lo > b.max) {
				groupsPruned++
				continue
			}
			n++
		}
		if n == 0 {
			unpin()
			pruned++
			continue
		}
		groupsScanned += int64(n)
		scanned++
		unpins = append(unpins, unpin)
		locals = append(locals, local{np, ft})
	}
	e.filesPruned.Add(int64(pruned))
	e.filesScanned.Add(scanned)
	e.rowGroupsScanned.Add(groupsScanned)
	e.rowGroupsPruned.Add(groupsPruned)
	qs.unpins = append(qs.unpins, unpins...)
	if len(locals) == 0 {
		return "", true, nil
	}
	// One read_parquet per set of columns the files have.
	groups := map[string][]string{}
	var sigs []string
	for _, l := range locals {
		var sig strings.Builder
		for _, c := range v.cols {
			if l.ft.cols[c.src] {
				sig.WriteByte('1')
			} else {
				sig.WriteByte('0')
			}
		}
		s := sig.String()
		if _, ok := groups[s]; !ok {
			sigs = append(sigs, s)
		}
		groups[s] = append(groups[s], quoteLiteral(l.path))
	}
	sort.Strings(sigs)
	var out strings.Builder
	for gi, s := range sigs {
		if gi > 0 {
			out.WriteString(" UNION ALL ")
		}
		out.WriteString("SELECT ")
		for i, c := range v.cols {
			if i > 0 {
				out.WriteString(", ")
			}
			if s[i] == '1' {
				fmt.Fprintf(&out, "CAST(%s AS %s) AS %s", quoteIdent(c.src), c.typ, quoteIdent(c.name))
			} else {
				fmt.Fprintf(&out, "CAST(NULL AS %s) AS %s", c.typ, quoteIdent(c.name))
			}
		}
		fmt.Fprintf(&out, " FROM read_parquet([%s])", strings.Join(groups[s], ", "))
	}
	return out.String(), true, nil
}
