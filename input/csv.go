package input

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// csvChunk is a run of whole rows cut by the splitter; one chunk is one
// batch.
type csvChunk struct {
	data      []byte
	buf       []byte // data's whole buffer, recycled after parsing
	firstLine int64
	rows      int  // as counted by the splitter (a capacity hint)
	broken    bool // ends inside a row longer than maxRowBytes
	res       chan csvResult
}

type csvResult struct {
	rec                 arrow.RecordBatch
	rows                int
	firstLine, lastLine int64
	err                 error
}

// csvReader runs the pipeline: one splitter goroutine cuts chunks and
// queues each chunk's result channel on order before handing the chunk to
// the workers; Next takes result channels from order, so batches come out
// in file order whatever order the workers finish in. order's capacity
// bounds the chunks in flight.
type csvReader struct {
	cfg   *config
	cr    *countingReader
	order chan chan csvResult
	done  chan struct{}
	wg    sync.WaitGroup

	rows   int64 // data rows returned so far
	err    error // sticky
	closed bool
}

// bom is the UTF-8 byte order mark that Excel writes at the start of a CSV.
var bom = []byte{0xEF, 0xBB, 0xBF}

func openCSV(c *config, r io.Reader, delim byte) (Reader, error) {
	return openCSVLimit(c, r, delim, maxRowBytes)
}

// openCSVLimit is openCSV with a smaller row limit, for tests.
func openCSVLimit(c *config, r io.Reader, delim byte, maxRow int) (Reader, error) {
	workers := max(1, runtime.GOMAXPROCS(0))
	cr := &countingReader{r: r}
	free := make(chan []byte, 2*workers+2)
	spl := newCSVSplitter(cr, free)
	spl.maxRowSize = maxRow

	// Header and sample, read before any goroutine starts so that Open
	// fails on a bad header and the workers know the types.
	head := spl.scan(1 + sampleRows)
	if spl.err != nil {
		return nil, fmt.Errorf("input: reading %s: %w", c.name, spl.err)
	}
	if bytes.HasPrefix(spl.buf, bom) {
		spl.skip(len(bom), 0)
		head.end -= len(bom)
	}
	sc := newFieldScanner(delim)
	sc.reset(spl.buf[:head.end], 1, head.broken)
	if !sc.skipBlank() {
		return nil, c.errorAt(0, 0, "", schemaf("the file is empty: a CSV file needs a header row with the column names"))
	}
	names, err := readHeader(c, sc)
	if err != nil {
		return nil, err
	}
	headerEnd, headerLines := sc.pos, sc.line-1
	specs, strBytes, err := inferCSV(c, names, sc)
	if err != nil {
		return nil, err
	}
	spl.skip(headerEnd, headerLines)

	rd := &csvReader{
		cfg:   c,
		cr:    cr,
		order: make(chan chan csvResult, workers),
		done:  make(chan struct{}),
	}
	jobs := make(chan *csvChunk, workers)
	schema := schemaOf(specs)
	rd.wg.Add(1 + workers)
	go rd.split(spl, jobs)
	for range workers {
		p := &csvChunkParser{cfg: c, specs: specs, schema: schema, strBytes: strBytes, sc: newFieldScanner(delim)}
		go rd.work(p, jobs, free)
	}
	return rd, nil
}

// readHeader reads the column names. Names must be unique and non-empty:
// the server would refuse them, and here the message can say which field.
func readHeader(c *config, sc *fieldScanner) ([]string, error) {
	var names []string
	seen := map[string]int{}
	for {
		f, last, errLine, err := sc.next()
		if err != nil {
			return nil, c.errorAt(errLine, 0, "", fmt.Errorf("header: %w", err))
		}
		name := string(f)
		if name == "" {
			return nil, c.errorAt(1, 0, "", schemaf("header field %d is empty: every column needs a name", len(names)+1))
		}
		if j, dup := seen[name]; dup {
			return nil, c.errorAt(1, 0, name, schemaf("fields %d and %d of the header have the same name", j+1, len(names)+1))
		}
		seen[name] = len(names)
		names = append(names, name)
		if last {
			return names, nil
		}
	}
}

// A string column is dictionary-encoded (dictCol) when its sample of at
// least minDictSample rows holds at most one distinct value in
// dictSampleShare rows; counting stops past maxDictSample values.
const (
	minDictSample   = 64
	dictSampleShare = 4
	maxDictSample   = sampleRows / dictSampleShare
)

// inferCSV decides each column's kind: --schema first, then the time
// column (always a timestamp), then what the sample rows held. Rows that
// do not scan are skipped here: the workers report them at their line.
func inferCSV(c *config, names []string, sc *fieldScanner) ([]colSpec, []int, error) {
	timeIdx, err := timeColumnIndex(names, c.TimeColumn)
	if err != nil {
		return nil, nil, c.errorAt(0, 0, "", err)
	}
	for name := range c.schema {
		if indexOf(names, name) < 0 && !(name == TimeColumnName && timeIdx >= 0) {
			return nil, nil, c.errorAt(0, 0, "", schemaf("--schema names %q, which is not a column (the columns are %s)", name, listNames(names)))
		}
	}
	kinds := make([]kindSet, len(names))
	bytesSum := make([]int, len(names))
	distinct := make([]map[string]bool, len(names)) // up to maxDictSample values
	rows := 0
	for rows < sampleRows && sc.skipBlank() {
		for col := 0; ; col++ {
			f, last, _, err := sc.next()
			if err != nil {
				sc.skipRow()
				break
			}
			if col < len(names) && len(f) > 0 {
				kinds[col].observeText(f)
				bytesSum[col] += len(f)
				if distinct[col] == nil {
					distinct[col] = map[string]bool{}
				}
				if m := distinct[col]; len(m) <= maxDictSample {
					m[string(f)] = true
				}
			}
			if last {
				break
			}
		}
		rows++
	}
	specs := make([]colSpec, len(names))
	strBytes := make([]int, len(names))
	for i, name := range names {
		s := colSpec{name: name, kind: kinds[i].kind(), origin: originInferred}
		if k, ok := c.schema[name]; ok {
			s.kind, s.origin = k, originSchema
		}
		if i == timeIdx {
			if k, ok := c.schema[TimeColumnName]; ok && s.origin != originSchema {
				s.kind, s.origin = k, originSchema
			}
			if s.origin == originSchema && s.kind != KindTimestamp {
				return nil, nil, c.errorAt(0, 0, name, schemaf("--schema makes the time column a%s %s; it is always a timestamp (set --time-format to read numbers)", article(s.kind), s.kind))
			}
			s.name, s.kind, s.origin = TimeColumnName, KindTimestamp, originTime
		}
		if rows > 0 {
			strBytes[i] = bytesSum[i]/rows + 1
		}
		// With Options.DictionaryStrings, a string column whose sample
		// repeats its values (at most one distinct value in
		// dictSampleShare of the rows) goes out dictionary-encoded
		// (dictCol).
		s.dict = c.DictionaryStrings && s.kind == KindString && rows >= minDictSample && len(distinct[i])*dictSampleShare <= rows
		specs[i] = s
	}
	return specs, strBytes, nil
}

// split is the splitter goroutine.
func (rd *csvReader) split(spl *csvSplitter, jobs chan<- *csvChunk) {
	defer rd.wg.Done()
	defer close(jobs)
	defer close(rd.order)
	n := rd.cfg.BatchRows
	for {
		line := spl.line
		res := spl.scan(n)
		if spl.err != nil {
			rd.push(csvResult{err: fmt.Errorf("input: reading %s: %w", rd.cfg.name, spl.err)})
			return
		}
		if res.end == 0 {
			return // end of file
		}
		ch := &csvChunk{firstLine: line, rows: res.rows, broken: res.broken, res: make(chan csvResult, 1)}
		ch.data, ch.buf = spl.cut(res, n)
		select {
		case rd.order <- ch.res:
		case <-rd.done:
			return
		}
		select {
		case jobs <- ch:
		case <-rd.done:
			return
		}
		if res.broken {
			return
		}
	}
}

// push queues a result that needs no worker (a read error).
func (rd *csvReader) push(r csvResult) {
	ch := make(chan csvResult, 1)
	ch <- r
	select {
	case rd.order <- ch:
	case <-rd.done:
	}
}

func (rd *csvReader) work(p *csvChunkParser, jobs <-chan *csvChunk, free chan<- []byte) {
	defer rd.wg.Done()
	for ch := range jobs {
		select {
		case <-rd.done:
			return
		default:
		}
		ch.res <- p.parse(ch)
		select {
		case free <- ch.buf[:0]:
		default:
		}
	}
}

func (rd *csvReader) Next() (Batch, error) {
	if rd.closed {
		return Batch{}, errClosed
	}
	for rd.err == nil {
		resc, ok := <-rd.order
		if !ok {
			rd.err = io.EOF
			break
		}
		res := <-resc
		if res.err != nil {
			rd.err = res.err
			break
		}
		if res.rows == 0 { // blank lines only
			res.rec.Release()
			continue
		}
		b := Batch{
			Table: rd.cfg.Table, Record: res.rec,
			FirstLine: res.firstLine, LastLine: res.lastLine,
			FirstRow: rd.rows, LastRow: rd.rows + int64(res.rows) - 1,
		}
		rd.rows += int64(res.rows)
		return b, nil
	}
	return Batch{}, rd.err
}

func (rd *csvReader) BytesRead() int64 { return rd.cr.n.Load() }

// Close stops the goroutines and releases the batches parsed ahead. A
// splitter blocked in a Read of the underlying reader (a pipe) is waited
// for until that Read returns.
func (rd *csvReader) Close() error {
	if rd.closed {
		return nil
	}
	rd.closed = true
	close(rd.done)
	rd.wg.Wait()
	// The splitter has closed order; every worker has returned, so any
	// result channel is either filled or will never be.
	for resc := range rd.order {
		select {
		case res := <-resc:
			if res.rec != nil {
				res.rec.Release()
			}
		default:
		}
	}
	return nil
}
