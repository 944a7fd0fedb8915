package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// batchDump is a batch as text: easy to compare in a table test.
type batchDump struct {
	Table               string
	Schema              string // "name:type,…"
	Rows                []string
	FirstLine, LastLine int64
	FirstRow, LastRow   int64
}

// cell formats one value: timestamps as their int64 nanoseconds, strings
// quoted, nulls as "null".
func cell(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch v := a.(type) {
	case *array.Timestamp:
		return strconv.FormatInt(int64(v.Value(i)), 10)
	case *array.String:
		return strconv.Quote(v.Value(i))
	case *array.Float64:
		return strconv.FormatFloat(v.Value(i), 'g', -1, 64)
	}
	return a.ValueStr(i)
}

func dumpRecord(rec arrow.RecordBatch) (schema string, rows []string) {
	var fs []string
	for _, f := range rec.Schema().Fields() {
		fs = append(fs, f.Name+":"+f.Type.String())
	}
	for i := range int(rec.NumRows()) {
		var cs []string
		for _, c := range rec.Columns() {
			cs = append(cs, cell(c, i))
		}
		rows = append(rows, strings.Join(cs, " "))
	}
	return strings.Join(fs, ","), rows
}

// readAll opens data with opts (the checked allocator is set here) and
// returns every batch as text, or the first error; it checks that no
// Arrow memory is left.
func readAll(t *testing.T, name string, r io.Reader, opts Options) ([]batchDump, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opts.Mem = mem
	rd, err := Open(name, r, -1, opts)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []batchDump
	for {
		b, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		s, rows := dumpRecord(b.Record)
		out = append(out, batchDump{Table: b.Table, Schema: s, Rows: rows, FirstLine: b.FirstLine, LastLine: b.LastLine, FirstRow: b.FirstRow, LastRow: b.LastRow})
		b.Record.Release()
	}
}

func readString(t *testing.T, name, data string, opts Options) ([]batchDump, error) {
	t.Helper()
	return readAll(t, name, strings.NewReader(data), opts)
}

// allRows concatenates the rows of every batch.
func allRows(bs []batchDump) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Rows...)
	}
	return out
}

func mustRead(t *testing.T, name, data string, opts Options) []batchDump {
	t.Helper()
	bs, err := readString(t, name, data, opts)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return bs
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// wantError checks that err is an *Error with the message want.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ie *Error
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) is not an *input.Error", err, err)
	}
	if err.Error() != want {
		t.Errorf("error:\ngot  %s\nwant %s", err.Error(), want)
	}
}

// onlyReader hides every method of r but Read (stdin, a pipe).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// genCPU writes a CPU-like CSV: time, host (200 values), region, six
// float64 columns and an int64 column.
func genCPU(rows int, epoch bool) []byte {
	var b bytes.Buffer
	b.WriteString("time,host,region,usage_user,usage_system,usage_idle,usage_iowait,usage_irq,usage_steal,procs\n")
	regions := []string{"us-east-1", "us-west-2", "eu-central-1", "ap-south-1"}
	t0 := int64(1700000000) * 1e9
	for i := range rows {
		ts := t0 + int64(i)*1e9
		if epoch {
			b.WriteString(strconv.FormatInt(ts, 10))
		} else {
			b.WriteString(fmt.Sprintf("2023-11-14T%02d:%02d:%02dZ", (22+i/3600)%24, (i/60)%60, i%60))
		}
		fmt.Fprintf(&b, ",host_%d,%s", i%200, regions[i%4])
		for c := range 6 {
			v := float64((i*7+c*13)%10000) / 100
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(v, 'f', 2, 64))
		}
		fmt.Fprintf(&b, ",%d\n", (i*31)%5000)
	}
	return b.Bytes()
}
