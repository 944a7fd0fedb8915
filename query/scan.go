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

	"github.com/apron-db/apron/buffer"
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

// bindData is one scan's table and columns, fixed at bind.
type bindData struct {
	e      *Engine
	key    buffer.TableKey
	fields []arrow.Field // the first ncols columns, strings as dictionaries
	bounds timeBounds    // rows outside cannot match the query
	// qs is the state of the query the scan is bound in (its View), nil
	// when bound outside a query.
	qs *queryState
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
	var fields []arrow.Field
	if st, ok := systemTables[table]; ok && db == SystemSchema {
		fields = st.schema.Fields()
	} else {
		t, ok := e.wb.Catalog().Table(db, table)
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
	types, err := e.duckTypes(fields)
	if err != nil {
		return fmt.Errorf("table %q.%q: %w", db, table, err)
	}
	seen := make(map[string]bool, len(fields))
	for i, f := range fields {
		// DuckDB names are case-insensitive: keep every column reachable.
		name := f.Name
		for n := 2; seen[strings.ToLower(name)]; n++ {
			name = fmt.Sprintf("%s_%d", f.Name, n)
		}
		seen[strings.ToLower(name)] = true
		duck.BindAddResultColumn(info, name, types[i])
		duck.DestroyLogicalType(&types[i])
	}
	bd := &bindData{e: e, key: buffer.TableKey{Database: db, Table: table}, bounds: allTime}
	bd.fields = fields
	var cc duck.ClientContext
	duck.TableFunctionGetClientContext(info, &cc)
	id := uint64(duck.ClientContextGetConnectionId(cc))
	duck.DestroyClientContext(&cc)
	if qs, ok := e.qstate.Load(id); ok {
		bd.qs = qs.(*queryState)
		bd.bounds = bd.qs.boundsOf(bd.key)
	}
	duck.BindSetBindData(info, newHandle(bd), deleteHandlePtr)
	return nil
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
// at a time.
type scanGlobal struct {
	bind   *bindData
	proj   []int // output column → table column; -1: none (row id)
	chunks []buffer.Chunk
	files  []buffer.PersistedFile
	next   atomic.Int64
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
	g := &scanGlobal{bind: bd}
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
	if _, ok := systemTables[bd.key.Table]; ok && bd.key.Database == SystemSchema {
		g.chunks = bd.e.systemChunk(bd.key.Table)
	} else {
		view := (*buffer.View)(nil)
		if bd.qs != nil {
			view, g.ctx = bd.qs.view, bd.qs.ctx
		} else {
			g.view = bd.e.wb.View()
			view = g.view
		}
		g.chunks = bd.e.snapshot(view, bd.key, bd.bounds)
		// Files a file macro reads (native.go) are not the scan's.
		if bd.qs == nil || !bd.qs.native[lowerKey(bd.key.Database, bd.key.Table)] {
			g.files = bd.e.persistedFiles(view, bd.key, bd.bounds)
		}
	}
	duck.InitSetInitData(info, newHandle(g), deleteHandlePtr)
	threads := min(bd.e.threads, len(g.chunks)+len(g.files))
	duck.InitSetMaxThreads(info, duck.IdxT(max(threads, 1)))
}

// persistedFiles returns the table's files in the View that may hold rows
// within b.
func (e *Engine) persistedFiles(v *buffer.View, k buffer.TableKey, b timeBounds) []buffer.PersistedFile {
	var out []buffer.PersistedFile
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database != k.Database || f.Table != k.Table {
				continue
			}
			if f.Rows == 0 || f.MaxTime < b.min || f.MinTime > b.max {
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
	var out []buffer.Chunk
	for _, s := range v.Buffered {
		for _, c := range s.Snapshot(k.Database, k.Table) {
			if c.Rec.NumRows() == 0 || c.MaxTime < b.min || c.MinTime > b.max {
				c.Rec.Release()
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
	// file is the persisted file being read, owned its batch from it (cur
	// points at it then).
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
}

func (l *scanLocal) destroy() {
	l.dropOwned()
	if l.file != nil {
		l.file.close()
		l.file = nil
	}
	duck.DestroyArrowConvertedSchema(&l.conv)
	duck.DestroyDataChunk(&l.nulls)
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

// fill emits the next at most vectorSize rows into out; none at the end.
func (l *scanLocal) fill(out duck.DataChunk) error {
	g := l.g
	for l.cur == nil || l.off >= l.rows {
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
		i := g.next.Add(1) - 1
		if i < int64(len(g.chunks)) {
			if err := l.open(&g.chunks[i]); err != nil {
				return err
			}
			continue
		}
		j := i - int64(len(g.chunks))
		if j >= int64(len(g.files)) {
			duck.DataChunkSetSize(out, 0)
			return nil
		}
		f, err := g.openFile(g.files[j])
		if err != nil {
			return err
		}
		if f == nil {
			g.bind.e.filesPruned.Add(1)
		} else {
			g.bind.e.filesScanned.Add(1)
		}
		l.file = f
	}
	k := min(vectorSize, l.rows-l.off)
	if len(l.need) > 0 {
		cols := make([]arrow.Array, len(l.need))
		for j, ci := range l.need {
			cols[j] = array.NewSlice(l.cur.Rec.Column(ci), int64(l.off), int64(l.off+k))
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
	duck.DataChunkSetSize(out, duck.IdxT(k))
	l.off += k
	return nil
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

// open makes c the chunk being read.
func (l *scanLocal) open(c *buffer.Chunk) error {
	g := l.g
	l.cur, l.off, l.rows = c, 0, int(c.Rec.NumRows())
	cs := c.Rec.Schema()
	sameColumns := l.sub != nil && len(l.src) == len(g.proj)
	need := l.need[:0]
	src := make([]int, len(g.proj))
	var fields []arrow.Field
	for i, tc := range g.proj {
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
		cf := cs.Field(idx[0])
		if !arrow.TypeEqual(cf.Type, f.Type) {
			return fmt.Errorf("column %q is %s in the buffer but %s in the catalog", f.Name, cf.Type, f.Type)
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

// timeBounds is an inclusive range of times, in ns.
type timeBounds struct{ min, max int64 }

var allTime = timeBounds{math.MinInt64, math.MaxInt64}
