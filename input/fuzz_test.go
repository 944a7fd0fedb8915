package input

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FuzzCSV: the CSV reader must never panic, hang or leak, whatever the
// bytes; errors are fine. Small batches and a small row limit make every
// path (several chunks, the splitter giving up) reachable with short
// inputs.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n",
		"time,v\n2024-01-02T03:04:05Z,1.5\n1704164645,2\n",
		"a,b\n\"x,\"\"y\"\"\n\",2\r\n",
		"\xEF\xBB\xBFa\n\n1\n\"",
		"a,b\n1,\"x\n",
		"a,b\nx\"y,1\n",
		"a\n1\n2.5\ntrue\n",
	} {
		f.Add([]byte(s), uint8(2), "")
	}
	f.Add([]byte("n,t\n1,2\n"), uint8(1), "n:uint64,t:timestamp")
	f.Fuzz(func(t *testing.T, data []byte, batchRows uint8, schema string) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		c, err := newConfig("fuzz.csv", Options{Format: CSV, BatchRows: int(batchRows%8) + 1, Schema: schema, Mem: mem})
		if err != nil {
			return
		}
		rd, err := openCSVLimit(c, bytes.NewReader(data), ',', 32)
		if err != nil {
			var ie *Error
			if !errors.As(err, &ie) && !errors.Is(err, ErrSchema) {
				t.Fatalf("Open error %v is neither an *Error nor ErrSchema", err)
			}
			return
		}
		defer rd.Close()
		want, checkValues := stdlibCSV(data, schema)
		var rows int64
		for {
			b, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var ie *Error
				if !errors.As(err, &ie) {
					t.Fatalf("Next error %v is not an *Error", err)
				}
				// The harness's row limit is 32 bytes, which encoding/csv
				// does not have: a longer row is refused by design.
				if checkValues && !errors.Is(err, errRowTooLong) {
					t.Fatalf("encoding/csv reads the file, we fail: %v", err)
				}
				return
			}
			if b.FirstRow != rows || b.LastRow-b.FirstRow+1 != b.Record.NumRows() || b.FirstLine > b.LastLine {
				t.Fatalf("batch positions %+v", b)
			}
			if checkValues {
				for c, col := range b.Record.Columns() {
					str, ok := col.(*array.String)
					if !ok {
						continue
					}
					for i := range str.Len() {
						got := str.Value(i)
						if str.IsNull(i) {
							got = ""
						}
						if w := want[rows+int64(i)][c]; got != w {
							t.Fatalf("row %d column %d: %q, encoding/csv %q", rows+int64(i), c, got, w)
						}
					}
				}
			}
			rows += b.Record.NumRows()
			b.Record.Release()
		}
		if checkValues && rows != int64(len(want)) {
			t.Fatalf("%d rows, encoding/csv %d", rows, len(want))
		}
	})
}

// stdlibCSV reads data with encoding/csv, when the file is one whose
// reading both readers agree on: no BOM or CR (line-end rules differ
// slightly), valid UTF-8 (we check it, encoding/csv does not), a header of
// unique non-empty names without "time" (ours would parse it as times),
// no --schema. It returns the data rows and whether to compare.
func stdlibCSV(data []byte, schema string) ([][]string, bool) {
	if schema != "" || bytes.HasPrefix(data, bom) || bytes.IndexByte(data, '\r') >= 0 || !utf8.Valid(data) {
		return nil, false
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, false
	}
	seen := map[string]bool{}
	for _, name := range recs[0] {
		if name == "" || name == TimeColumnName || seen[name] {
			return nil, false
		}
		seen[name] = true
	}
	return recs[1:], true
}
