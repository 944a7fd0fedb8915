//go:build duckdb_arrow

package query

/*
#include <stdlib.h>

void apron_scan_bind(void *);
void apron_scan_init(void *);
void apron_scan_local_init(void *);
void apron_scan_func(void *, void *);
void apron_delete_handle(void *);

typedef void (*apron_bind_t)(void *);
typedef void (*apron_init_t)(void *);
typedef void (*apron_func_t)(void *, void *);
typedef void (*apron_delete_t)(void *);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/cgo"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/persist"
)

// scanFunction is the name of the table function views select from.
const scanFunction = "apron_scan"

// vectorSize is DuckDB's STANDARD_VECTOR_SIZE: the most rows a table
// function may emit per call.
const vectorSize = 2048

// stringDictType is how the buffer stores strings.
var stringDictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// newHandle stores v in C memory as a cgo.Handle, for DuckDB to hold as
// extra info, bind data or init data. apron_delete_handle frees it.
func newHandle(v any) unsafe.Pointer {
	p := C.malloc(C.size_t(unsafe.Sizeof(cgo.Handle(0))))
	*(*cgo.Handle)(p) = cgo.NewHandle(v)
	return p
}

func handleValue(p unsafe.Pointer) any { return (*(*cgo.Handle)(p)).Value() }

var deleteHandlePtr = unsafe.Pointer(C.apron_delete_t(C.apron_delete_handle))

// destroyer is implemented by handle values that hold resources.
type destroyer interface{ destroy() }

//export apron_delete_handle
func apron_delete_handle(p unsafe.Pointer) {
	h := *(*cgo.Handle)(p)
	defer func() {
		_ = recover() // nothing to report to; never unwind into C
		h.Delete()
		C.free(p)
	}()
	if d, ok := h.Value().(destroyer); ok {
		d.destroy()
	}
}

// recoverMessage turns a panic into an error message for DuckDB, so that a
// bug fails the query instead of unwinding into C.
func recoverMessage(set func(string)) {
	if r := recover(); r != nil {
		set(fmt.Sprintf("apron_scan: internal error: %v", r))
	}
}

// registerScan registers apron_scan(db VARCHAR, table VARCHAR, ncols BIGINT).
func (e *Engine) registerScan() error {
	f := duck.CreateTableFunction()
	defer duck.DestroyTableFunction(&f)
	duck.TableFunctionSetName(f, scanFunction)
	varchar := duck.CreateLogicalType(duck.TypeVarchar)
	bigint := duck.CreateLogicalType(duck.TypeBigInt)
	duck.TableFunctionAddParameter(f, varchar)
	duck.TableFunctionAddParameter(f, varchar)
	duck.TableFunctionAddParameter(f, bigint)
	duck.DestroyLogicalType(&varchar)
	duck.DestroyLogicalType(&bigint)
	duck.TableFunctionSetExtraInfo(f, newHandle(e), deleteHandlePtr)
	duck.TableFunctionSupportsProjectionPushdown(f, true)
	duck.TableFunctionSetBind(f, unsafe.Pointer(C.apron_bind_t(C.apron_scan_bind)))
	duck.TableFunctionSetInit(f, unsafe.Pointer(C.apron_init_t(C.apron_scan_init)))
	duck.TableFunctionSetLocalInit(f, unsafe.Pointer(C.apron_init_t(C.apron_scan_local_init)))
	duck.TableFunctionSetFunction(f, unsafe.Pointer(C.apron_func_t(C.apron_scan_func)))
	if duck.RegisterTableFunction(e.conv, f) == duck.StateError {
		return errors.New("query: registering the apron_scan table function failed")
	}
	return nil
}

// bindData is one scan's table and columns, fixed at bind. A plan kept
// for the next query of the same text (plancache.go) keeps its bind data,
// so nothing of one query is kept here: the query's state (its View, time
// bounds, equalities, caller) is looked up by connection at init.
type bindData struct {
	e      *Engine
	key    buffer.TableKey
	fields []arrow.Field // the first ncols columns, strings as dictionaries
	// conn is the DuckDB connection the scan is bound on: its query state
	// (Engine.qstate) is the query the scan runs in.
	conn uint64
	// lastValue: a scan of the table's last-value cache (last_value).
	lastValue bool
}

// queryOf returns the state of the query the scan runs in, nil when it
// runs outside a query (the engine's own connections). A scan on a pooled
// connection, which runs clients' statements, must run in a query that
// was admitted to read its table's database: checked at bind, and again
// at every init, as a plan kept from another query is not bound again.
func (bd *bindData) queryOf() (*queryState, error) {
	var qs *queryState
	if v, ok := bd.e.qstate.Load(bd.conn); ok {
		qs = v.(*queryState)
	}
	if _, pooled := bd.e.pooled.Load(bd.conn); pooled && (qs == nil || !qs.databases[strings.ToLower(bd.key.Database)]) {
		return nil, fmt.Errorf("table %q.%q is not among the tables the statement was admitted to read", bd.key.Database, bd.key.Table)
	}
	return qs, nil
}

//export apron_scan_bind
func apron_scan_bind(p unsafe.Pointer) {
	info := duck.BindInfo{Ptr: p}
	defer recoverMessage(func(msg string) { duck.BindSetError(info, msg) })
	e := handleValue(duck.BindGetExtraInfo(info)).(*Engine)
	if err := e.bind(info); err != nil {
		duck.BindSetError(info, err.Error())
	}
}

func (e *Engine) bind(info duck.BindInfo) error {
	param := func(i int) duck.Value { return duck.BindGetParameter(info, duck.IdxT(i)) }
	v0, v1, v2 := param(0), param(1), param(2)
	db, table, ncols := duck.GetVarchar(v0), duck.GetVarchar(v1), duck.GetInt64(v2)
	duck.DestroyValue(&v0)
	duck.DestroyValue(&v1)
	duck.DestroyValue(&v2)
	return e.bindTable(info, db, table, ncols, false)
}

// bindTable binds a scan of db.table's first ncols columns (all if 0);
// lastValue: of its last-value cache's rows (last_value, lastvalue.go).
func (e *Engine) bindTable(info duck.BindInfo, db, table string, ncols int64, lastValue bool) error {
	var cc duck.ClientContext
	duck.TableFunctionGetClientContext(info, &cc)
	id := uint64(duck.ClientContextGetConnectionId(cc))
	duck.DestroyClientContext(&cc)
	var qs *queryState
	if v, ok := e.qstate.Load(id); ok {
		qs = v.(*queryState)
	}
	var fields []arrow.Field
	if st, ok := systemTables[table]; ok && db == SystemSchema && !lastValue {
		fields = st.schema.Fields()
	} else {
		// The table as the query's View has it: its chunks and files are
		// of that table (a replace or a drop since may have made another
		// of the name).
		snap := e.wb.Catalog().Snapshot()
		if qs != nil && qs.view != nil {
			snap = qs.view.Catalog()
		}
		t, ok := snap.Table(db, table)
		if !ok {
			return fmt.Errorf("table %q.%q does not exist", db, table)
		}
		if ncols <= 0 || ncols > int64(len(t.Columns)) {
			ncols = int64(len(t.Columns))
		}
		fields = make([]arrow.Field, ncols)
		for i, f := range t.ArrowSchema().Fields()[:ncols] {
			if f.Type.ID() == arrow.STRING {
				f.Type = stringDictType
			}
			fields[i] = f
		}
	}
	types, done, err := e.bindTypes(fields)
	if err != nil {
		return fmt.Errorf("table %q.%q: %w", db, table, err)
	}
	if done != nil {
		defer done()
	}
	seen := make(map[string]bool, len(fields))
	for i, f := range fields {
		// DuckDB names are case-insensitive: keep every column reachable.
		name := f.Name
		for n := 2; seen[strings.ToLower(name)]; n++ {
			name = fmt.Sprintf("%s_%d", f.Name, n)
		}
		seen[strings.ToLower(name)] = true
		duck.BindAddResultColumn(info, name, types[i]) // copies the type
	}
	bd := &bindData{e: e, key: buffer.TableKey{Database: db, Table: table}, fields: fields, conn: id, lastValue: lastValue}
	// A client's statement reads the databases it was admitted with, and
	// no other, however it names a table (the engine's own connections,
	// which make the views, are not clients').
	if _, err := bd.queryOf(); err != nil {
		return err
	}
	duck.BindSetBindData(info, newHandle(bd), deleteHandlePtr)
	return nil
}

// maxBindTypes bounds the column type lists bindTypes keeps: one a table
// schema (and column count) in use, so only a long run of schema changes
// reaches it; past it, lists are converted each time.
const maxBindTypes = 1024

// bindTypes is duckTypes of fields, converted once per list of column
// types: the conversion (an empty batch through DuckDB's Arrow import)
// took 120 µs of every query's bind. The types are shared, kept until the
// engine closes: the caller destroys them only through done, when it is
// not nil (a list not kept).
func (e *Engine) bindTypes(fields []arrow.Field) (types []duck.LogicalType, done func(), err error) {
	var key strings.Builder
	for _, f := range fields {
		key.WriteString(f.Type.Fingerprint())
		key.WriteByte(0)
	}
	e.typesMu.Lock()
	cached, ok := e.typesMu.m[key.String()]
	e.typesMu.Unlock()
	if ok {
		return cached, nil, nil
	}
	types, err = e.duckTypes(fields)
	if err != nil {
		return nil, nil, err
	}
	e.typesMu.Lock()
	defer e.typesMu.Unlock()
	if cached, ok := e.typesMu.m[key.String()]; ok {
		destroyTypes(types)
		return cached, nil, nil
	}
	if e.typesMu.m == nil || len(e.typesMu.m) >= maxBindTypes { // closed, or full
		return types, func() { destroyTypes(types) }, nil
	}
	e.typesMu.m[key.String()] = types
	return types, nil, nil
}

func destroyTypes(types []duck.LogicalType) {
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
}

// duckTypes returns the DuckDB types the Arrow conversion makes of
// fields, by converting an empty batch: the scan references converted
// vectors into its output, so their types must be exactly the declared
// ones. The caller destroys the types.
func (e *Engine) duckTypes(fields []arrow.Field) ([]duck.LogicalType, error) {
	schema := arrow.NewSchema(fields, nil)
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		cols[i] = array.MakeArrayOfNull(e.wb.Allocator(), f.Type, 0)
	}
	rec := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	conv, ed := duck.SchemaFromArrow(e.conv, schema)
	defer duck.DestroyArrowConvertedSchema(&conv)
	if err := errorData(ed); err != nil {
		return nil, err
	}
	dc, ed := duck.DataChunkFromArrow(e.conv, rec, conv)
	defer duck.DestroyDataChunk(&dc)
	if err := errorData(ed); err != nil {
		return nil, err
	}
	types := make([]duck.LogicalType, len(fields))
	for i := range fields {
		types[i] = duck.VectorGetColumnType(duck.DataChunkGetVector(dc, duck.IdxT(i)))
	}
	return types, nil
}

// scanGlobal is one scan's snapshot, shared by its threads: the buffered
// chunks and the persisted files of the table in the query's View that
// may hold rows within its time bounds. Threads take chunks and files one
// at a time, and the row groups of files read natively (pqscan.go) one at
// a time too.
type scanGlobal struct {
	bind *bindData
	// qs is the query the scan runs in (nil outside a query), bounds and
	// equals what it knows of the rows that can match: rows outside
	// bounds cannot, nor rows whose column (lower-cased name) holds none
	// of equals' values.
	qs     *queryState
	bounds timeBounds
	equals map[string][]string
	proj   []int // output column → table column; -1: none (row id)
	chunks []buffer.Chunk
	files  []persist.File
	next   atomic.Int64
	pq     pqQueue
	// ctx ends with the query: fetches from the object store stop then.
	ctx context.Context
	// view is the scan's own View when it was bound outside a query.
	view *buffer.View
}

func (g *scanGlobal) destroy() {
	for _, c := range g.chunks {
		c.Rec.Release()
	}
	g.chunks = nil
	g.pq.drop()
	if g.view != nil {
		g.view.Release()
		g.view = nil
	}
}

//export apron_scan_init
func apron_scan_init(p unsafe.Pointer) {
	info := duck.InitInfo{Ptr: p}
	defer recoverMessage(func(msg string) { duck.InitSetError(info, msg) })
	bd := handleValue(duck.InitGetBindData(info)).(*bindData)
	qs, err := bd.queryOf()
	if err != nil {
		duck.InitSetError(info, err.Error())
		return
	}
	g := &scanGlobal{bind: bd, qs: qs, bounds: allTime}
	if qs != nil {
		g.bounds = qs.boundsOf(bd.key)
		g.equals = qs.equals[lowerKey(bd.key.Database, bd.key.Table)]
	}
	n := int(duck.InitGetColumnCount(info))
	g.proj = make([]int, n)
	for i := range n {
		idx := uint64(duck.InitGetColumnIndex(info, duck.IdxT(i)))
		if idx >= uint64(len(bd.fields)) {
			g.proj[i] = -1
		} else {
			g.proj[i] = int(idx)
		}
	}
	g.ctx = context.Background()
	if _, ok := systemTables[bd.key.Table]; ok && bd.key.Database == SystemSchema && !bd.lastValue {
		var who *auth.Principal
		if qs != nil {
			who = qs.who
		}
		g.chunks = bd.e.systemChunk(bd.key.Table, who)
	} else {
		view := (*buffer.View)(nil)
		if qs != nil {
			view, g.ctx = qs.view, qs.ctx
		} else {
			g.view = bd.e.wb.View()
			view = g.view
		}
		bounds := withCutoff(view, bd.key, g.bounds)
		if only := qs.onlyFor(bd.key); only != nil {
			g.files = only.filter(bd.e.persistedFiles(view, bd.key, bounds))
		} else if chunks, ok, err := bd.e.lastValueChunks(view, bd, qs); err != nil {
			g.destroy()
			duck.InitSetError(info, err.Error())
			return
		} else if ok {
			g.chunks = chunks // instead of the table's (lastvalue.go)
		} else {
			if col, ok := qs.latestColFor(bd.key); ok {
				g.chunks = bd.e.latestSnapshot(view, bd.key, bounds, col, min(bounds.max, qs.latest.exact.max))
			} else {
				g.chunks = bd.e.snapshot(view, bd.key, bounds)
			}
			g.files = bd.e.persistedFiles(view, bd.key, bounds)
			if qs != nil && qs.meta != nil && qs.meta.key == lowerKey(bd.key.Database, bd.key.Table) {
				var nc, nf int64
				g.chunks, g.files, nc, nf = qs.meta.claim(g.chunks, g.files, view.Cutoff(bd.key.Database))
				bd.e.metaChunks.Add(nc)
				bd.e.metaFiles.Add(nf)
			}
			if qs != nil && qs.newest != nil && qs.newest.key == lowerKey(bd.key.Database, bd.key.Table) {
				var nc, nf int
				g.chunks, g.files, nc, nf = qs.newest.prune(g.chunks, g.files, view.Cutoff(bd.key.Database))
				bd.e.newestChunks.Add(int64(nc))
				bd.e.newestFiles.Add(int64(nf))
			}
			if qs != nil && qs.latest != nil && qs.latest.key == lowerKey(bd.key.Database, bd.key.Table) {
				keysOf := bd.e.fileKeysFunc(g.ctx, qs.latest.col, "it is scanned")
				var nc, nf int
				g.chunks, g.files, nc, nf = qs.latest.prune(g.chunks, g.files, view.Cutoff(bd.key.Database), keysOf, nil)
				bd.e.latestChunks.Add(int64(nc))
				bd.e.latestFiles.Add(int64(nf))
				g.chunks, g.files = bd.e.fileRowsInstead(g.ctx, qs.latest, g.chunks, g.files)
			}
		}
	}
	duck.InitSetInitData(info, newHandle(g), deleteHandlePtr)
	// A file's row groups are read by as many threads: count as many as
	// its rows fill.
	units := len(g.chunks)
	for _, f := range g.files {
		units += int(max(1, (f.Rows+maxRowGroupRows-1)/maxRowGroupRows))
	}
	duck.InitSetMaxThreads(info, duck.IdxT(max(min(bd.e.threads, units), 1)))
}

// persistedFiles returns the table's files in the View that may hold rows
// within b.
func (e *Engine) persistedFiles(v *buffer.View, k buffer.TableKey, b timeBounds) []persist.File {
	var out []persist.File
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database != k.Database || f.Table != k.Table {
				continue
			}
			if b.misses(f.Rows, f.MinTime, f.MaxTime) {
				e.filesPruned.Add(1)
				continue
			}
			out = append(out, f)
		}
	}
	return out
}

// snapshot returns the table's buffered chunks in the View that may hold
// rows within b, retained.
func (e *Engine) snapshot(v *buffer.View, k buffer.TableKey, b timeBounds) []buffer.Chunk {
	return e.latestSnapshot(v, k, b, "", b.max)
}

// latestSnapshot is snapshot for the latest row per value of string
// column col (none: snapshot) of the rows within b and of times at most
// upper (which rows past cannot match): the buffer leaves out the chunks
// that cannot hold one (buffer/series_latest.go), counted as the latest
// row pruning's.
func (e *Engine) latestSnapshot(v *buffer.View, k buffer.TableKey, b timeBounds, col string, upper int64) []buffer.Chunk {
	var out []buffer.Chunk
	pruned, skipped := 0, 0
	keep := func(c buffer.ChunkStat) bool {
		if b.misses(c.Rows, c.MinTime, c.MaxTime) {
			pruned++
			return false
		}
		return true
	}
	if b == allTime {
		keep = nil // every chunk with rows: the buffer sizes the list once
	}
	for _, s := range v.Buffered {
		var cs []buffer.Chunk
		if col == "" {
			cs = v.ChunksWhere(s, k.Database, k.Table, keep)
		} else {
			var n int
			cs, n = v.LatestChunksWhere(s, k.Database, k.Table, col, min(upper, b.max), keep)
			skipped += n
		}
		if out == nil {
			out = cs // one segment, the usual case: not copied
			continue
		}
		out = append(out, cs...)
	}
	e.chunksPruned.Add(int64(pruned))
	e.chunksScanned.Add(int64(len(out)))
	if skipped > 0 {
		e.latestChunks.Add(int64(skipped))
	}
	return out
}

// chunkSummaries is the rows and time range of the table's buffered
// chunks summed by partition (buffer.View.ChunkSummaries), with how many
// chunks they sum.
func (e *Engine) chunkSummaries(v *buffer.View, k buffer.TableKey) ([]buffer.ChunkStat, int) {
	var out []buffer.ChunkStat
	n := 0
	for _, s := range v.Buffered {
		var m int
		out, m = v.ChunkSummaries(s, k.Database, k.Table, out)
		n += m
	}
	return out, n
}

// chunkStats is the rows and time range of each chunk snapshot would
// return, none retained.
func (e *Engine) chunkStats(v *buffer.View, k buffer.TableKey, b timeBounds) []buffer.ChunkStat {
	var out []buffer.ChunkStat
	for _, s := range v.Buffered {
		all := v.ChunkStats(s, k.Database, k.Table, out)
		out = all[:len(out)]
		for _, c := range all[len(out):] {
			if b.misses(c.Rows, c.MinTime, c.MaxTime) {
				e.chunksPruned.Add(1)
				continue
			}
			e.chunksScanned.Add(1)
			out = append(out, c)
		}
	}
	return out
}

// scanLocal is one thread's position in a scan.
type scanLocal struct {
	g   *scanGlobal
	cur *buffer.Chunk
	// group is the row group of a persisted file being read natively
	// (pqscan.go); pqDicts the string dictionaries made for it and the
	// row groups before.
	group   *pqGroup
	pqDicts pqDictCache
	// file is the persisted file being read through pqarrow, owned its
	// batch from it (cur points at it then).
	file  *fileReader
	owned buffer.Chunk
	off   int
	rows  int
	// Per chunk: the chunk's columns the scan needs, as a schema, DuckDB's
	// converted form of it, and where each output column comes from: an
	// index into need, -1 for a column the chunk lacks, -2 for none.
	need []int
	sub  *arrow.Schema
	conv duck.ArrowConvertedSchema
	src  []int
	// nulls is a chunk of vectorSize NULLs of each table column, made when
	// a chunk first lacks a column.
	nulls    duck.DataChunk
	nullsErr error
	// dictOf[i] >= 0 means output column i comes from dicts[dictOf[i]], a
	// dictionary string column emitted as a DuckDB dictionary vector over
	// the converted dictionary (see dictColumn).
	dictOf []int
	dicts  []dictColumn
	// directOf[i] >= 0 means output column i is fixed-width and copied
	// straight into DuckDB's vector from direct[directOf[i]].
	directOf []int
	direct   []directColumn
	// strConv is DuckDB's converted form of a one-column utf8 schema, for
	// converting dictionaries; converted caches them.
	strConv   duck.ArrowConvertedSchema
	converted map[uintptr]convertedDict
	// stale are converted dictionaries replaced while the current chunk
	// may still use them; destroyed when the next chunk opens.
	stale []duck.DataChunk
	// sel, when set, are the rows of the current chunk emitted, those
	// that can match the query's string equalities (scan_select.go); rows
	// and off count in it. selCols are the need columns gathered at sel.
	// memo keeps the dictionaries' matches across the scan's chunks.
	sel     []int32
	selCols []arrow.Array
	memo    *selectMemo
}

// dictColumn is a dictionary string column of the chunk being read, whose
// values are already converted to a DuckDB vector: each call only points
// the output at that vector through the rows' indices, instead of having
// the Arrow conversion convert the whole dictionary again for every 2048
// rows (with 1000 series, that was more work than the rows themselves).
type dictColumn struct {
	idx  []int32
	dict duck.DataChunk // owned by converted
}

// convertedDict is a dictionary converted to a DuckDB vector: the first n
// values of the dictionary whose offsets buffer starts at the map key.
// Chunks of a partition share one growing dictionary (values only ever
// appended), so a chunk whose dictionary is at most n long can use it.
type convertedDict struct {
	n  int
	dc duck.DataChunk
}

// maxConvertedDicts bounds the dictionaries a scan thread keeps converted.
const maxConvertedDicts = 64

func (l *scanLocal) destroy() {
	if l.group != nil {
		l.group.close()
		l.group = nil
	}
	l.pqDicts.destroy()
	l.dropSelected()
	l.dropOwned()
	if l.file != nil {
		l.file.close()
		l.file = nil
	}
	duck.DestroyArrowConvertedSchema(&l.conv)
	duck.DestroyDataChunk(&l.nulls)
	duck.DestroyArrowConvertedSchema(&l.strConv)
	l.dropConverted(true)
}

// dropConverted destroys the stale converted dictionaries, and all of them
// when all is set or the cache is full. Only between chunks: the chunk
// being read points into them. (Vectors already handed to DuckDB share
// the memory and keep it.)
func (l *scanLocal) dropConverted(all bool) {
	for i := range l.stale {
		duck.DestroyDataChunk(&l.stale[i])
	}
	l.stale = l.stale[:0]
	if all || len(l.converted) >= maxConvertedDicts {
		for k, c := range l.converted {
			duck.DestroyDataChunk(&c.dc)
			delete(l.converted, k)
		}
	}
}

//export apron_scan_local_init
func apron_scan_local_init(p unsafe.Pointer) {
	info := duck.InitInfo{Ptr: p}
	defer recoverMessage(func(msg string) { duck.InitSetError(info, msg) })
	duck.InitSetInitData(info, newHandle(&scanLocal{}), deleteHandlePtr)
}

//export apron_scan_func
func apron_scan_func(p, out unsafe.Pointer) {
	info := duck.FunctionInfo{Ptr: p}
	defer recoverMessage(func(msg string) { duck.FunctionSetError(info, msg) })
	g := handleValue(duck.FunctionGetInitData(info)).(*scanGlobal)
	l := handleValue(duck.FunctionGetLocalInitData(info)).(*scanLocal)
	l.g = g
	if err := l.fill(duck.DataChunk{Ptr: out}); err != nil {
		duck.FunctionSetError(info, err.Error())
	}
}

// takeFile opens f, the file this thread claimed: its first row group
// (the others queued for every thread) or, through pqarrow, the whole
// file; neither if no row of it can match. (scanGlobal.openFile is the
// direct scan's: the whole file through pqarrow.)
func (l *scanLocal) takeFile(f persist.File) (err error) {
	g := l.g
	defer g.pq.fileOpened()
	if h := pqTestHooks.Load(); h != nil {
		h.opening()
	}
	p, err := g.openParquet(f)
	if err != nil {
		return err
	}
	if p == nil {
		g.bind.e.filesPruned.Add(1)
		return nil
	}
	g.bind.e.filesScanned.Add(1)
	if u, ok := g.openNative(p); ok {
		return l.openGroup(u)
	}
	l.file, err = g.newFileReader(p)
	return err
}

// openGroup starts reading row group u.
func (l *scanLocal) openGroup(u pqUnit) (err error) {
	if l.group, err = openGroup(u, &l.pqDicts); err != nil {
		return err
	}
	if h := pqTestHooks.Load(); h != nil {
		h.group(l)
	}
	return nil
}

// fill emits the next at most vectorSize rows into out; none at the end.
func (l *scanLocal) fill(out duck.DataChunk) (err error) {
	g := l.g
	for l.cur == nil || l.off >= l.rows {
		if l.group != nil {
			if l.group.rows > 0 {
				return l.group.emit(l, out)
			}
			l.group.close()
			l.group = nil
		}
		l.dropOwned()
		if l.file != nil {
			c, ok, err := l.file.next()
			if err != nil {
				return err
			}
			if ok {
				l.owned = c
				if err := l.open(&l.owned); err != nil {
					return err
				}
				continue
			}
			l.file.close()
			l.file = nil
		}
		if u, ok := g.pq.take(); ok {
			if err := l.openGroup(u); err != nil {
				return err
			}
			continue
		}
		i := g.next.Add(1) - 1
		if i < int64(len(g.chunks)) {
			if err := l.open(&g.chunks[i]); err != nil {
				return err
			}
			continue
		}
		j := i - int64(len(g.chunks))
		if j >= int64(len(g.files)) {
			// Nothing left to open: row groups of files other threads
			// are opening may still come (pqQueue).
			if h := pqTestHooks.Load(); h != nil {
				h.idle()
			}
			if u, ok := g.pq.wait(len(g.files)); ok {
				if err := l.openGroup(u); err != nil {
					return err
				}
				continue
			}
			duck.DataChunkSetSize(out, 0)
			return nil
		}
		if err := l.takeFile(g.files[j]); err != nil {
			return err
		}
	}
	k := min(vectorSize, l.rows-l.off)
	if len(l.need) > 0 {
		cols := make([]arrow.Array, len(l.need))
		for j, ci := range l.need {
			src := l.cur.Rec.Column(ci)
			if l.sel != nil {
				src = l.selCols[j]
			}
			cols[j] = array.NewSlice(src, int64(l.off), int64(l.off+k))
		}
		rec := array.NewRecordBatch(l.sub, cols, int64(k))
		for _, c := range cols {
			c.Release()
		}
		dc, ed := duck.DataChunkFromArrow(g.bind.e.conv, rec, l.conv)
		rec.Release()
		if err := errorData(ed); err != nil {
			duck.DestroyDataChunk(&dc)
			return fmt.Errorf("converting buffered rows: %w", err)
		}
		for i, s := range l.src {
			switch {
			case s >= 0:
				duck.VectorReferenceVector(duck.DataChunkGetVector(out, duck.IdxT(i)), duck.DataChunkGetVector(dc, duck.IdxT(s)))
			case s == -1:
				nulls, err := l.nullChunk()
				if err != nil {
					duck.DestroyDataChunk(&dc)
					return err
				}
				duck.VectorReferenceVector(duck.DataChunkGetVector(out, duck.IdxT(i)), duck.DataChunkGetVector(nulls, duck.IdxT(g.proj[i])))
			}
		}
		duck.DestroyDataChunk(&dc)
	} else {
		// Only row counts are wanted (count(*)), or the chunk has none of
		// the wanted columns.
		for i, s := range l.src {
			if s == -1 {
				nulls, err := l.nullChunk()
				if err != nil {
					return err
				}
				duck.VectorReferenceVector(duck.DataChunkGetVector(out, duck.IdxT(i)), duck.DataChunkGetVector(nulls, duck.IdxT(g.proj[i])))
			}
		}
	}
	var sel []int32
	if l.sel != nil {
		sel = l.sel[l.off : l.off+k]
	}
	for i, j := range l.dictOf {
		if j >= 0 {
			l.emitDict(duck.DataChunkGetVector(out, duck.IdxT(i)), &l.dicts[j], k, sel)
		}
	}
	for i, j := range l.directOf {
		if j >= 0 {
			l.direct[j].emit(duck.DataChunkGetVector(out, duck.IdxT(i)), l.off, k, sel)
		}
	}
	duck.DataChunkSetSize(out, duck.IdxT(k))
	l.off += k
	return nil
}

// dictColumn returns how to emit column a of chunk c as a dictionary
// vector, if it can be: a dictionary<int32, utf8> without nulls, of a
// buffered chunk (batches read from files are released while the scan
// runs, so their memory cannot key the cache), whose dictionary fits one
// DuckDB vector.
func (l *scanLocal) dictColumn(c *buffer.Chunk, a arrow.Array) (dictColumn, bool, error) {
	d, ok := a.(*array.Dictionary)
	if !ok || c == &l.owned || d.NullN() > 0 || d.Indices().DataType().ID() != arrow.INT32 {
		return dictColumn{}, false, nil
	}
	values, ok := d.Dictionary().(*array.String)
	if !ok || values.Len() == 0 || values.Len() > vectorSize || values.NullN() > 0 {
		return dictColumn{}, false, nil
	}
	offsets := values.Data().Buffers()[1]
	if offsets == nil || offsets.Len() == 0 {
		return dictColumn{}, false, nil
	}
	key := uintptr(unsafe.Pointer(unsafe.SliceData(offsets.Bytes()))) + uintptr(values.Data().Offset())*4
	if cd, ok := l.converted[key]; ok && cd.n >= values.Len() {
		return dictColumn{idx: int32Values(d.Indices()), dict: cd.dc}, true, nil
	}
	dc, err := l.convertStrings(values)
	if err != nil {
		return dictColumn{}, false, err
	}
	if l.converted == nil {
		l.converted = map[uintptr]convertedDict{}
	}
	if old, ok := l.converted[key]; ok {
		l.stale = append(l.stale, old.dc)
	}
	l.converted[key] = convertedDict{n: values.Len(), dc: dc}
	return dictColumn{idx: int32Values(d.Indices()), dict: dc}, true, nil
}

// convertStrings converts a utf8 array of at most vectorSize values to a
// one-column DuckDB chunk.
func (l *scanLocal) convertStrings(values *array.String) (duck.DataChunk, error) {
	e := l.g.bind.e
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	if l.strConv.Ptr == nil {
		conv, ed := duck.SchemaFromArrow(e.conv, schema)
		if err := errorData(ed); err != nil {
			duck.DestroyArrowConvertedSchema(&conv)
			return duck.DataChunk{}, fmt.Errorf("converting a dictionary's schema: %w", err)
		}
		l.strConv = conv
	}
	rec := array.NewRecordBatch(schema, []arrow.Array{values}, int64(values.Len()))
	defer rec.Release()
	dc, ed := duck.DataChunkFromArrow(e.conv, rec, l.strConv)
	if err := errorData(ed); err != nil {
		duck.DestroyDataChunk(&dc)
		return duck.DataChunk{}, fmt.Errorf("converting a dictionary: %w", err)
	}
	return dc, nil
}

// emitDict points vec at the converted dictionary of dc through the indices
// of the next k rows (of rows sel, if set): DuckDB gets a dictionary
// vector, no value is copied.
func (l *scanLocal) emitDict(vec duck.Vector, dc *dictColumn, k int, rows []int32) {
	duck.VectorReferenceVector(vec, duck.DataChunkGetVector(dc.dict, 0))
	// A selection of its own per call: the sliced vector shares it, and
	// DuckDB may hold the output after this call.
	sv := duck.CreateSelectionVector(duck.IdxT(k))
	dst := unsafe.Slice((*uint32)(unsafe.Pointer(duck.SelectionVectorGetDataPtr(sv))), k)
	if rows != nil {
		for r, row := range rows {
			dst[r] = uint32(dc.idx[row])
		}
	} else {
		for r, ix := range dc.idx[l.off : l.off+k] {
			dst[r] = uint32(ix)
		}
	}
	duck.SliceVector(vec, sv, duck.IdxT(k))
	duck.DestroySelectionVector(&sv)
}

// directColumn is a fixed-width column whose Arrow layout is DuckDB's:
// its values are copied straight into the output vector, which costs far
// less per 2048 rows than exporting and importing them through the Arrow C
// data interface.
type directColumn struct {
	arr   arrow.Array
	vals  []byte // the value buffer, from the array's first row
	width int
}

// directOf says whether a can be copied as it is: integers, floats, dates
// and timestamp[ns] without a zone (DuckDB's TIMESTAMP_NS). Timestamps of
// other units or with a zone are converted by DuckDB, so they are not.
func directOf(a arrow.Array) (directColumn, bool) {
	var width int
	switch dt := a.DataType().(type) {
	case *arrow.Int8Type, *arrow.Uint8Type:
		width = 1
	case *arrow.Int16Type, *arrow.Uint16Type:
		width = 2
	case *arrow.Int32Type, *arrow.Uint32Type, *arrow.Float32Type, *arrow.Date32Type:
		width = 4
	case *arrow.Int64Type, *arrow.Uint64Type, *arrow.Float64Type:
		width = 8
	case *arrow.TimestampType:
		if dt.Unit != arrow.Nanosecond || dt.TimeZone != "" {
			return directColumn{}, false
		}
		width = 8
	default:
		return directColumn{}, false
	}
	d := a.Data()
	buf := d.Buffers()[1]
	if buf == nil || buf.Len() < (d.Offset()+d.Len())*width {
		return directColumn{}, false
	}
	return directColumn{arr: a, vals: buf.Bytes()[d.Offset()*width : (d.Offset()+d.Len())*width], width: width}, true
}

// emit copies rows [off, off+k) into vec, or rows rows if set (k of
// them), with their nulls.
func (c *directColumn) emit(vec duck.Vector, off, k int, rows []int32) {
	dst := unsafe.Slice((*byte)(duck.VectorGetData(vec)), k*c.width)
	if rows != nil {
		gatherRows(dst, c.vals, c.width, rows)
	} else {
		copy(dst, c.vals[off*c.width:(off+k)*c.width])
	}
	if c.arr.NullN() == 0 {
		return
	}
	duck.VectorEnsureValidityWritable(vec)
	mask := duck.VectorGetValidity(vec)
	for r := range k {
		row := off + r
		if rows != nil {
			row = int(rows[r])
		}
		if c.arr.IsNull(row) {
			duck.ValiditySetRowInvalid(mask, duck.IdxT(r))
		}
	}
}

// gatherRows copies the values of rows, each width bytes, from src to dst.
func gatherRows(dst, src []byte, width int, rows []int32) {
	switch width {
	case 8:
		gatherWidth[uint64](dst, src, rows)
	case 4:
		gatherWidth[uint32](dst, src, rows)
	case 2:
		gatherWidth[uint16](dst, src, rows)
	default:
		for r, row := range rows {
			copy(dst[r*width:(r+1)*width], src[int(row)*width:(int(row)+1)*width])
		}
	}
}

func gatherWidth[T uint16 | uint32 | uint64](dst, src []byte, rows []int32) {
	var zero T
	w := int(unsafe.Sizeof(zero))
	d := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/w)
	s := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/w)
	for r, row := range rows {
		d[r] = s[row]
	}
}

// int32Values is the values of an int32 array, from its offset.
func int32Values(a arrow.Array) []int32 {
	d := a.Data()
	b := d.Buffers()[1].Bytes()
	all := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	return all[d.Offset() : d.Offset()+d.Len()]
}

// dropOwned releases the batch read last from a persisted file.
func (l *scanLocal) dropOwned() {
	if l.owned.Rec != nil {
		if l.cur == &l.owned {
			l.cur = nil
		}
		l.owned.Rec.Release()
		l.owned = buffer.Chunk{}
	}
}

// dropSelected ends the current chunk's selection.
func (l *scanLocal) dropSelected() {
	for _, c := range l.selCols {
		c.Release()
	}
	l.sel, l.selCols = nil, nil
}

// open makes c the chunk being read.
func (l *scanLocal) open(c *buffer.Chunk) error {
	g := l.g
	l.dropSelected()
	l.cur, l.off, l.rows = c, 0, int(c.Rec.NumRows())
	if len(g.equals) > 0 && l.rows > 0 {
		memo := l.memo
		if c != &l.owned {
			if memo == nil {
				memo = newSelectMemo()
				l.memo = memo
			}
		} else {
			memo = nil // a file's batch: its memory goes before the scan ends
		}
		if sel, ok, _ := selectRows(c.Rec, c.Series, g.equals, memo); ok {
			switch {
			case len(sel) == 0:
				g.bind.e.rowsSelectedOut.Add(int64(l.rows))
				l.rows = 0 // none can match: on to the next chunk
				return nil
			case float64(len(sel)) <= maxSelectShare*float64(l.rows):
				g.bind.e.rowsSelectedOut.Add(int64(l.rows - len(sel)))
				l.sel, l.rows = sel, len(sel)
			}
		}
	}
	cs := c.Rec.Schema()
	sameColumns := l.sub != nil && len(l.src) == len(g.proj)
	need := l.need[:0]
	src := make([]int, len(g.proj))
	l.dropConverted(false)
	l.dictOf = l.dictOf[:0]
	l.dicts = l.dicts[:0]
	l.directOf = l.directOf[:0]
	l.direct = l.direct[:0]
	var fields []arrow.Field
	for i, tc := range g.proj {
		l.dictOf = append(l.dictOf, -1)
		l.directOf = append(l.directOf, -1)
		if tc < 0 {
			src[i] = -2
			continue
		}
		f := g.bind.fields[tc]
		idx := cs.FieldIndices(f.Name)
		if len(idx) == 0 {
			src[i] = -1
			continue
		}
		if dc, ok, err := l.dictColumn(c, c.Rec.Column(idx[0])); err != nil {
			return err
		} else if ok {
			src[i] = -2 // not from the Arrow conversion
			l.dictOf[i] = len(l.dicts)
			l.dicts = append(l.dicts, dc)
			continue
		}
		cf := cs.Field(idx[0])
		if !arrow.TypeEqual(cf.Type, f.Type) {
			return fmt.Errorf("column %q is %s in the buffer but %s in the catalog", f.Name, cf.Type, f.Type)
		}
		if dc, ok := directOf(c.Rec.Column(idx[0])); ok {
			src[i] = -2 // not from the Arrow conversion
			l.directOf[i] = len(l.direct)
			l.direct = append(l.direct, dc)
			continue
		}
		src[i] = len(need)
		need = append(need, idx[0])
		fields = append(fields, cf)
	}
	if sameColumns {
		for i := range src {
			if src[i] != l.src[i] {
				sameColumns = false
				break
			}
		}
	}
	l.need, l.src = need, src
	if l.sel != nil && len(need) > 0 {
		cols := make([]arrow.Array, len(need))
		for j, ci := range need {
			cols[j] = c.Rec.Column(ci)
		}
		taken, err := takeColumns(g.bind.e.wb.Allocator(), cols, l.sel)
		if err != nil {
			return err
		}
		l.selCols = taken
	}
	if sameColumns {
		return nil // the converted schema still fits
	}
	duck.DestroyArrowConvertedSchema(&l.conv)
	l.sub = arrow.NewSchema(fields, nil)
	if len(fields) == 0 {
		return nil
	}
	conv, ed := duck.SchemaFromArrow(g.bind.e.conv, l.sub)
	if err := errorData(ed); err != nil {
		duck.DestroyArrowConvertedSchema(&conv)
		return fmt.Errorf("converting the buffer's schema: %w", err)
	}
	l.conv = conv
	return nil
}

// nullChunk returns a chunk of NULLs for every table column.
func (l *scanLocal) nullChunk() (duck.DataChunk, error) {
	if l.nulls.Ptr != nil || l.nullsErr != nil {
		return l.nulls, l.nullsErr
	}
	e := l.g.bind.e
	fields := l.g.bind.fields
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		cols[i] = array.MakeArrayOfNull(e.wb.Allocator(), f.Type, vectorSize)
	}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, cols, vectorSize)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	conv, ed := duck.SchemaFromArrow(e.conv, schema)
	defer duck.DestroyArrowConvertedSchema(&conv)
	if err := errorData(ed); err != nil {
		l.nullsErr = fmt.Errorf("making NULLs: %w", err)
		return l.nulls, l.nullsErr
	}
	dc, ed := duck.DataChunkFromArrow(e.conv, rec, conv)
	if err := errorData(ed); err != nil {
		duck.DestroyDataChunk(&dc)
		l.nullsErr = fmt.Errorf("making NULLs: %w", err)
		return l.nulls, l.nullsErr
	}
	l.nulls = dc
	return dc, nil
}

// maxRowGroupRows is the most rows of a row group of a segment's file
// (merged files have larger ones): what a scan thread reads at a time.
const maxRowGroupRows = persist.SegmentRowGroupRows

// timeBounds is an inclusive range of times, in ns.
type timeBounds struct{ min, max int64 }

var allTime = timeBounds{math.MinInt64, math.MaxInt64}

// misses says whether rows rows whose times lie in [lo, hi] (a chunk's, a
// file's) hold none within b.
func (b timeBounds) misses(rows, lo, hi int64) bool {
	return rows == 0 || hi < b.min || lo > b.max
}
