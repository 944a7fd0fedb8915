package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// cpuCSV is a small table with every kind of value the CLI tests check:
// a quoted field with a comma and a quote, an empty (null) field,
// booleans, integers and floats.
const cpuCSV = `time,host,usage,n,ok
2026-01-05T12:00:00Z,h1,1.5,1,true
2026-01-05T12:00:01Z,h2,2.25,2,false
2026-01-05T12:00:02Z,"h3, ""east""",,3,true
2026-01-05T12:00:03Z,h1,4,4,
2026-01-05T12:00:04.123456789Z,h2,-0.5,5,false
`

// TestCLIWriteThenQuery loads a CSV with apron write and reads it back
// with apron query in every output format, through the real binary.
func TestCLIWriteThenQuery(t *testing.T) {
	s := startServer(t, t.TempDir())
	host := []string{"--host", s.Addr}
	csvPath := writeTemp(t, "cpu.csv", []byte(cpuCSV))
	r := mustApron(t, "", append([]string{"write", "--db", "metrics", "--table", "cpu", csvPath}, host...)...)
	if !strings.HasPrefix(r.stdout, "wrote 5 rows in ") {
		t.Fatalf("write summary %q, want 'wrote 5 rows in …'", r.stdout)
	}
	if strings.Contains(r.stderr, "\x1b") {
		t.Errorf("stderr not on a terminal has escape codes: %q", r.stderr)
	}
	const sql = "SELECT time, host, usage, n, ok FROM metrics.cpu ORDER BY time"
	for _, format := range []string{"csv", "json", "jsonl"} {
		r := mustApron(t, "", append([]string{"query", "--format", format, sql}, host...)...)
		checkGolden(t, "query."+format, r.stdout)
	}
	// Not a terminal: csv is the default.
	r = mustApron(t, "", append([]string{"query", sql}, host...)...)
	checkGolden(t, "query.csv", r.stdout)
	// The SQL from stdin, --db for unqualified names.
	r = mustApron(t, "SELECT count(*) AS n FROM cpu", append([]string{"query", "--db", "metrics"}, host...)...)
	if r.stdout != "n\n5\n" {
		t.Errorf("count from stdin SQL with --db: %q", r.stdout)
	}
	for _, width := range []string{"80", "40"} {
		r := mustApron(t, "", append([]string{"query", "--format", "table", "--max-width", width, sql}, host...)...)
		checkGolden(t, "query.table"+width, r.stdout)
	}

	dir := t.TempDir()
	arrowPath, pqPath := filepath.Join(dir, "cpu.arrow"), filepath.Join(dir, "cpu.parquet")
	mustApron(t, "", append([]string{"query", "--format", "arrow", "--output", arrowPath, sql}, host...)...)
	r = mustApron(t, "", append([]string{"query", "--output", pqPath, sql}, host...)...) // format from the extension
	if !strings.Contains(r.stderr, "wrote 5 rows to "+pqPath) {
		t.Errorf("--output note %q", r.stderr)
	}
	checkCLIArrowFile(t, arrowPath, 5)
	checkCLIParquetFile(t, pqPath, 5)
	if py := os.Getenv("APRON_TEST_PYTHON"); py != "" {
		script := fmt.Sprintf(`import pyarrow.parquet as pq, pyarrow.ipc as ipc
t = pq.read_table(%q); assert t.num_rows == 5, t.num_rows; assert str(t.schema.field("time").type) == "timestamp[ns]", t.schema
a = ipc.open_stream(%q).read_all(); assert a.num_rows == 5; assert a.column("host").to_pylist()[2] == 'h3, "east"'
print("ok")`, pqPath, arrowPath)
		out, err := exec.Command(py, "-c", script).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok") {
			t.Errorf("pyarrow reading the CLI's files: %v\n%s", err, out)
		}
	}

	// An INSERT through query says how many rows it wrote.
	r = mustApron(t, "", append([]string{"query", "INSERT INTO metrics.cpu (time, host, usage) VALUES ('2026-01-05T13:00:00Z', 'h9', 9.5)"}, host...)...)
	if !strings.HasPrefix(r.stdout, "1 rows written") {
		t.Errorf("INSERT: %q", r.stdout)
	}
	// A server error: its code and message, exit 1, no output file left.
	bad := filepath.Join(dir, "bad.parquet")
	r = runApron(t, "", append([]string{"query", "-o", bad, "SELECT * FROM metrics.nope"}, host...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") && !strings.Contains(r.stderr, "INVALID_ARGUMENT") || !strings.Contains(r.stderr, "nope") {
		t.Errorf("query of a missing table: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a failed query left %s (%v)", bad, err)
	}
	// A usage error: exit 2.
	if r := runApron(t, "", append([]string{"query", "--format", "xml", "SELECT 1"}, host...)...); r.code != 2 {
		t.Errorf("--format xml: exit %d, stderr %q", r.code, r.stderr)
	}
}

func checkCLIArrowFile(t *testing.T, path string, rows int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rdr, err := ipc.NewReader(fh, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("%s is not an Arrow IPC stream: %v", path, err)
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil || n != rows {
		t.Errorf("%s: %d rows (%v), want %d", path, n, err, rows)
	}
	if got := rdr.Schema().Field(0).Type; !arrow.TypeEqual(got, &arrow.TimestampType{Unit: arrow.Nanosecond}) {
		t.Errorf("%s: time is %s, want timestamp[ns]", path, got)
	}
}

func checkCLIParquetFile(t *testing.T, path string, rows int64) {
	t.Helper()
	// Not a checked allocator: arrow-go v18.8.0's DELTA_BINARY_PACKED
	// decoder (the CLI's time columns) never releases a buffer of its own,
	// a leak of the reader's that the garbage collector makes harmless.
	mem := memory.DefaultAllocator
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("%s is not Parquet: %v", path, err)
	}
	defer pf.Close()
	if n := pf.NumRows(); n != rows {
		t.Errorf("%s: %d rows, want %d", path, n, rows)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	host := tbl.Column(1).Data().Chunk(0).(*array.String)
	if got := host.Value(2); got != `h3, "east"` {
		t.Errorf("%s: host of row 3 %q", path, got)
	}
}

// queryCSV runs SQL with apron query and returns its CSV output.
func queryCSV(t *testing.T, addr, sql string) string {
	t.Helper()
	return mustApron(t, "", "query", "--host", addr, "--format", "csv", sql).stdout
}

// TestCLIWriteFormats loads each input format and checks the rows by SQL.
func TestCLIWriteFormats(t *testing.T) {
	s := startServer(t, t.TempDir())
	host := []string{"--host", s.Addr}

	jsonl := `{"time":"2026-01-05T12:00:00Z","host":"h1","usage":1.5,"n":1}
{"time":"2026-01-05T12:00:01Z","host":"h2","usage":2,"n":2,"extra":"x"}

{"time":"2026-01-05T12:00:02Z","host":null,"usage":3.25,"n":3}
`
	mustApron(t, "", append([]string{"write", "--db", "f", "--table", "j", writeTemp(t, "j.jsonl", []byte(jsonl))}, host...)...)
	if got := queryCSV(t, s.Addr, "SELECT host, usage, n FROM f.j ORDER BY time"); got != "host,usage,n\nh1,1.5,1\nh2,2,2\n,3.25,3\n" {
		t.Errorf("jsonl rows:\n%s", got)
	}

	lp := `# telegraf output
cpu,host=h1,region=east usage_user=1.5,usage_system=2i,ok=true 1767614400000000000
cpu,host=h2 usage_user=2.5,usage_system=3i 1767614401000000000
mem,host=h1 used=1024u,note="a \"quoted\" note" 1767614400000000000
`
	r := mustApron(t, "", append([]string{"write", "--db", "tg", writeTemp(t, "m.lp", []byte(lp))}, host...)...)
	if !strings.HasPrefix(r.stdout, "wrote 3 rows") {
		t.Errorf("lp summary %q", r.stdout)
	}
	if got := queryCSV(t, s.Addr, "SELECT time, host, region, usage_user, usage_system, ok FROM tg.cpu ORDER BY time"); got !=
		"time,host,region,usage_user,usage_system,ok\n2026-01-05T12:00:00Z,h1,east,1.5,2,true\n2026-01-05T12:00:01Z,h2,,2.5,3,\n" {
		t.Errorf("lp cpu rows:\n%s", got)
	}
	if got := queryCSV(t, s.Addr, "SELECT host, used, note FROM tg.mem"); got != "host,used,note\nh1,1024,\"a \"\"quoted\"\" note\"\n" {
		t.Errorf("lp mem rows:\n%s", got)
	}

	// Parquet and Arrow (file and stream) made here with arrow-go.
	mem := memory.NewGoAllocator()
	rec := sampleRecord(t, mem, 1000)
	defer rec.Release()
	dir := t.TempDir()
	pqPath := filepath.Join(dir, "x.parquet")
	{
		fh, _ := os.Create(pqPath)
		w, err := pqarrow.NewFileWriter(rec.Schema(), fh, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(300)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	filePath, streamPath := filepath.Join(dir, "x.arrow"), filepath.Join(dir, "x.arrows")
	{
		var buf bytes.Buffer
		fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(rec)
		fw.Close()
		os.WriteFile(filePath, buf.Bytes(), 0o644)
		buf.Reset()
		sw := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		sw.Write(rec)
		sw.Close()
		os.WriteFile(streamPath, buf.Bytes(), 0o644)
	}
	for table, path := range map[string]string{"pq": pqPath, "af": filePath, "as": streamPath} {
		mustApron(t, "", append([]string{"write", "--db", "f", "--table", table, "--batch-rows", "256", path}, host...)...)
		if got := queryCSV(t, s.Addr, "SELECT count(*) AS n, sum(v) AS s, count(DISTINCT host) AS h FROM f."+table); got != "n,s,h\n1000,499500,10\n" {
			t.Errorf("%s (%s):\n%s", table, path, got)
		}
	}
	// Arrow from stdin (a stream), format detected from its first bytes.
	stream, _ := os.ReadFile(streamPath)
	mustApron(t, string(stream), append([]string{"write", "--db", "f", "--table", "stdin", "-"}, host...)...)
	if got := queryCSV(t, s.Addr, "SELECT count(*) AS n FROM f.stdin"); got != "n\n1000\n" {
		t.Errorf("arrow from stdin: %s", got)
	}
}

// sampleRecord is n rows: time (ns, one per second), host (10 values),
// v = 0..n-1.
func sampleRecord(t *testing.T, mem memory.Allocator, n int) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1767614400_000000000 + int64(i)*1e9))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", i%10))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// TestCLIWriteBadCSV: a value that does not parse is reported with its
// file, line and column, and the rows before it that were written.
func TestCLIWriteBadCSV(t *testing.T) {
	s := startServer(t, t.TempDir())
	csv := "time,host,usage\n" +
		"2026-01-05T12:00:00Z,h1,1.5\n" +
		"2026-01-05T12:00:01Z,h2,2.5\n" +
		"2026-01-05T12:00:02Z,h3,abc\n" +
		"2026-01-05T12:00:03Z,h4,4.5\n"
	path := writeTemp(t, "bad.csv", []byte(csv))
	// usage is a float (--schema: inference would make it a string, from
	// a sample that holds "abc"); line 4 does not parse.
	r := runApron(t, "", "write", "--host", s.Addr, "--db", "m", "--table", "t", "--batch-rows", "2", "--parallel", "1", "--schema", "usage:float64", path)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{path + ":4", `"usage"`, "abc", "2 rows were durably written"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if got := queryCSV(t, s.Addr, "SELECT host FROM m.t ORDER BY time"); got != "host\nh1\nh2\n" {
		t.Errorf("rows written: %q", got)
	}
	// Bad quoting names its line too.
	path = writeTemp(t, "quote.csv", []byte("time,host\n2026-01-05T12:00:00Z,h1\n2026-01-05T12:00:01Z,\"h2\n"))
	r = runApron(t, "", "write", "--host", s.Addr, "--db", "m", "--table", "q", path)
	if r.code != 1 || !strings.Contains(r.stderr, path+":3") {
		t.Errorf("unterminated quote: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestCLIWriteRejectedBatch: a batch the server refuses is reported with
// the server's error, the lines of the batch, and the rows written
// before it.
func TestCLIWriteRejectedBatch(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-value-size", "64")
	var b strings.Builder
	b.WriteString("time,host\n")
	for i := range 8 {
		h := fmt.Sprintf("h%d", i)
		if i == 4 { // line 6, in the third batch of two
			h = strings.Repeat("x", 100)
		}
		fmt.Fprintf(&b, "2026-01-05T12:00:%02dZ,%s\n", i, h)
	}
	path := writeTemp(t, "big.csv", []byte(b.String()))
	r := runApron(t, "", "write", "--host", s.Addr, "--db", "m", "--table", "t", "--batch-rows", "2", "--parallel", "1", path)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"INVALID_ARGUMENT", "max-value-size", path + " lines 6-7", "4 rows were durably written"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if got := queryCSV(t, s.Addr, "SELECT count(*) AS n FROM m.t"); got != "n\n4\n" {
		t.Errorf("rows in the table: %q", got)
	}
}

// TestCLIWriteProgressLines: not on a terminal, progress is plain lines
// on stderr, without escape codes.
func TestCLIWriteProgressLines(t *testing.T) {
	s := startServer(t, t.TempDir())
	var b strings.Builder
	b.WriteString("time,host,v\n")
	for i := range 200_000 {
		fmt.Fprintf(&b, "%d,h%d,%d\n", 1767614400_000000000+int64(i), i%100, i)
	}
	path := writeTemp(t, "p.csv", []byte(b.String()))
	r := mustApron(t, "", "write", "--host", s.Addr, "--db", "m", "--table", "p", "--batch-rows", "1000", "--progress-interval", "1ms", "--time-format", "ns", path)
	if !strings.Contains(r.stderr, "apron write: ") || !strings.Contains(r.stderr, "rows written") {
		t.Errorf("no progress line on stderr:\n%s", r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\x1b\r") {
		t.Errorf("progress not on a terminal has escape codes or carriage returns: %q", r.stderr[:min(len(r.stderr), 500)])
	}
	if !strings.HasPrefix(r.stdout, "wrote 200,000 rows in ") {
		t.Errorf("summary %q", r.stdout)
	}
	if got := queryCSV(t, s.Addr, "SELECT count(*) AS n, sum(v) AS s FROM m.p"); got != "n,s\n200000,19999900000\n" {
		t.Errorf("rows: %q", got)
	}
}

// TestCLIShowVersionCompletion covers the small commands.
func TestCLIShowVersionCompletion(t *testing.T) {
	s := startServer(t, t.TempDir())
	mustApron(t, "", "write", "--host", s.Addr, "--db", "metrics", "--table", "cpu", writeTemp(t, "cpu.csv", []byte(cpuCSV)))
	r := mustApron(t, "", "show", "tables", "--host", s.Addr, "--format", "csv")
	if !strings.Contains(r.stdout, "database_name,table_name") || !strings.Contains(r.stdout, "metrics,cpu,") {
		t.Errorf("show tables:\n%s", r.stdout)
	}
	r = mustApron(t, "", "show", "columns", "--db", "metrics", "--host", s.Addr, "--format", "table", "--max-width", "100")
	if !strings.Contains(r.stdout, "usage") || !strings.Contains(r.stdout, "rows") {
		t.Errorf("show columns:\n%s", r.stdout)
	}
	if r := runApron(t, "", "show", "nothing", "--host", s.Addr); r.code != 2 {
		t.Errorf("show nothing: exit %d, %s", r.code, r.stderr)
	}
	r = mustApron(t, "", "version")
	for _, want := range []string{"apron ", "go       go1.", "arrow-go v18.", "duckdb   v1."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version lacks %q:\n%s", want, r.stdout)
		}
	}
	r = mustApron(t, "", "completion", "bash")
	if !strings.Contains(r.stdout, "__start_apron") {
		t.Errorf("bash completion script:\n%.300s", r.stdout)
	}
	r = mustApron(t, "", "__complete", "query", "--for")
	if !strings.Contains(r.stdout, "--format") {
		t.Errorf("completion of query --for:\n%s", r.stdout)
	}
	r = mustApron(t, "", "__complete", "serve", "--data")
	if !strings.Contains(r.stdout, "--data-dir") {
		t.Errorf("completion of serve --data:\n%s", r.stdout)
	}
}
