package persist

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/apron-db/apron/catalog"
)

// Chunk is a batch of one table's rows of one UTC day, with the range of
// its time column, as the buffer holds them: columns in the table's order
// (a chunk may lack columns added after it was built), strings
// dictionary<int32, utf8>. The chunks of one day share their dictionaries
// (each one's is a prefix of the next one's), which the sort takes
// advantage of; chunks that do not are sorted right all the same.
type Chunk struct {
	Rec              arrow.RecordBatch
	MinTime, MaxTime int64 // ns since the epoch, inclusive
}

// Row groups of persisted files hold at most RowGroupRows rows (a
// compaction's merged files) or SegmentRowGroupRows (a segment's files)
// and about RowGroupBytes bytes of Arrow data (before encoding),
// whichever comes first: large enough for scans, small enough that the
// writer, which buffers a whole row group's encoded pages, stays within a
// bounded memory.
//
// A segment's files have smaller row groups: a query of one series reads
// the row groups its statistics do not exclude whole, and with rows
// sorted by series one series is a few thousand rows of a group. One host
// of 100 over the last 20 s of a 5M-row file (BenchmarkPersistedQuery):
// 36.8 ms with groups of 1Mi rows, 11.2 ms with 128Ki; the aggregate over
// all of it 52.8 and 48.2 ms.
const (
	RowGroupRows        = 1 << 20
	SegmentRowGroupRows = 1 << 17
	// DataPageBytes is the size a data page is cut at (WriterProperties).
	DataPageBytes = 64 << 10
	RowGroupBytes = 128 << 20
	// parquetBatchRows is how many sorted rows are gathered into one Arrow
	// batch at a time on their way to the writer.
	parquetBatchRows = 64 << 10
)

// WriterProperties are the writer properties of every persisted file
// (see doc.go): zstd, statistics, dictionary encoding (but for time),
// Parquet 2.6 (so TIMESTAMP(NANOS)), no Arrow schema stored in the
// metadata, and nothing time-dependent, so that the same rows give the
// same bytes. sorting is what the file's row groups declare in
// sorting_columns; the columns named in plain are written without a
// dictionary (parquet_dict.go), those named in raw uncompressed
// (parquet_raw.go).
func WriterProperties(mem memory.Allocator, sorting []parquet.SortingColumn, plain []string, raw ...string) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	opts := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(true),
		// Times are nearly unique: a dictionary would only be built to be
		// dropped at the dictionary page limit.
		parquet.WithDictionaryFor(catalog.TimeColumn, false),
		parquet.WithMaxRowGroupLength(RowGroupRows),
		// Pages of 64 KiB (8Ki rows of a float column, not the whole row
		// group) with an offset index and a column index: a reader that
		// wants one series' recent rows decompresses the pages that hold
		// them, not the group (query/pqrange.go). The peer benchmark's
		// query (one host of 200, last 10 minutes: 173 rows of 9
		// columns) decompressed a page of each column, 1.8 MB with pages
		// of 256 KiB; with 64 KiB its p50 went from 10.1 to 7.1 ms (over
		// Flight, pyarrow). Since the query reads column chunks through
		// a buffer, not whole (query.parquetReadProps), the smaller pages
		// left the file's full aggregate as it was, within this VM's
		// noise (BenchmarkPersistedQuery: 29.7-35.7 ms against 37.1-43.4).
		parquet.WithDataPageSize(DataPageBytes),
		parquet.WithPageIndexEnabled(true),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithSortingColumns(sorting),
	}
	for _, name := range plain {
		opts = append(opts, parquet.WithDictionaryFor(name, false))
	}
	for _, name := range raw {
		opts = append(opts, parquet.WithCompressionFor(name, compress.Codecs.Uncompressed))
	}
	return parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem))
}

// String columns of a file with at most maxDictValues distinct values of at
// most maxDictBytes in all are handed to the writer dictionary-encoded, with
// one dictionary (the partition's distinct values, sorted) for the whole
// file: the writer then stores indices without hashing every value. Others
// are gathered as plain strings. Either way the file holds a Parquet
// BYTE_ARRAY (UTF8) column; no Arrow schema is stored in the file, so
// readers see plain strings.
const (
	maxDictValues = 1 << 16
	maxDictBytes  = 1 << 20 // the writer's default dictionary page limit
)

// parquetSchema is the schema of a persisted file for a table of schema
// tableSchema: the same columns in the same order; strings are plain utf8
// (Parquet dictionary-encodes them itself, and every reader maps a BYTE_ARRAY
// UTF8 column to its string type).
func parquetSchema(tableSchema *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, tableSchema.NumFields())
	for i, f := range tableSchema.Fields() {
		if f.Type.ID() == arrow.DICTIONARY || f.Type.ID() == arrow.LARGE_STRING {
			f.Type = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Name != catalog.TimeColumn}
	}
	return arrow.NewSchema(fields, nil)
}

// partFile describes what writePartition wrote.
type partFile struct {
	Rows             int64
	MinTime, MaxTime int64
}

// writePartition writes the rows of chunks (one partition of one table) to
// w as a Parquet file with the columns of tbl (the table at persist time:
// chunks may lack some of its columns, which are null there), sorted by the
// string columns in column order (nulls last), then time, then buffer
// order. It never holds a sorted copy of the partition: it sorts a
// permutation (8 bytes a row) and gathers parquetBatchRows rows at a time.
// Every buffer it allocates from mem is freed when it returns; there are
// many, short-lived (gathered batches, the writer's pages), so the buffer
// passes an allocator that recycles them (buffer.Recycler).
//
// Its CPU-bound steps (the sort, each batch's gathering and encoding, the
// last flush) each hold one of slots (encode_slots.go); nil bounds none.
func writePartition(dst io.Writer, tbl *catalog.Table, chunks []Chunk, mem memory.Allocator, maxGroupRows int64, pace Pacer,
	slots *encodeSlots) (partFile, error) {
	out := parquetSchema(tbl.ArrowSchema())
	if out.NumFields() == 0 || out.Field(0).Name != catalog.TimeColumn {
		return partFile{}, fmt.Errorf("persist: schema %s does not start with %q", out, catalog.TimeColumn)
	}
	src, err := newPartSource(out, chunks, mem)
	if err != nil {
		return partFile{}, err
	}
	defer src.release()
	out = src.out
	var perm permutation
	// The sort's buckets go to as many goroutines as the bound allows:
	// spawned beside the slot held, one a core, they took every P, and a
	// write's acknowledgement waited for the scheduler to preempt one
	// (one writer's ack p99 42 ms in the second a 7.5M-row segment
	// rolled over, on 2 cores).
	slots.doSpread(runtime.GOMAXPROCS(0), func(workers int) error {
		perm = src.sortedPermutation(workers)
		return nil
	})

	buf := make([]uint64, 0, parquetBatchRows)
	start := 0
	next := func() (arrow.RecordBatch, error) {
		if start >= perm.len() {
			return nil, nil
		}
		end := min(start+parquetBatchRows, perm.len())
		rec, err := src.gather(perm.expand(start, end, buf), mem)
		start = end
		return rec, err
	}
	plain := plainColumns(out, src.cols)
	w := sortedWrite{out: out, keys: src.keys, plain: plain, raw: rawColumns(out, src.cols, perm, plain),
		maxGroupRows: maxGroupRows, pace: pace, slots: slots, timeRange: func() (lo, hi int64) {
			lo, hi = math.MaxInt64, math.MinInt64
			for _, c := range chunks {
				if c.Rec.NumRows() > 0 {
					lo, hi = min(lo, c.MinTime), max(hi, c.MaxTime)
				}
			}
			return lo, hi
		}}
	return w.write(dst, mem, next)
}

// sortedWrite is how a file of rows already in its order (a partition's,
// sorted by writePartition, or a compaction's, merged by mergeSource) is
// written: out is its schema, keys its string columns, which with time
// its row groups declare as their sorting (parquet.go's order); plain and
// raw name the columns written without a dictionary and uncompressed.
type sortedWrite struct {
	out          *arrow.Schema
	keys         []int
	plain, raw   []string
	maxGroupRows int64
	pace         Pacer
	slots        *encodeSlots
	// timeRange is the least and greatest time of the rows written, asked
	// once next has returned them all: the chunks' ranges, or what the
	// merge read.
	timeRange func() (lo, hi int64)
}

// write writes the batches next returns, until a nil one, as one Parquet
// file into dst. Each call of next holds one of w.slots; it runs one batch
// ahead of the encoding, on its own goroutine.
func (w sortedWrite) write(dst io.Writer, mem memory.Allocator, next func() (arrow.RecordBatch, error)) (partFile, error) {
	var sorting []parquet.SortingColumn
	for _, k := range w.keys {
		sorting = append(sorting, parquet.SortingColumn{ColumnIdx: int32(k), NullsFirst: false})
	}
	sorting = append(sorting, parquet.SortingColumn{ColumnIdx: 0})
	props, arrProps := WriterProperties(mem, sorting, w.plain, w.raw...)
	fw, err := pqarrow.NewFileWriter(w.out, dst, props, arrProps)
	if err != nil {
		return partFile{}, fmt.Errorf("persist: parquet writer: %w", err)
	}
	slots := w.slots
	var res partFile
	// Making the next batch (random reads across the chunks, or a merge)
	// overlaps encoding and compressing this one: a goroutine makes it
	// ahead.
	type gathered struct {
		rec arrow.RecordBatch
		err error
	}
	ahead := make(chan gathered, 1)
	stop := make(chan struct{})
	go func() {
		defer close(ahead)
		for {
			var rec arrow.RecordBatch
			err := slots.do(func() (err error) {
				rec, err = next()
				return err
			})
			if rec == nil && err == nil {
				return
			}
			select {
			case ahead <- gathered{rec, err}:
			case <-stop:
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		// Runs before the caller releases what next reads from: the
		// goroutine is done with it once ahead is closed.
		close(stop)
		for g := range ahead {
			if g.rec != nil {
				g.rec.Release()
			}
		}
	}()
	var groupRows, groupBytes int64
	for g := range ahead {
		rec, err := g.rec, g.err
		if err != nil {
			fw.Close()
			return partFile{}, err
		}
		err = slots.do(func() error {
			defer rec.Release()
			size := RecordBytes(rec)
			if groupRows > 0 && (groupRows+rec.NumRows() > w.maxGroupRows || groupBytes+size > RowGroupBytes) {
				if err := fw.NewBufferedRowGroupChecked(); err != nil {
					return fmt.Errorf("persist: parquet row group: %w", err)
				}
				groupRows, groupBytes = 0, 0
			}
			if err := fw.WriteBuffered(rec); err != nil {
				return fmt.Errorf("persist: writing parquet: %w", err)
			}
			groupRows += rec.NumRows()
			groupBytes += size
			res.Rows += rec.NumRows()
			return nil
		})
		if err != nil {
			fw.Close()
			return partFile{}, err
		}
		if w.pace != nil {
			if err := w.pace(); err != nil {
				fw.Close()
				return partFile{}, err
			}
		}
	}
	if err := slots.do(fw.Close); err != nil {
		return partFile{}, fmt.Errorf("persist: closing parquet writer: %w", err)
	}
	if res.Rows > 0 {
		res.MinTime, res.MaxTime = w.timeRange()
	}
	return res, nil
}

// RecordBytes is the memory of rec's buffers, dictionaries included.
func RecordBytes(rec arrow.RecordBatch) int64 {
	var s int64
	for _, c := range rec.Columns() {
		s += dataSize(c.Data())
	}
	return s
}

// partSource is a partition's chunks, laid out for sorting and gathering:
// a row is addressed as chunk<<32 | row.
type partSource struct {
	out    *arrow.Schema
	chunks []Chunk
	// cols[i][c] is chunk c's array of output column i, nil if the chunk
	// predates the column.
	cols  [][]arrow.Array
	times [][]int64
	// keys are the output columns that are strings, the sort keys.
	keys []int
	// ranks[k][c][d] is the rank, among all values of key column keys[k] in
	// the partition, of value d of chunk c's dictionary; idx[k][c] are chunk
	// c's dictionary indices of that column.
	ranks [][][]int32
	idx   [][][]int32
	// distinct[k] is the number of distinct values of key k: its ranks
	// are below it. (Counted from ranks, it took a pass over every
	// chunk's dictionary, each a prefix of the partition's: quadratic in
	// the values of a column of ids.)
	distinct []int
	// keyValid[k][c] is chunk c's validity bitmap of key k (nil: no nulls),
	// at bit offset keyOff[k][c].
	keyValid [][][]byte
	keyOff   [][]int
	// dicts[i] is the file's dictionary of output column i when it is
	// written dictionary-encoded (values sorted, so an index is a rank).
	dicts []arrow.Array
	// fixed[i] is output column i as a *fixedColumn, once gathered.
	fixed []any
}

func (s *partSource) release() {
	for _, d := range s.dicts {
		if d != nil {
			d.Release()
		}
	}
}

func newPartSource(out *arrow.Schema, chunks []Chunk, mem memory.Allocator) (*partSource, error) {
	s := &partSource{out: out, chunks: chunks, cols: make([][]arrow.Array, out.NumFields())}
	for i, f := range out.Fields() {
		s.cols[i] = make([]arrow.Array, len(chunks))
		for c, ch := range chunks {
			idx := ch.Rec.Schema().FieldIndices(f.Name)
			if len(idx) == 0 {
				if i == 0 {
					return nil, fmt.Errorf("persist: chunk without %q column", catalog.TimeColumn)
				}
				continue
			}
			a := ch.Rec.Column(idx[0])
			switch {
			case arrow.TypeEqual(a.DataType(), f.Type):
			case f.Type.ID() == arrow.STRING && a.DataType().ID() == arrow.DICTIONARY &&
				a.(*array.Dictionary).Dictionary().DataType().ID() == arrow.STRING &&
				a.(*array.Dictionary).Indices().DataType().ID() == arrow.INT32:
			default:
				return nil, fmt.Errorf("persist: column %q is %s in the buffer, %s in the schema", f.Name, a.DataType(), f.Type)
			}
			s.cols[i][c] = a
		}
		if f.Type.ID() == arrow.STRING {
			s.keys = append(s.keys, i)
		}
	}
	s.times = make([][]int64, len(chunks))
	for c := range chunks {
		s.times[c] = valuesOf[int64](s.cols[0][c])
	}
	s.dicts = make([]arrow.Array, out.NumFields())
	fields := out.Fields()
	for _, col := range s.keys {
		r, ix, vals := s.rankColumn(s.cols[col])
		s.ranks = append(s.ranks, r)
		s.distinct = append(s.distinct, len(vals))
		s.idx = append(s.idx, ix)
		kv, ko := make([][]byte, len(chunks)), make([]int, len(chunks))
		for c, a := range s.cols[col] {
			kv[c], ko[c] = validityOf(a)
		}
		s.keyValid = append(s.keyValid, kv)
		s.keyOff = append(s.keyOff, ko)
		size := 0
		for _, v := range vals {
			size += len(v)
		}
		if len(vals) <= maxDictValues && size <= maxDictBytes {
			b := array.NewStringBuilder(mem)
			b.Reserve(len(vals))
			b.ReserveData(size)
			for _, v := range vals {
				b.Append(v)
			}
			s.dicts[col] = b.NewArray()
			b.Release()
			fields[col].Type = dictType
		}
	}
	s.out = arrow.NewSchema(fields, nil)
	return s, nil
}

// rankColumn ranks the distinct values of a string column across the
// partition's chunks. Chunks of a partition share their dictionary (each
// chunk's is a prefix of it), so dictionaries are grouped by their memory and
// each group's longest one is ranked once.
func (s *partSource) rankColumn(arrs []arrow.Array) ([][]int32, [][]int32, []string) {
	type group struct {
		dict  *array.String
		ranks []int32
	}
	groups := map[uintptr]*group{}
	keyOf := func(d *array.String) uintptr {
		b := d.Data().Buffers()[1]
		if b == nil || b.Len() == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
	}
	for _, a := range arrs {
		if a == nil {
			continue
		}
		d := a.(*array.Dictionary).Dictionary().(*array.String)
		k := keyOf(d)
		if g := groups[k]; g == nil || g.dict.Len() < d.Len() {
			groups[k] = &group{dict: d}
		}
	}
	distinct := map[string]int32{}
	for _, g := range groups {
		for i := range g.dict.Len() {
			distinct[g.dict.Value(i)] = 0
		}
	}
	vals := make([]string, 0, len(distinct))
	for v := range distinct {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	for i, v := range vals {
		distinct[v] = int32(i)
	}
	for _, g := range groups {
		g.ranks = make([]int32, g.dict.Len())
		for i := range g.ranks {
			g.ranks[i] = distinct[g.dict.Value(i)]
		}
	}
	ranks := make([][]int32, len(arrs))
	idx := make([][]int32, len(arrs))
	for c, a := range arrs {
		if a == nil {
			continue
		}
		d := a.(*array.Dictionary)
		dict := d.Dictionary().(*array.String)
		ranks[c] = groups[keyOf(dict)].ranks[:dict.Len()]
		idx[c] = valuesOf[int32](d.Indices())
	}
	return ranks, idx, vals
}

// validityOf returns arr's validity bitmap and its bit offset, or nil when
// it has no nulls.
func validityOf(a arrow.Array) ([]byte, int) {
	if a == nil || a.NullN() == 0 {
		return nil, 0
	}
	return a.NullBitmapBytes(), a.Data().Offset()
}

// nullRank sorts nulls (and rows of chunks without the column) last.
const nullRank = math.MaxInt32

func (s *partSource) rank(k int, v uint64) int32 {
	c, r := v>>32, int(v&math.MaxUint32)
	ix := s.idx[k][c]
	if ix == nil {
		return nullRank
	}
	if vb := s.keyValid[k][c]; vb != nil && !bitutil.BitIsSet(vb, s.keyOff[k][c]+r) {
		return nullRank
	}
	return s.ranks[k][c][ix[r]]
}

func (s *partSource) time(v uint64) int64 { return s.times[v>>32][v&math.MaxUint32] }

// permutation is the sorted order of a partition's rows, each row as
// chunk<<shift | row: 4 bytes a row when that fits in 32 bits (a partition
// of fewer than 2^32 / ChunkRows chunks), else 8 with shift 32.
type permutation struct {
	small []uint32
	large []uint64
	shift uint
}

func (p permutation) len() int { return len(p.small) + len(p.large) }

// expand returns rows [start, end) of the order as chunk<<32 | row, the
// form gather takes, in buf.
func (p permutation) expand(start, end int, buf []uint64) []uint64 {
	if p.small == nil {
		return p.large[start:end]
	}
	buf = buf[:0]
	mask := uint64(1)<<p.shift - 1
	for _, v := range p.small[start:end] {
		u := uint64(v)
		buf = append(buf, (u>>p.shift)<<32|u&mask)
	}
	return buf
}

// sortedPermutation returns every row, sorted: a stable counting sort on the
// first key (the series' first tag: buckets are series or groups of them),
// then each bucket sorted by the other keys and time (bucket_sort.go: as
// keys made once a row, not compared through the chunks). Rows of a series
// usually arrive in time order, which pdqsort finds cheaply. The
// permutation is the largest allocation of a persist, so it is 4 bytes a
// row when it can be, and the rows are listed once.
func (s *partSource) sortedPermutation(workers int) permutation {
	maxRows := 1
	for _, c := range s.chunks {
		maxRows = max(maxRows, int(c.Rec.NumRows()))
	}
	shift := uint(bits.Len(uint(maxRows - 1)))
	if uint64(len(s.chunks))<<shift <= 1<<32 {
		return permutation{small: sortRows[uint32](s, shift, workers), shift: shift}
	}
	return permutation{large: sortRows[uint64](s, 32, workers), shift: 32}
}

// sortRows sorts the buckets of the first key on workers goroutines.
func sortRows[P uint32 | uint64](s *partSource, shift uint, workers int) []P {
	n := 0
	for _, c := range s.chunks {
		n += int(c.Rec.NumRows())
	}
	mask := uint64(1)<<shift - 1
	// wide turns an id into the chunk<<32 | row that rank and time take.
	wide := func(v P) uint64 {
		u := uint64(v)
		return (u>>shift)<<32 | u&mask
	}
	// each calls fn with every row, in buffer order. The rows are walked
	// twice rather than listed once: a second n-row list would double the
	// permutation's memory.
	each := func(fn func(v P)) {
		for c, ch := range s.chunks {
			for r := range int(ch.Rec.NumRows()) {
				fn(P(uint64(c)<<shift | uint64(r)))
			}
		}
	}
	rest := func(a, b P) int {
		wa, wb := wide(a), wide(b)
		for k := 1; k < len(s.keys); k++ {
			if c := cmp.Compare(s.rank(k, wa), s.rank(k, wb)); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(s.time(wa), s.time(wb)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	sorter := newBucketSorter(s, wide, rest)
	if len(s.keys) == 0 {
		perm := make([]P, 0, n)
		each(func(v P) { perm = append(perm, v) })
		sorter.sort(perm, nil)
		return perm
	}
	// Counting sort on key 0; ranks are dense in [0, distinct), nulls last.
	distinct := s.distinct[0]
	bucket := func(v P) int {
		r := s.rank(0, wide(v))
		if r == nullRank {
			return distinct
		}
		return int(r)
	}
	counts := make([]int, distinct+2)
	each(func(v P) { counts[bucket(v)+1]++ })
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	starts := slices.Clone(counts)
	sorted := make([]P, n)
	each(func(v P) {
		b := bucket(v)
		sorted[counts[b]] = v
		counts[b]++
	})
	// Buckets are independent: sort them on the workers.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			var scratch []bucketKey[P]
			for b := int(next.Add(1) - 1); b <= distinct; b = int(next.Add(1) - 1) {
				scratch = sorter.sort(sorted[starts[b]:starts[b+1]], scratch)
			}
		})
	}
	wg.Wait()
	return sorted
}

// gather builds the output batch of the rows perm names, in that order.
func (s *partSource) gather(perm []uint64, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, s.out.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	k := 0
	for i, f := range s.out.Fields() {
		if s.dicts[i] != nil {
			cols[i] = s.gatherDict(k, i, perm, mem)
			k++
			continue
		}
		if f.Type.ID() == arrow.STRING {
			k++
		}
		a, err := s.gatherColumn(i, f.Type, perm, mem)
		if err != nil {
			return nil, fmt.Errorf("persist: column %q: %w", f.Name, err)
		}
		cols[i] = a
	}
	return array.NewRecordBatch(s.out, cols, int64(len(perm))), nil
}

// gatherDict builds the dictionary array of key column k (output column i):
// indices are ranks in the file's dictionary.
func (s *partSource) gatherDict(k, i int, perm []uint64, mem memory.Allocator) arrow.Array {
	data, out := newRanks(len(perm), mem)
	for j, v := range perm {
		out[j] = s.rank(k, v)
	}
	return rankColumn(data, out, s.dicts[i], mem)
}

// newRanks is a buffer of n int32 ranks for rankColumn, and its values.
func newRanks(n int, mem memory.Allocator) (*memory.Buffer, []int32) {
	data := memory.NewResizableBuffer(mem)
	data.Resize(n * 4)
	return data, unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(data.Bytes()))), n)
}

// rankColumn makes the dictionary array over dict whose indices are
// ranks, data's values (newRanks), nullRank a null; it takes data.
func rankColumn(data *memory.Buffer, ranks []int32, dict arrow.Array, mem memory.Allocator) arrow.Array {
	n := len(ranks)
	var valid *memory.Buffer
	nulls := 0
	for j, r := range ranks {
		if r != nullRank {
			continue
		}
		if valid == nil {
			valid = memory.NewResizableBuffer(mem)
			valid.Resize(int(bitutil.BytesForBits(int64(n))))
			bitutil.SetBitsTo(valid.Bytes(), 0, int64(n), true)
		}
		bitutil.ClearBit(valid.Bytes(), j)
		ranks[j] = 0
		nulls++
	}
	d := array.NewData(dictType, n, []*memory.Buffer{valid, data}, nil, nulls, 0)
	d.SetDictionary(dict.Data())
	defer d.Release()
	data.Release()
	if valid != nil {
		valid.Release()
	}
	return array.MakeFromData(d)
}

// gatherColumn builds output column i of the rows perm names.
func (s *partSource) gatherColumn(i int, dt arrow.DataType, perm []uint64, mem memory.Allocator) (arrow.Array, error) {
	srcs := s.cols[i]
	switch dt.ID() {
	case arrow.INT8:
		return gatherFixed(dt, fixedColumnOf[int8](s, i), perm, mem), nil
	case arrow.INT16:
		return gatherFixed(dt, fixedColumnOf[int16](s, i), perm, mem), nil
	case arrow.INT32, arrow.DATE32:
		return gatherFixed(dt, fixedColumnOf[int32](s, i), perm, mem), nil
	case arrow.INT64, arrow.TIMESTAMP, arrow.DATE64:
		return gatherFixed(dt, fixedColumnOf[int64](s, i), perm, mem), nil
	case arrow.UINT8:
		return gatherFixed(dt, fixedColumnOf[uint8](s, i), perm, mem), nil
	case arrow.UINT16:
		return gatherFixed(dt, fixedColumnOf[uint16](s, i), perm, mem), nil
	case arrow.UINT32:
		return gatherFixed(dt, fixedColumnOf[uint32](s, i), perm, mem), nil
	case arrow.UINT64:
		return gatherFixed(dt, fixedColumnOf[uint64](s, i), perm, mem), nil
	case arrow.FLOAT32:
		return gatherFixed(dt, fixedColumnOf[float32](s, i), perm, mem), nil
	case arrow.FLOAT64:
		return gatherFixed(dt, fixedColumnOf[float64](s, i), perm, mem), nil
	case arrow.BOOL:
		b := array.NewBooleanBuilder(mem)
		defer b.Release()
		b.Reserve(len(perm))
		for _, v := range perm {
			a, r := srcs[v>>32], int(v&math.MaxUint32)
			if a == nil || a.IsNull(r) {
				b.AppendNull()
				continue
			}
			b.UnsafeAppend(a.(*array.Boolean).Value(r))
		}
		return b.NewArray(), nil
	case arrow.STRING:
		return gatherStrings(srcs, perm, mem), nil
	case arrow.BINARY:
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		b.Reserve(len(perm))
		for _, v := range perm {
			a, r := srcs[v>>32], int(v&math.MaxUint32)
			if a == nil || a.IsNull(r) {
				b.AppendNull()
				continue
			}
			b.Append(a.(*array.Binary).Value(r))
		}
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("no Parquet gather for type %s", dt)
}

// fixedColumn is a fixed-width column's values and validity in each
// chunk, looked up once a file rather than once a gathered batch (a
// segment of GiBs has thousands of chunks).
type fixedColumn[T fixedWidth] struct {
	vals  [][]T
	bits  [][]byte
	offs  []int
	nulls bool // some chunk has nulls or lacks the column
}

// fixedColumnOf is output column i as a fixedColumn, made at its first
// gather. Only the file's gatherer calls it.
func fixedColumnOf[T fixedWidth](s *partSource, i int) *fixedColumn[T] {
	if s.fixed == nil {
		s.fixed = make([]any, len(s.cols))
	}
	if f, ok := s.fixed[i].(*fixedColumn[T]); ok {
		return f
	}
	srcs := s.cols[i]
	f := &fixedColumn[T]{vals: make([][]T, len(srcs)), bits: make([][]byte, len(srcs)), offs: make([]int, len(srcs))}
	for c, a := range srcs {
		if a == nil {
			f.nulls = true
			continue
		}
		f.vals[c] = valuesOf[T](a)
		f.bits[c], f.offs[c] = validityOf(a)
		f.nulls = f.nulls || f.bits[c] != nil
	}
	s.fixed[i] = f
	return f
}

// gatherFixed copies fixed-width values into one new array.
func gatherFixed[T fixedWidth](dt arrow.DataType, col *fixedColumn[T], perm []uint64, mem memory.Allocator) arrow.Array {
	n := len(perm)
	var zero T
	width := int(unsafe.Sizeof(zero))
	data := memory.NewResizableBuffer(mem)
	data.Resize(n * width)
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data.Bytes()))), n)
	vals := col.vals
	if !col.nulls {
		for i, v := range perm {
			out[i] = vals[v>>32][v&math.MaxUint32]
		}
		d := array.NewData(dt, n, []*memory.Buffer{nil, data}, nil, 0, 0)
		defer d.Release()
		data.Release()
		return array.MakeFromData(d)
	}
	var valid *memory.Buffer
	var validBits []byte
	nulls := 0
	for i, v := range perm {
		c, r := v>>32, int(v&math.MaxUint32)
		if vals[c] == nil || col.bits[c] != nil && !bitutil.BitIsSet(col.bits[c], col.offs[c]+r) {
			if valid == nil {
				valid = memory.NewResizableBuffer(mem)
				valid.Resize(int(bitutil.BytesForBits(int64(n))))
				validBits = valid.Bytes()
				bitutil.SetBitsTo(validBits, 0, int64(n), true)
			}
			bitutil.ClearBit(validBits, i)
			out[i] = zero
			nulls++
			continue
		}
		out[i] = vals[c][r]
	}
	d := array.NewData(dt, n, []*memory.Buffer{valid, data}, nil, nulls, 0)
	defer d.Release()
	data.Release()
	if valid != nil {
		valid.Release()
	}
	return array.MakeFromData(d)
}

// gatherStrings decodes dictionary strings into one plain utf8 array.
func gatherStrings(srcs []arrow.Array, perm []uint64, mem memory.Allocator) arrow.Array {
	dicts := make([]*array.String, len(srcs))
	idx := make([][]int32, len(srcs))
	for c, a := range srcs {
		if a != nil {
			d := a.(*array.Dictionary)
			dicts[c] = d.Dictionary().(*array.String)
			idx[c] = valuesOf[int32](d.Indices())
		}
	}
	size := 0
	for _, v := range perm {
		c, r := v>>32, int(v&math.MaxUint32)
		if a := srcs[c]; a != nil && a.IsValid(r) {
			size += dicts[c].ValueLen(int(idx[c][r]))
		}
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(len(perm))
	b.ReserveData(size)
	for _, v := range perm {
		c, r := v>>32, int(v&math.MaxUint32)
		a := srcs[c]
		if a == nil || a.IsNull(r) {
			b.AppendNull()
			continue
		}
		b.Append(dicts[c].Value(int(idx[c][r])))
	}
	return b.NewArray()
}

// dictType is the type of a string column in a chunk, and of one written
// dictionary-encoded.
var dictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

type fixedWidth interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// valuesOf views the value buffer of a fixed-width array as a []T, from the
// array's first row (its offset applied).
func valuesOf[T fixedWidth](arr arrow.Array) []T {
	d := arr.Data()
	buf := d.Buffers()[1]
	if buf == nil || buf.Len() == 0 {
		return nil
	}
	b := buf.Bytes()
	var zero T
	sz := int(unsafe.Sizeof(zero))
	all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
	return all[d.Offset() : d.Offset()+d.Len()]
}

// dataSize is the memory of an array's buffers, its children's and its
// dictionary's.
func dataSize(d arrow.ArrayData) int64 {
	var s int64
	for _, b := range d.Buffers() {
		if b != nil {
			s += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		s += dataSize(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		// Dictionary() is a typed nil for other types.
		s += dataSize(d.Dictionary())
	}
	return s
}
