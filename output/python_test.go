package output

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readersScript reads what the writers wrote with pyarrow and, when it is
// installed, DuckDB: the readers `apron query` output is meant for.
const readersScript = `
import sys, pyarrow as pa, pyarrow.ipc, pyarrow.parquet as pq, json
d = sys.argv[1]
with open(d + "/out.arrow", "rb") as f:
    t = pa.ipc.open_stream(f).read_all()
assert t.num_rows == 5, t.num_rows
assert str(t.schema.field("time").type) == "timestamp[ns]", t.schema.field("time").type
assert t.column("host")[2].as_py().startswith("line1\nline2\x1b[31m")
p = pq.read_table(d + "/out.parquet")
assert p.num_rows == 5, p.num_rows
assert str(p.schema.field("time").type) == "timestamp[ns]", p.schema.field("time").type
assert str(p.schema.field("ts_us_ny").type) == "timestamp[us, tz=America/New_York]", p.schema.field("ts_us_ny").type
assert p.column("u64")[2].as_py() == 18446744073709551615
rows = [json.loads(l) for l in open(d + "/out.jsonl")]
assert rows[0]["time"] == "2026-01-05T12:00:00Z" and len(rows) == 5
try:
    import duckdb
except ImportError:
    print("ok (no duckdb)")
    sys.exit(0)
con = duckdb.connect()
r = con.sql(f"select count(*), typeof(any_value(time)), max(u64) from read_parquet('{d}/out.parquet')").fetchall()
assert r == [(5, "TIMESTAMP_NS", 18446744073709551615)], r
r = con.sql(f"select count(*), count(host), max(i64) from read_csv('{d}/out.csv')").fetchall()
assert r == [(5, 4, 9223372036854775807)], r
r = con.sql(f"select count(*), typeof(any_value(time)) from read_csv('{d}/out.csv')").fetchall()
assert r[0][0] == 5, r
r = con.sql(f"select count(*), count(host) from read_json('{d}/out.json')").fetchall()
assert r == [(5, 4)], r
r = con.sql(f"select count(*) from read_json('{d}/out.jsonl', format='newline_delimited')").fetchall()
assert r == [(5,)], r
arrow_tbl = t
r = con.sql("select count(*), max(i8) from arrow_tbl").fetchall()
assert r == [(5, 127)], r
print("ok")
`

// TestPythonReaders: pyarrow (and DuckDB, if the Python has it) read the
// Arrow stream, the Parquet file, CSV and JSON. APRON_TEST_PYTHON names a
// Python with pyarrow (test.sh makes one); without it the test is skipped.
func TestPythonReaders(t *testing.T) {
	python := os.Getenv("APRON_TEST_PYTHON")
	if python == "" {
		t.Skip("APRON_TEST_PYTHON is not set")
	}
	dir := t.TempDir()
	mem := checkedMem(t)
	schema := allTypesSchema()
	recs := buildBatches(t, mem, schema, allTypesRows())
	defer releaseAll(recs)
	for _, f := range []Format{Arrow, Parquet, CSV, JSON, JSONL} {
		out := writeAll(t, f, schema, recs, Options{Mem: mem})
		if err := os.WriteFile(filepath.Join(dir, "out."+string(f)), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(python, "-c", readersScript, dir)
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if !strings.HasPrefix(string(got), "ok") {
		t.Fatalf("readers said %s", got)
	}
	t.Logf("%s", got)
}
