package input

import "github.com/apache/arrow-go/v18/arrow"

// recordSource yields the record batches of a Parquet or Arrow file; each
// is owned by the caller. next returns io.EOF after the last.
type recordSource interface {
	next() (arrow.RecordBatch, error)
	close() error
}

// recordReader re-chunks a source's batches to at most BatchRows rows
// (zero-copy slices) and fixes their time column.
type recordReader struct {
	cfg   *config
	src   recordSource
	fix   *timeFix // nil: batches pass as they are
	bytes func() int64

	cur  arrow.RecordBatch // the source batch being sliced
	off  int64             // next row of cur
	rows int64             // rows returned so far
	err  error
	done bool
}

func (rd *recordReader) Next() (Batch, error) {
	if rd.done {
		return Batch{}, errClosed
	}
	if rd.err != nil {
		return Batch{}, rd.err
	}
	for rd.cur == nil || rd.off >= rd.cur.NumRows() {
		if rd.cur != nil {
			rd.cur.Release()
			rd.cur = nil
		}
		rec, err := rd.src.next()
		if err != nil {
			rd.err = err
			return Batch{}, err
		}
		rd.cur, rd.off = rec, 0
	}
	n := min(rd.cur.NumRows()-rd.off, int64(rd.cfg.BatchRows))
	var rec arrow.RecordBatch
	if rd.off == 0 && n == rd.cur.NumRows() {
		rd.cur.Retain()
		rec = rd.cur
	} else {
		rec = rd.cur.NewSlice(rd.off, rd.off+n)
	}
	rd.off += n
	if rd.fix != nil {
		fixed, err := rd.fix.apply(rec, rd.rows)
		rec.Release()
		if err != nil {
			rd.err = err
			return Batch{}, err
		}
		rec = fixed
	}
	b := Batch{Table: rd.cfg.Table, Record: rec, FirstRow: rd.rows, LastRow: rd.rows + n - 1}
	rd.rows += n
	return b, nil
}

func (rd *recordReader) BytesRead() int64 { return rd.bytes() }

func (rd *recordReader) Close() error {
	if rd.done {
		return nil
	}
	rd.done = true
	if rd.cur != nil {
		rd.cur.Release()
		rd.cur = nil
	}
	return rd.src.close()
}
